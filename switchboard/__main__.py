from switchboard.cli import main

raise SystemExit(main())

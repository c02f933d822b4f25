import sys

from common.events.generate import main

raise SystemExit(main(sys.argv[1:]))

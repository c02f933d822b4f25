"""The `switchboard` command line: runs the API, the worker, or both on an embedded Redis."""

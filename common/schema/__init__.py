"""JSON Schemas a caller sends (a tool's `parameters`) treated as data: accepted only when they resolve
every reference within themselves and every pattern runs on a linear-time engine (`accept`), and applied
to a call's arguments under a budget of work no schema can exceed (`budget`), off the event loop when a
check is more than small (`checks`)."""

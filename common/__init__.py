"""Code every package shares that holds no Redis: JSON and ids, the session events' shapes, JSON Schema
checks, provider addresses, structured logs, task and process helpers. It depends on no other package of
ours."""

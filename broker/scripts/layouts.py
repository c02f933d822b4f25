"""The keys and arguments the script families' libraries declare (`lua/lib/{run,call,client}.lua`), by name.

Each of those scripts also takes its session's partition's (`Scripts.run(..., partition=...)`)."""

from __future__ import annotations

from broker.keys import KeySpace

# A script's own keys and arguments are added to a library's (`{**keys, "receipt": ...}`).
Named = tuple[dict[str, str], dict[str, str | int]]


def run_names(keys: KeySpace, session_id: str, run_id: str) -> Named:
    s = keys.session(session_id)
    return (
        {
            "meta": s.meta,
            "events": s.events,
            "run": s.run,
            "inbox": s.inbox,
            "calls": s.calls,
            "owed": s.owed,
            "names": s.names,
            "queue": s.queue,
        },
        {"channel": s.live, "sid": session_id, "run_id": run_id},
    )


def call_names(keys: KeySpace, session_id: str, call_id: str, client_id: str) -> Named:
    s = keys.session(session_id)
    return (
        {"meta": s.meta, "events": s.events, "calls": s.calls, "owed": s.owed, "run": s.run},
        {"channel": s.live, "sid": session_id, "call_id": call_id, "cid": client_id},
    )


def client_names(keys: KeySpace, session_id: str, client_id: str, departed_ms: int) -> Named:
    """`departed_ms`: how long what is left of a registration that leaves is kept (the idempotency TTL)."""
    s = keys.session(session_id)
    return (
        {
            "meta": s.meta,
            "events": s.events,
            "names": s.names,
            "client": s.client(client_id),
            "calls": s.calls,
            "owed": s.owed,
            "run": s.run,
            "client_calls": s.client_calls(client_id),
        },
        {"channel": s.live, "sid": session_id, "cid": client_id, "departed_ms": departed_ms},
    )

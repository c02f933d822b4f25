"""The KEYS and leading ARGV of the script families, matching the headers of `lua/lib/{run,call,client}.lua`.

Each of those scripts also takes its session's partition keys last (`Scripts.run(..., partition=...)`)."""

from __future__ import annotations

from broker.keys import KeySpace


def run_keys(keys: KeySpace, session_id: str) -> list[str]:
    s = keys.session(session_id)
    return [s.meta, s.events, s.run, s.inbox, s.calls, s.owed, s.names, s.queue]


def run_args(keys: KeySpace, session_id: str, run_id: str) -> list[str | int]:
    return [keys.session(session_id).live, session_id, run_id]


def call_keys(keys: KeySpace, session_id: str) -> list[str]:
    s = keys.session(session_id)
    return [s.meta, s.events, s.calls, s.owed, s.run]


def call_args(keys: KeySpace, session_id: str, call_id: str, client_id: str) -> list[str | int]:
    return [keys.session(session_id).live, session_id, call_id, client_id]


def client_keys(keys: KeySpace, session_id: str, client_id: str) -> list[str]:
    s = keys.session(session_id)
    return [s.meta, s.events, s.names, s.client(client_id), s.calls, s.owed, s.run, s.client_calls(client_id)]


def client_args(keys: KeySpace, session_id: str, client_id: str, departed_ms: int) -> list[str | int]:
    """`departed_ms`: how long what is left of a registration that leaves is kept (the idempotency TTL)."""
    return [keys.session(session_id).live, session_id, client_id, departed_ms]


# By name: the keys and arguments each of those libraries declares (`--!layout lib/<x>.lua`), to which a
# script's own are added (`{**keys, "receipt": ...}`).
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

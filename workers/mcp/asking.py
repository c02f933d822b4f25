"""A grant's server asking for input during a call (2026-07-28's `InputRequiredResult`): its requests read
and held to what a client's input requests are held to, as the session's input requests they become
(broker/services/inputs.py `ask_grant`), and the person's answers as the `inputResponses` the retried
`tools/call` carries with the server's `requestState`.

What the server sends is the attacker's as much as a session token's is: at most MAX_OPEN_INPUTS requests
a round (a client is held to as many open at once) and MAX_ROUNDS rounds a call, each request a form any
host can draw (common/elicitation.py) or an http(s) page, its text bounded; anything else fails the call
saying why, and nothing of it is stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from broker.services.inputs import MAX_OPEN_INPUTS, GrantAsk
from common.codec import dumps, uuid7
from common.elicitation import schema_problem

# Rounds of questions one call may ask: each waits for a person, so this bounds a server that never
# stops asking within its grant's timeout_s.
MAX_ROUNDS = 8
# As a client's input requests are held (api/schemas/inputs.py).
MAX_MESSAGE_CHARS = 2_000
MAX_SCHEMA_BYTES = 16 * 1024
MAX_URL_CHARS = 2_048
# A server's key for a request, and the state it asks to be handed back (kept with the call meanwhile).
MAX_KEY_CHARS = 64
MAX_STATE_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class Round:
    """One round of a server's questions, as the session's input requests, and its requestState."""

    asked: list[GrantAsk]
    state: str | None


def read_request(key: str, request: object) -> GrantAsk | str:
    """One request as the session is asked it, or what is wrong with it."""
    where = f"inputRequests.{key[:MAX_KEY_CHARS]}"
    if not isinstance(request, dict) or request.get("method") != "elicitation/create":
        method = str(request.get("method"))[:100] if isinstance(request, dict) else "?"
        return f"{where}: {method!r} is a request a grant cannot answer (only elicitation/create)"
    params = request.get("params")
    if not isinstance(params, dict):
        return f"{where}.params: must be an object"
    message = params.get("message")
    if not isinstance(message, str) or not message or len(message) > MAX_MESSAGE_CHARS:
        return f"{where}.params.message: must be text of 1 to {MAX_MESSAGE_CHARS:,} characters"
    if params.get("mode") == "url":
        url = params.get("url")
        parts = urlsplit(url) if isinstance(url, str) and len(url) <= MAX_URL_CHARS else None
        if parts is None or parts.scheme not in ("https", "http") or not parts.hostname:
            return f"{where}.params.url: must be an absolute http(s) URL of at most {MAX_URL_CHARS:,} characters"
        return GrantAsk(uuid7(), key, message, None, str(url))
    schema = params.get("requestedSchema")
    if len(dumps(schema).encode()) > MAX_SCHEMA_BYTES:
        return f"{where}.params.requestedSchema: past {MAX_SCHEMA_BYTES:,} bytes of JSON"
    problem = schema_problem(schema, f"{where}.params.requestedSchema")
    if problem:
        return problem
    assert isinstance(schema, dict)
    return GrantAsk(uuid7(), key, message, schema, None)


def read_round(body: dict[str, Any], rounds: int) -> Round | str:
    """The round an InputRequiredResult asks (`rounds`: how many the call asked before), or why the call
    fails instead."""
    if rounds >= MAX_ROUNDS:
        return f"it asked for input more than {MAX_ROUNDS} times in one call"
    requests = body.get("inputRequests")
    state = body.get("requestState")
    if state is not None and (not isinstance(state, str) or len(state.encode()) > MAX_STATE_BYTES):
        return f"its requestState must be text of at most {MAX_STATE_BYTES:,} bytes"
    if requests is None:
        requests = {}
    if not isinstance(requests, dict):
        return "its inputRequests must be an object"
    if len(requests) > MAX_OPEN_INPUTS:
        return f"it asked {len(requests)} questions at once, past the {MAX_OPEN_INPUTS} a call may hold open"
    if not requests and state is None:
        return "it asked for input with neither inputRequests nor requestState"
    asked: list[GrantAsk] = []
    for key, request in requests.items():
        if not key or len(key) > MAX_KEY_CHARS:
            return f"its inputRequests keys must be 1 to {MAX_KEY_CHARS} characters"
        found = read_request(key, request)
        if isinstance(found, str):
            return found
        asked.append(found)
    return Round(asked, state)


def responses(keys: list[str], entries: list[dict[str, Any] | None]) -> dict[str, Any]:
    """The `inputResponses` of a round: each key's ElicitResult (`action`, and a form's `content`)."""
    answered: dict[str, Any] = {}
    for key, entry in zip(keys, entries, strict=True):
        action = entry.get("action") if entry is not None else None
        if action not in ("accept", "decline", "cancel"):
            action = "cancel"
        result: dict[str, Any] = {"action": action}
        if action == "accept" and entry is not None and isinstance(entry.get("content"), dict):
            result["content"] = entry["content"]
        answered[key] = result
    return answered

"""Input requests: a client asks the person during a call it acked (as MCP elicitation does), and anyone
holding the session's token answers; the first answer wins.

A request's entry sits in its session's inputs hash (`SessionKeys.inputs`) as JSON: `call_id`, `client`,
`key`, `state` (`open` or `answered`), and while open what is asked (the `message` with the form or
page, or one of MCP's other requests: `method` and `params`), the `action` and `content` once answered.
The call's record lists the ids still open (`iro`, lib/call.lua), and the scripts that settle a call end
them there without touching this hash: an entry still `open` whose call no longer lists it
was ended by its call (`cancelled`). The record also lists every request the call made (`irs`), so its
requests leave with it when settled calls are forgotten (trim_calls.lua)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.refusals import message as refusal_message
from broker.scripts.layouts import call_names
from common.codec import dumps, loads

# A call holds at most this many open requests: a client asking more waits for an answer (429).
MAX_OPEN_INPUTS = 4

InputState = Literal["open", "answered", "cancelled"]


@dataclass(frozen=True, slots=True)
class Asked:
    request_id: str
    key: str


@dataclass(frozen=True, slots=True)
class GrantAsk:
    """One request of a grant's server's round: a form (`schema`) or a page (`url`), `key` the server's."""

    request_id: str
    key: str
    message: str
    schema: dict[str, Any] | None
    url: str | None


@dataclass(frozen=True, slots=True)
class InputRequest:
    request_id: str
    key: str
    call_id: str
    state: InputState
    action: Literal["accept", "decline", "cancel"] | None
    content: dict[str, Any] | None
    # The form while the request is open (None for a URL-mode request, and once it ended).
    schema: dict[str, Any] | None
    # One of MCP's other requests (`sampling/createMessage`, `roots/list`) while open; None for a form or page.
    method: str | None = None


@dataclass(frozen=True, slots=True)
class OpenInput:
    """A request a call holds open, as an MCP caller is asked it: a form (`schema`), a page (`url`), or
    one of MCP's other requests (`method` and `params`)."""

    request: InputRequest
    message: str
    url: str | None
    method: str | None
    params: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Pending:
    """A call's open requests, oldest first, and what its MCP caller declared it answers (nothing for a
    call no MCP caller made)."""

    asks: frozenset[str]
    requests: tuple[OpenInput, ...]


class Inputs:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def ask(
        self,
        session_id: str,
        client_id: str,
        call_id: str,
        request_id: str,
        message: str,
        *,
        schema: dict[str, Any] | None,
        url: str | None,
        key: str | None,
        method: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> Asked:
        """Open request `request_id` (a fresh UUIDv7) on a call `client_id` acked: a form (`schema`,
        checked by the caller), a page (`url`), or one of MCP's other requests (`method` and `params`,
        for an MCP caller that declared it answers them). NotFound for no such call; Conflict for another client's
        call, one not acked or settled, a key the call already used, or a full session; TooManyRequests
        past MAX_OPEN_INPUTS open."""
        keys = self._core.keys
        s = keys.session(session_id)
        key = key or request_id
        entry: dict[str, Any] = {"call_id": call_id, "client": client_id, "key": key, "state": "open"}
        asked = {"message": message, "schema": schema, "url": url, "method": method, "params": params}
        entry.update((name, value) for name, value in asked.items() if value is not None)
        call, args = call_names(keys, session_id, call_id, client_id)
        await self._core.scripts.run(
            "ask_input",
            {**call, "inputs": s.inputs},
            {
                **args,
                "request_id": request_id,
                "key": key,
                "key_field": s.input_key_field(call_id, key),
                "entry": dumps(entry),
                "message": message,
                "schema": dumps(schema) if schema is not None else "",
                "url": url or "",
                "max_open": MAX_OPEN_INPUTS,
            },
            partition=s.partition,
        )
        return Asked(request_id, key)

    async def ask_grant(
        self, session_id: str, call_id: str, grant: str, asked: list[GrantAsk], state: str | None, left_s: float
    ) -> bool:
        """Open `asked` (a grant's server's requests of one round, checked by the caller, at most
        MAX_OPEN_INPUTS) on a grant's call this worker runs, and park the call until the last is answered
        (or its time, `left_s` from now the first time, ends). False when the call is no longer this
        worker's; Conflict for a full session."""
        keys = self._core.keys
        s = keys.session(session_id)
        requests = []
        for one in asked:
            entry: dict[str, Any] = {"call_id": call_id, "client": "", "key": one.key, "state": "open"}
            shown = {"message": one.message, "schema": one.schema, "url": one.url, "grant": grant}
            entry.update((name, value) for name, value in shown.items() if value is not None)
            requests.append(
                {
                    "id": one.request_id,
                    "key": one.key,
                    "key_field": s.input_key_field(call_id, one.key),
                    "entry": dumps(entry),
                    "message": one.message,
                    "schema": dumps(one.schema) if one.schema is not None else "",
                    "url": one.url or "",
                }
            )
        call, args = call_names(keys, session_id, call_id, "")
        (outcome,) = await self._core.scripts.run(
            "ask_grant_input",
            {**call, "inputs": s.inputs},
            {
                **args,
                "requests": dumps(requests),
                "state": state or "",
                "grant": grant,
                "left_ms": max(0, round(left_s * 1000)),
            },
            partition=s.partition,
        )
        return bool(outcome == "parked")

    async def ask_grant_live(self, session_id: str, call_id: str, grant: str, asked: GrantAsk) -> bool:
        """Open `asked` (an older server's `elicitation/create`, checked by the caller) on a grant's call
        this worker runs and keeps running while it waits for the answer (`answers` reads it). False when
        the call is no longer running; Conflict for a full session."""
        keys = self._core.keys
        s = keys.session(session_id)
        entry: dict[str, Any] = {"call_id": call_id, "client": "", "key": asked.key, "state": "open"}
        shown = {"message": asked.message, "schema": asked.schema, "url": asked.url, "grant": grant}
        entry.update((name, value) for name, value in shown.items() if value is not None)
        call, args = call_names(keys, session_id, call_id, "")
        (outcome,) = await self._core.scripts.run(
            "ask_grant_live",
            {**call, "inputs": s.inputs},
            {
                **args,
                "request_id": asked.request_id,
                "key": asked.key,
                "entry": dumps(entry),
                "message": asked.message,
                "schema": dumps(asked.schema) if asked.schema is not None else "",
                "url": asked.url or "",
                "grant": grant,
            },
            partition=s.partition,
        )
        return bool(outcome == "asked")

    async def answers(self, session_id: str, request_ids: list[str]) -> list[dict[str, Any] | None]:
        """The entries of `request_ids` as they stand (None for one gone), in order."""
        s = self._core.keys.session(session_id)
        with translate_redis_errors():
            raw = await self._core.redis.hmget(s.inputs, request_ids) if request_ids else []
        return [loads(data) if data is not None else None for data in raw]

    async def note_missing(self, session_id: str, client_id: str, call_id: str, capability: str) -> bool:
        """Note on the record of a call an MCP caller made, unsettled and `client_id`'s, that its client asked
        the caller for what needs `capability`, which the caller did not declare (the client is refused).
        Whether it was noted (False for any other call). NotFound when the session is gone."""
        call, args = call_names(self._core.keys, session_id, call_id, client_id)
        (noted,) = await self._core.scripts.run(
            "note_missing_capability",
            call,
            {**args, "capability": capability},
            partition=self._core.keys.session(session_id).partition,
        )
        return bool(noted)

    async def get(self, session_id: str, request_id: str) -> InputRequest:
        """The request as it stands; NotFound for none in this session."""
        s = self._core.keys.session(session_id)
        entry = await self._entry(s.inputs, request_id)
        state: InputState = "answered" if entry["state"] == "answered" else "open"
        if state == "open" and not await self._listed(s.calls, entry["call_id"], request_id):
            # Ended with its call, unless an answer landed between the two reads: read once more.
            entry = await self._entry(s.inputs, request_id)
            state = "answered" if entry["state"] == "answered" else "cancelled"
        return InputRequest(
            request_id=request_id,
            key=str(entry["key"]),
            call_id=str(entry["call_id"]),
            state=state,
            action=entry.get("action"),
            content=entry.get("content"),
            schema=entry.get("schema") if state == "open" else None,
            method=entry.get("method") if state == "open" else None,
        )

    async def answer(
        self,
        session_id: str,
        request: InputRequest,
        action: Literal["accept", "decline", "cancel"],
        content: dict[str, Any] | None,
    ) -> str:
        """Answer `request` (as `get` read it; its content checked by the caller): the `input_provided`
        event. Conflict when it was answered or ended meanwhile, or the session is full."""
        keys = self._core.keys
        s = keys.session(session_id)
        answered = {
            "call_id": request.call_id,
            "key": request.key,
            "state": "answered",
            "action": action,
            "content": content,
        }
        call, args = call_names(keys, session_id, request.call_id, "")
        (event,) = await self._core.scripts.run(
            "answer_input",
            {**call, "inputs": s.inputs},
            {
                **args,
                "request_id": request.request_id,
                "answered": dumps(answered),
                "action": action,
                "content": dumps(content) if content is not None else "",
                "result_ms": self._core.settings.result_timeout_ms,
            },
            partition=s.partition,
        )
        return str(event)

    async def pending(self, session_id: str, call_id: str) -> Pending:
        """The call's open requests (none for an unknown or settled call)."""
        s = self._core.keys.session(session_id)
        with translate_redis_errors():
            raw = await self._core.redis.hget(s.calls, call_id)
            record: dict[str, Any] = loads(raw) if raw is not None else {}
            ids: list[str] = record.get("iro") or []
            entries = await self._core.redis.hmget(s.inputs, ids) if ids else []
        asks = frozenset(str(record.get("asks") or "").split(",")) - {""}
        found = []
        for request_id, data in zip(ids, entries, strict=True):
            entry = loads(data) if data is not None else None
            # Answered between the two reads: no longer open.
            if entry is None or entry["state"] != "open":
                continue
            request = InputRequest(
                request_id, str(entry["key"]), call_id, "open", None, None, entry.get("schema"), entry.get("method")
            )
            found.append(
                OpenInput(
                    request, str(entry.get("message") or ""), entry.get("url"), entry.get("method"), entry.get("params")
                )
            )
        return Pending(asks, tuple(found))

    async def _entry(self, inputs: str, request_id: str) -> dict[str, Any]:
        with translate_redis_errors():
            raw = await self._core.redis.hget(inputs, request_id)
        if raw is None:
            raise NotFound(refusal_message("no_input", [request_id]))
        entry: dict[str, Any] = loads(raw)
        return entry

    async def _listed(self, calls: str, call_id: str, request_id: str) -> bool:
        """Whether the call still lists the request as open."""
        with translate_redis_errors():
            raw = await self._core.redis.hget(calls, call_id)
        return raw is not None and request_id in (loads(raw).get("iro") or [])

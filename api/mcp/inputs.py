"""A called tool that asks (input requests), relayed to the MCP caller that made the call: MCP's
`inputRequests` for a 2026-07-28 caller (answered by its retry's `inputResponses`, the retry bound to the
call by a sealed `requestState`), `elicitation/create`, `sampling/createMessage` or `roots/list` sent in
band to an older caller that declared it answers them (api/mcp/back_channel.py). Only what the caller
declared it answers goes to it (form or URL elicitation, sampling, roots); anything else stays open for
the session's other answerers."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from typing import Any

import mcp.types as mt
from mcp.shared.exceptions import MCPError
from mcp_types.version import is_version_at_least
from pydantic import BaseModel, ValidationError

from api.mcp.back_channel import ASKS_KEY, CHANNEL_KEY, BackChannel
from api.mcp.sealing import Sealed, arguments_digest
from api.state import AppState
from broker.errors import NotFound, SwitchboardError
from broker.services.inputs import OpenInput, Pending
from common.elicitation import content_problem
from common.events.catalogue import InputAction

ELICIT = "elicitation/create"
# The first revision that asks through `InputRequiredResult` rather than a request of its own.
_INPUT_REQUIRED_VERSION = "2026-07-28"
# After a call's first request arrives, how long more of them are gathered into the same answer: a client
# asking several at once posts them one after another.
GATHER_S = 0.25
# MCP's frozen wording for a request state that does not verify (as the package's own boundary says it).
BAD_STATE = "Invalid or expired requestState"
# The result an in-band request's answer must be, by method.
_RESULTS: dict[str, tuple[type[BaseModel], ...]] = {
    ELICIT: (mt.ElicitResult,),
    "sampling/createMessage": (mt.CreateMessageResult, mt.CreateMessageResultWithTools),
    "roots/list": (mt.ListRootsResult,),
}


def declared(capabilities: mt.ClientCapabilities | dict[str, Any] | None) -> frozenset[str]:
    """What a caller's capabilities (or their JSON, as its `initialize` sent them) say it answers, as a
    call's record keeps it. A bare `elicitation: {}` (the only shape before modes) is form elicitation."""
    if isinstance(capabilities, dict):
        try:
            capabilities = mt.ClientCapabilities.model_validate(capabilities, by_name=False)
        except ValidationError:
            return frozenset()
    if capabilities is None:
        return frozenset()
    asks: set[str] = set()
    elicitation = capabilities.elicitation
    if elicitation is not None:
        if elicitation.form is not None or elicitation.url is None:
            asks.add("elicitation.form")
        if elicitation.url is not None:
            asks.add("elicitation.url")
    if capabilities.sampling is not None:
        asks.add("sampling")
    if capabilities.roots is not None:
        asks.add("roots")
    return frozenset(asks)


def caller_asks(ctx: Any) -> frozenset[str]:
    """What the caller of the request `ctx` serves answers: as its request declares it (2026-07-28), or
    as its session id says its `initialize` did (an older caller; the transport keeps nothing)."""
    return declared(ctx.session.client_capabilities) or ctx.request.scope.get(ASKS_KEY, frozenset())


def _needs(request: OpenInput) -> str:
    if request.method == "sampling/createMessage":
        return "sampling"
    if request.method == "roots/list":
        return "roots"
    return "elicitation.url" if request.url is not None else "elicitation.form"


def _wire(request: OpenInput, in_band: bool = False) -> dict[str, Any]:
    """The request as MCP's `inputRequests` carry it, or an in-band request (`in_band`: a URL-mode
    request then names its elicitation, as 2025-11-25 requires and 2026-07-28 dropped)."""
    if request.method is not None:
        return {"method": request.method, "params": request.params or {}}
    params: BaseModel
    if request.url is not None:
        elicitation_id = request.request.request_id if in_band else None
        params = mt.ElicitRequestURLParams(message=request.message, url=request.url, elicitation_id=elicitation_id)
    else:
        params = mt.ElicitRequestFormParams(message=request.message, requested_schema=request.request.schema or {})
    return {"method": ELICIT, "params": params.model_dump(by_alias=True, exclude_none=True, mode="json")}


def _relayed(pending: Pending) -> list[OpenInput]:
    return [request for request in pending.requests if _needs(request) in pending.asks]


async def input_requests(state: AppState, session_id: str, call_id: str) -> dict[str, Any]:
    """The call's open requests its MCP caller declared it answers, as MCP's `inputRequests` map: the
    request's key -> {"method": ..., "params": ...}."""
    pending = await state.broker.inputs.pending(session_id, call_id)
    return {request.request.key: _wire(request) for request in _relayed(pending)}


def _checked(request: OpenInput, response: Any) -> tuple[InputAction, dict[str, Any] | None] | str:
    """The action and content an MCP response answers `request` with, or what is wrong with it."""
    where = f"inputResponses.{request.request.key}"
    wire = (
        response.model_dump(by_alias=True, exclude_none=True, mode="json")
        if isinstance(response, BaseModel)
        else response
    )
    if not isinstance(wire, dict):
        return f"{where}: must be an object"
    method = request.method or ELICIT
    for kind in _RESULTS[method]:
        try:
            kind.model_validate(wire, by_name=False)
            break
        except ValidationError:
            continue
    else:
        return f"{where}: not a result of {method}"
    if method != ELICIT:
        return "accept", wire
    action: InputAction = wire["action"]
    content = wire.get("content")
    if action != "accept" or request.url is not None:
        return action, None
    schema = request.request.schema or {"type": "object", "properties": {}}
    # What the form does not ask is ignored, as MCP has a receiver do with what it does not recognize;
    # what it asks is checked as a person's answer is.
    content = {name: value for name, value in (content or {}).items() if name in schema["properties"]}
    problem = content_problem(schema, content, where + ".content")
    return problem if problem else (action, content)


async def _answer(
    state: AppState, session_id: str, answers: list[tuple[OpenInput, InputAction, dict[str, Any] | None]]
) -> None:
    for request, action, content in answers:
        # The first answer wins: one that lost to another answerer is no error of the caller's.
        with contextlib.suppress(SwitchboardError):
            await state.broker.inputs.answer(session_id, request.request, action, content)


async def _answer_pending(state: AppState, session_id: str, pending: Pending, responses: dict[str, Any]) -> str | None:
    answers = []
    for request in pending.requests:
        response = responses.get(request.request.key)
        if response is None:
            continue
        checked = _checked(request, response)
        if isinstance(checked, str):
            return checked
        answers.append((request, *checked))
    # Every answer checked before any is written: a bad one writes nothing.
    await _answer(state, session_id, answers)
    return None


async def answer_responses(state: AppState, session_id: str, call_id: str, responses: dict[str, Any]) -> str | None:
    """Answer the call's open requests named in `responses` (MCP's `inputResponses`: key -> result); keys
    naming no open request are ignored. What is wrong with a response (nothing written then), or None."""
    pending = await state.broker.inputs.pending(session_id, call_id)
    return await _answer_pending(state, session_id, pending, responses)


class Relay:
    """One `tools/call` round's relay of its call's input requests to the caller: answers those its
    `inputResponses` name, then an `InputRequiredResult` (2026-07-28) or requests in band (an older
    caller that can be sent them)."""

    def __init__(self, state: AppState, session_id: str, ctx: Any, responses: dict[str, Any] | None) -> None:
        self._state, self._session_id = state, session_id
        self._responses = dict(responses or {})
        self.modern = is_version_at_least(ctx.session.protocol_version, _INPUT_REQUIRED_VERSION)
        self.asks = caller_asks(ctx)
        self._channel: BackChannel | None = None if self.modern else ctx.request.scope.get(CHANNEL_KEY)
        self._asked: set[str] = set()
        self.bound: Sealed | None = None

    def bind(self, call_id: str, seq: int, name: str, arguments: dict[str, Any], task: bool = False) -> None:
        self.bound = Sealed(self._session_id, call_id, seq, name, arguments_digest(arguments), (), task)

    async def asked(self, gather: bool) -> mt.InputRequiredResult | None:
        """The call may hold new requests: answer those this round's responses name, and ask the caller
        the rest it answers. `gather`: wait GATHER_S first for more of them."""
        assert self.bound is not None
        if gather and self.modern:
            await asyncio.sleep(GATHER_S)
        state, call_id = self._state, self.bound.call_id
        pending = await state.broker.inputs.pending(self._session_id, call_id)
        if self._responses:
            problem = await _answer_pending(state, self._session_id, pending, self._responses)
            if problem:
                raise MCPError(code=mt.INVALID_PARAMS, message=problem)
            # Each response answers once; what it answered is no longer open.
            answered = {request.request.key for request in pending.requests if request.request.key in self._responses}
            self._responses = {}
            pending = Pending(pending.asks, tuple(r for r in pending.requests if r.request.key not in answered))
        relayed = _relayed(pending)
        if not relayed:
            return None
        if self.modern:
            sealed = dataclasses.replace(self.bound, request_ids=tuple(r.request.request_id for r in relayed))
            return mt.InputRequiredResult(
                input_requests={r.request.key: _request(r) for r in relayed},
                request_state=state.request_states.seal(sealed),
            )
        if self._channel is not None:
            # Each goes out once, on the caller's own tools/call stream; its reply comes back as a POST
            # of its own, to any API process (answer_reply).
            for request in relayed:
                rid = request.request.request_id
                if rid not in self._asked:
                    self._asked.add(rid)
                    wire = _wire(request, in_band=True)
                    await self._channel.request(rid, wire["method"], wire["params"])
        return None


async def answer_reply(state: AppState, session_id: str, request_id: str, reply: dict[str, Any]) -> None:
    """An older caller's reply to the in-band request for input request `request_id`: its result answers
    the request when it is one of the kind asked and checks as a person's answer does. An error, a result
    of another kind or a request no longer open leaves things as they are, for the session's other
    answerers (a JSON-RPC reply gets no reply of its own to say so)."""
    if "result" not in reply:
        return
    try:
        asked = await state.broker.inputs.get(session_id, request_id)
    except NotFound:
        return
    if asked.state != "open":
        return
    pending = await state.broker.inputs.pending(session_id, asked.call_id)
    for request in pending.requests:
        if request.request.request_id == request_id:
            checked = _checked(request, reply["result"])
            if not isinstance(checked, str):
                await _answer(state, session_id, [(request, *checked)])
            return


def _request(request: OpenInput) -> Any:
    kinds: dict[str, type[BaseModel]] = {
        "sampling/createMessage": mt.CreateMessageRequest,
        "roots/list": mt.ListRootsRequest,
    }
    return kinds.get(request.method or "", mt.ElicitRequest).model_validate(_wire(request))


async def resumed(state: AppState, session_id: str, params: mt.CallToolRequestParams) -> Sealed:
    """The call a retry's `requestState` is bound to, once it verified: sealed by this deployment, for
    this session, tool and arguments, and naming at least one request still open (a state whose requests
    were all answered, a replay, is refused). MCPError (invalid params) otherwise, nothing written."""
    sealed = state.request_states.open(params.request_state or "")
    if (
        sealed is None
        or sealed.session_id != session_id
        or sealed.name != params.name
        or sealed.arguments != arguments_digest(dict(params.arguments or {}))
    ):
        raise MCPError(code=mt.INVALID_PARAMS, message=BAD_STATE)
    pending = await state.broker.inputs.pending(session_id, sealed.call_id)
    if not {r.request.request_id for r in pending.requests} & set(sealed.request_ids):
        raise MCPError(code=mt.INVALID_PARAMS, message=BAD_STATE, data={"reason": "already answered or ended"})
    return sealed

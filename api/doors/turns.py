"""What a front door does with a frontend's request before it streams: the frontend's newest message
becomes input (once, keyed by the message's id), its tools per-turn client tools, its tool results the
results of the calls still owed to it, its approval answers decisions; and where the stream starts."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from api.auth import Principal
from api.keyed import Attempt, Keyed, Outcome, keyed_as
from api.schemas.clients import ClientCallResultBody, Tools
from api.schemas.events import ApprovalDecisionForm
from api.schemas.sessions import MAX_INPUT_CHARS
from api.state import AppState
from broker.clients import Caller
from broker.codec import dumps, loads, uuid7
from broker.errors import Conflict, InvalidRequest, NotFound, SwitchboardError
from broker.events import is_timing

# How far back a continuation looks for the end of the step it continues: a step's frontend turn is
# answered within the call deadlines, so only a session very busy meanwhile puts it further back than
# this (the stream then starts at the newest event).
RESUME_SCAN_EVENTS = 2_000
# Results and decisions one request may carry (more than a step can owe: 32 clients of 64 tools each is
# far above what a model calls in one step).
MAX_ANSWERS = 128

_TOOLS: TypeAdapter[Any] = TypeAdapter(Tools)
_DECISION: TypeAdapter[Any] = TypeAdapter(ApprovalDecisionForm)


@dataclass(frozen=True, slots=True)
class Started:
    """Where a door's stream begins: after seq `after`, showing run `run_id` (`inside`: the run is already
    going at that point, at step `step`); `frontend` the run-scoped registration of the frontend's tools."""

    run_id: str
    after: int
    inside: bool
    step: int = 0
    frontend: str = ""


def frontend_tools(field: str, tools: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """A frontend's tools as a registration's (each name, description and JSON Schema checked the same
    way), or None for none; 400 naming `field` and the rule otherwise."""
    if not tools:
        return None
    shaped = [
        {
            "name": tool.get("name"),
            "description": tool.get("description") or "",
            "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
        }
        for tool in tools
    ]
    try:
        checked = _TOOLS.validate_python(shaped)
    except ValidationError as error:
        raise InvalidRequest(f"{field}: {_first(error)}") from None
    return [tool.model_dump(exclude_none=True) for tool in checked]


def _first(error: ValidationError) -> str:
    problem = error.errors()[0]
    where = ".".join(str(part) for part in problem["loc"])
    return f"{where}: {problem['msg']}" if where else str(problem["msg"])


def input_text(field: str, text: str, context: list[tuple[str, str]]) -> str:
    """The input the model gets: the app's context first (each a description and a value), then the
    text; 400 past the input limit."""
    if context:
        lines = "\n".join(f"- {description}: {value}" for description, value in context)
        text = f"Context from the app:\n{lines}\n\n{text}"
    if len(text) > MAX_INPUT_CHARS:
        raise InvalidRequest(f"{field}: {len(text):,} characters with the context; the limit is {MAX_INPUT_CHARS:,}")
    if not text.strip():
        raise InvalidRequest(f"{field}: the newest user message has no text")
    return text


async def post_input(
    state: AppState,
    principal: Principal,
    session_id: str,
    door: str,
    message_id: str,
    text: str,
    tools: list[dict[str, Any]] | None,
) -> Started:
    """Post the frontend's newest message as input, once: a resend of the same message id gets the
    first answer (the same run, the same starting point) and posts nothing."""
    broker = state.broker

    async def act(keyed_: Keyed) -> Outcome:
        seed = keyed_.seed
        # Fixed before the input is appended, so the stream shows everything of the run it starts.
        after = await broker.log.head(session_id)
        scoped = (seed["client_id"], tools) if tools is not None else None
        submitted = await broker.runs.submit(session_id, seed["run_id"], seed["input_id"], text, "client", scoped)
        body = {
            "run_id": submitted.run_id,
            "after": after,
            "inside": submitted.outcome == "steered",
            "frontend": submitted.scoped_client_id or "",
        }
        return Outcome(200, dumps(body).encode())

    seed = {"run_id": uuid7(), "input_id": uuid7(), "client_id": uuid7()}
    fingerprint = dumps({"text": text, "tools": tools}).encode()
    attempt = Attempt("POST", f"/v1/sessions/{session_id}/{door}", f"message:{message_id}", fingerprint)
    status, body = await keyed_as(broker, principal.id, attempt, act, seed=seed, session_id=session_id)
    answer = loads(body)
    if status != 200:
        error = answer.get("error", {})
        raise _replayed(status, str(error.get("message", "the input was refused")))
    return Started(str(answer["run_id"]), int(answer["after"]), bool(answer["inside"]), 0, str(answer["frontend"]))


def _replayed(status: int, message: str) -> SwitchboardError:
    if status == 404:
        return NotFound(message)
    if status == 409:
        return Conflict(message)
    return InvalidRequest(message)


def result_body(field: str, content: Any, error: str | None = None) -> ClientCallResultBody:
    """A frontend's tool result as a client's result: text, or text and image parts; 400 naming
    `field` and the limit otherwise."""
    try:
        if isinstance(content, str):
            return ClientCallResultBody(text=error or content, is_error=error is not None)
        if isinstance(content, list):
            return ClientCallResultBody.model_validate({"content": content, "is_error": error is not None})
        return ClientCallResultBody(text=error or dumps(content), is_error=error is not None)
    except ValidationError as problem:
        raise InvalidRequest(f"{field}: {_first(problem)}") from None


@dataclass(frozen=True, slots=True)
class Owed:
    """A call the frontend answered that was still owed to it: its run, its step, its registration."""

    call_id: str
    run_id: str
    step: int
    client_id: str


async def answer_calls(state: AppState, session_id: str, results: list[tuple[str, ClientCallResultBody]]) -> list[Owed]:
    """Record each result whose call is still owed to a client (a result for a settled or unknown call
    counts for nothing: a resent conversation answers nothing twice). The calls that were owed."""
    if len(results) > MAX_ANSWERS:
        raise InvalidRequest(f"messages: {len(results)} tool results; the limit is {MAX_ANSWERS}")
    owed: list[Owed] = []
    for call_id, body in results:
        record = await state.broker.calls.record(session_id, call_id)
        if record is None or record.kind != "client":
            continue
        owed.append(Owed(call_id, record.run_id, record.step, record.client_id))
        if record.settled:
            continue
        reply = await state.broker.clients.answer(
            session_id, record.client_id, call_id, body.result(), is_error=bool(body.is_error), caller=Caller()
        )
        if reply.status >= 400 and reply.status != 409:
            raise InvalidRequest(f"the result of call {call_id} was refused: {reply.body}")
    return owed


async def decide(state: AppState, principal: Principal, session_id: str, call_id: str, payload: Any) -> Owed | None:
    """Decide an approval the frontend answered (`payload` as the approvals route's body; none means
    allow), unless it was decided already. The call, or None when there is no such call."""
    record = await state.broker.calls.record(session_id, call_id)
    if record is None:
        return None
    try:
        decision = _DECISION.validate_python(payload if payload is not None else {"decision": "allow"})
    except ValidationError as error:
        raise InvalidRequest(f"resume: {call_id}: {_first(error)}") from None
    allow = decision.decision == "allow"
    # Decided already (another tab, or this request resent): the first decision stands.
    with contextlib.suppress(Conflict):
        await state.broker.approvals.resolve(
            session_id,
            call_id,
            decision.decision,
            "" if allow else decision.message or "",
            principal.id,
            remember=decision.remember == "session",
            arguments=decision.arguments if allow else None,
        )
    return Owed(call_id, record.run_id, record.step, record.client_id)


async def continuation(state: AppState, session_id: str, answered: list[Owed]) -> Started | None:
    """Where the stream of a request that answered calls starts: right after the commit of the newest
    step it answered (the point where the frontend's previous stream ended), inside that run."""
    if not answered:
        return None
    newest = max(answered, key=lambda owed: owed.step)
    after = await _step_end(state, session_id, newest.run_id, newest.step)
    frontend = next((owed.client_id for owed in answered if owed.client_id), "")
    return Started(newest.run_id, after, True, newest.step + 1, frontend)


async def _step_end(state: AppState, session_id: str, run_id: str, step: int) -> int:
    """The seq of the timing event a step's commit appends last; the newest seq if it is further back
    than RESUME_SCAN_EVENTS."""
    log = state.broker.log
    before: int | None = None
    for _ in range(RESUME_SCAN_EVENTS // _SCAN_PAGE):
        page = await log.page(
            session_id, ascending=False, limit=_SCAN_PAGE, after_seq=None, before_seq=before, keep=_every
        )
        for raw in page.items:
            if not is_timing(raw):
                continue
            event = loads(raw)
            payload = event.get("payload") or {}
            if payload.get("scope") == "step" and payload.get("run_id") == run_id and payload.get("step") == step:
                return int(event["seq"])
        if page.next_cursor is None:
            break
        before = page.next_cursor
    return await log.head(session_id)


_SCAN_PAGE = 100


def _every(_: bytes) -> bool:
    return True

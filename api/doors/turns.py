"""What a front door does with a frontend's request before it streams: the frontend's newest message
becomes input (once, keyed by the message's id), its tools per-turn client tools, its tool results the
results of the calls still owed to it, its approval answers decisions; and where the stream starts."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from api.auth import Principal
from api.doors.follow import back
from api.doors.view import RunView
from api.keyed import Answer, Attempt, Keyed, keyed_as
from api.schemas.clients import ClientCallResultBody, Tools
from api.schemas.events import ApprovalDecisionForm
from api.schemas.sessions import MAX_INPUT_CHARS
from api.sse import open_stream
from api.state import AppState
from broker.errors import Conflict, InvalidRequest, NotFound, SwitchboardError
from broker.services.clients import Caller
from broker.services.live import Subscription
from broker.services.runs import SCOPED_CLIENT_NAME
from common.codec import dumps, loads, uuid7
from common.events import is_timing

# Results and decisions one request may carry (more than a step can owe: 32 clients of 64 tools each is
# far above what a model calls in one step).
MAX_ANSWERS = 128

_TOOLS: TypeAdapter[Any] = TypeAdapter(Tools)
_DECISION: TypeAdapter[Any] = TypeAdapter(ApprovalDecisionForm)


@dataclass(frozen=True, slots=True)
class FrontendTurn:
    """What a frontend's request asks for, whichever protocol it speaks: new input (its message id and
    text) with the frontend's tools, results for calls, decisions for approvals, the calls it was shown
    before (id: name) and those it has results for."""

    message_id: str | None
    text: str
    tools: list[dict[str, Any]] | None
    results: list[tuple[str, ClientCallResultBody]]
    decisions: list[tuple[str, Any]]
    known: dict[str, str] = field(default_factory=dict)
    have: frozenset[str] = frozenset()
    # The newest step of a run the frontend has whole, as its messages show: (run id, step).
    seen: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class Started:
    """Where a door's stream begins: after seq `after`, showing run `run_id` (`inside`: the run is already
    going at that point, at step `step`); `frontend` the run-scoped registration of the frontend's tools."""

    run_id: str
    after: int
    inside: bool
    step: int = 0
    frontend: str = ""
    # The names of the frontend's tools, where the start point says (a resumed run).
    tools: frozenset[str] = frozenset()
    # Calls the frontend was handed before and still owes: its turn again, at once.
    owed: tuple[str, ...] = ()


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

    async def act(keyed_: Keyed) -> Answer:
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
        return Answer(200, dumps(body).encode())

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
    counts for nothing: a resent conversation answers nothing twice). The calls that were owed. The
    count is bounded by open_turn, before anything is written."""
    owed: list[Owed] = []
    for call_id, body in results:
        record = await state.broker.calls.record(session_id, call_id)
        if record is None or record.kind != "client":
            continue
        owed.append(Owed(call_id, record.run_id, record.step, record.client_id))
        if record.settled:
            continue
        try:
            await state.broker.clients.answer(
                session_id, record.client_id, call_id, body.result(), is_error=bool(body.is_error), caller=Caller()
            )
        except Conflict:
            # Settled meanwhile (a deadline, a cancel): this result counts for nothing, as a resent one.
            continue
        except (NotFound, InvalidRequest) as refusal:
            raise InvalidRequest(f"the result of call {call_id} was refused: {refusal.message}") from None
    return owed


def checked_decisions(decisions: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Each approval answer as the approvals route's body (none means allow); 400 for the first that is
    not one, before anything is written."""
    if len(decisions) > MAX_ANSWERS:
        raise InvalidRequest(f"resume: {len(decisions)} decisions; the limit is {MAX_ANSWERS}")
    checked = []
    for call_id, payload in decisions:
        try:
            checked.append(
                (call_id, _DECISION.validate_python(payload if payload is not None else {"decision": "allow"}))
            )
        except ValidationError as error:
            raise InvalidRequest(f"resume: {call_id}: {_first(error)}") from None
    return checked


async def decide(state: AppState, principal: Principal, session_id: str, call_id: str, decision: Any) -> Owed | None:
    """Decide an approval the frontend answered (a checked decision), unless it was decided already. The
    call, or None when there is no such call."""
    record = await state.broker.calls.record(session_id, call_id)
    if record is None:
        return None
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


async def continuation(
    state: AppState, session_id: str, answered: list[Owed], seen: tuple[str, int] | None, known: dict[str, str]
) -> Started | None:
    """Where the stream of a request that goes on with a run starts: right after the commit of the
    newest step the frontend has (the step it answered, or the newest its messages show), inside that
    run. Calls of that step still owed to the frontend are handed over again at once (`owed`): a resent
    conversation that answers nothing gets its turn back, not a stream that waits."""
    points = [(owed.run_id, owed.step) for owed in answered]
    if not points and seen is not None:
        points = [seen]
    if not points:
        return None
    run_id = points[-1][0]
    steps = [step for run, step in points if run == run_id]
    if seen is not None and seen[0] == run_id:
        steps.append(seen[1])
    step = max(steps)
    after = await _step_end(state, session_id, run_id, step)
    frontend = next((owed.client_id for owed in answered if owed.client_id), "")
    owed: list[str] = []
    if not answered:
        for call_id in list(known)[-MAX_ANSWERS:]:
            record = await state.broker.calls.record(session_id, call_id)
            if record is None or record.kind != "client" or (record.run_id, record.step) != (run_id, step):
                continue
            if record.state in ("dispatched", "acked"):
                owed.append(call_id)
                frontend = frontend or record.client_id
    return Started(run_id, after, True, step + 1, frontend, owed=tuple(owed))


async def _step_end(state: AppState, session_id: str, run_id: str, step: int) -> int:
    """The seq of the timing event a step's commit appends last; the newest seq if it is further back
    than a look back reaches (api.doors.follow.back)."""
    async for seq, raw in back(state, session_id):
        if is_timing(raw):
            payload = loads(raw).get("payload") or {}
            if payload.get("scope") == "step" and payload.get("run_id") == run_id and payload.get("step") == step:
                return seq
    return await state.broker.log.head(session_id)


async def hand_over(state: AppState, session_id: str, client_id: str, calls: tuple[str, ...]) -> None:
    """The frontend has its calls: acked, so the result deadline is the one that applies (a frontend
    that never answers gets `result_timeout`, and the run goes on)."""
    for call_id in calls:
        # A call settled meanwhile (cancelled, timed out) needs no ack.
        with contextlib.suppress(Conflict, NotFound):
            await state.broker.clients.ack(session_id, client_id, call_id, Caller())


async def active_run(state: AppState, session_id: str) -> Started | None:
    """The newest run of the session if it has not ended, from where it was queued (a reloaded frontend
    resumes it whole); None when the newest run ended, or began further back than a look back reaches."""
    ended: set[str] = set()
    async for seq, raw in back(state, session_id):
        if b'"type":"run_' not in raw[:128]:
            continue
        event = loads(raw)
        kind, run_id = event.get("type"), str(event.get("run_id"))
        if kind in ("run_completed", "run_failed", "run_cancelled"):
            ended.add(run_id)
        elif kind == "run_queued":
            return None if run_id in ended else await _queued(state, session_id, run_id, seq)
    return None


@dataclass
class Opened:
    """A turn acted on: where its stream starts (None: nothing to follow), the view of the run from
    there, and the event subscription the stream reads (counted against the stream caps; `close` counts
    it out)."""

    started: Started | None
    view: RunView | None
    subscription: Subscription
    close: Callable[[], None]


async def open_turn(state: AppState, principal: Principal, session_id: str, door: str, turn: FrontendTurn) -> Opened:
    """Record the turn's results and decisions, post its input, and open the stream it is answered on.
    Everything is written before the stream starts, so a refusal is an HTTP error naming its field."""
    decisions = checked_decisions(turn.decisions)
    if len(turn.results) > MAX_ANSWERS:
        raise InvalidRequest(f"messages: {len(turn.results)} tool results; the limit is {MAX_ANSWERS}")
    answered = await answer_calls(state, session_id, turn.results)
    decided = [await decide(state, principal, session_id, call_id, decision) for call_id, decision in decisions]
    subscription, close = await open_stream(state, session_id, principal.id)
    try:
        going_on = [*answered, *(owed for owed in decided if owed is not None)]
        # What the frontend's messages show it has counts only when it brings no new input.
        seen = turn.seen if turn.message_id is None else None
        started = await continuation(state, session_id, going_on, seen, turn.known)
        if turn.message_id is not None:
            posted = await post_input(state, principal, session_id, door, turn.message_id, turn.text, turn.tools)
            # New input while answering steers the run being continued; otherwise it starts its own.
            started = started or posted
    except BaseException:
        state.hub.unsubscribe(subscription)
        close()
        raise
    view = None
    if started is not None:
        view = RunView(
            started.run_id,
            started=started.inside,
            step=started.step,
            frontend=started.frontend,
            have=frozenset(owed.call_id for owed in answered) | turn.have,
            known=turn.known,
            owed=started.owed,
        )
    return Opened(started, view, subscription, close)


async def _queued(state: AppState, session_id: str, run_id: str, seq: int) -> Started:
    """A run from where it was queued, with its run-scoped registration: the input's script appends that
    registration, the input and `run_queued` together, in that order."""
    frontend, tools = "", frozenset[str]()
    for _, raw in await state.broker.log.after(session_id, max(0, seq - 3), 2):
        event = loads(raw)
        if event.get("type") == "client_registered" and event.get("name") == SCOPED_CLIENT_NAME:
            frontend = str(event.get("client_id"))
            tools = frozenset(str(tool.get("name")) for tool in event.get("tools") or [])
    return Started(run_id, seq, False, 0, frontend, tools)

"""What a front door does with a frontend's request before it streams: the frontend's newest message
becomes input (once, keyed by the message's id), its tools per-turn client tools, its tool results the
results of the calls still owed to it, its approval answers decisions, its answers to input requests
answers; and where the stream starts."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from api.auth import Principal
from api.doors.answers import MAX_ANSWERS, WRITE_OVERHEAD, Owed, first_problem, read_answers, record_answers
from api.doors.follow import back
from api.doors.view import RunView
from api.keyed import Answer, Attempt, Keyed, keyed_as
from api.schemas.clients import ClientCallResultBody, Tools
from api.schemas.sessions import MAX_INPUT_CHARS
from api.sse import open_stream
from api.state import AppState
from broker.errors import Conflict, InvalidRequest, NotFound, SwitchboardError
from broker.services.clients import Caller
from broker.services.idempotency import scope_digest
from broker.services.live import Subscription
from broker.services.runs import SCOPED_CLIENT_NAME
from common.codec import dumps, loads, uuid7
from common.events.catalogue import (
    ClientRegistered,
    Custom,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunQueued,
    StepTiming,
)
from common.events.marks import is_timing
from common.events.read import decode_known, step_timing

_TOOLS: TypeAdapter[Any] = TypeAdapter(Tools)


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
    # The ids of `decisions` the frontend cancelled (an AG-UI resume entry's status): an input request
    # among them is answered `cancel`.
    cancelled: frozenset[str] = frozenset()


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
        raise InvalidRequest(f"{field}: {first_problem(error)}") from None
    return [tool.model_dump(exclude_none=True) for tool in checked]


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
    attempt = Attempt("POST", _door_path(session_id, door), _message_key(message_id), fingerprint)
    status, body = await keyed_as(broker, principal.id, attempt, act, seed=seed, session_id=session_id)
    answer = loads(body)
    if status != 200:
        error = answer.get("error", {})
        raise _replayed(status, str(error.get("message", "the input was refused")))
    return Started(str(answer["run_id"]), int(answer["after"]), bool(answer["inside"]), 0, str(answer["frontend"]))


def _door_path(session_id: str, door: str) -> str:
    return f"/v1/sessions/{session_id}/{door}"


def _message_key(message_id: str) -> str:
    return f"message:{message_id}"


async def _posted_before(state: AppState, principal: Principal, session_id: str, door: str, message_id: str) -> bool:
    """Whether the message was posted already (a resend, which post_input answers as it was answered
    then, writing nothing)."""
    digest = scope_digest(principal.id, "POST", _door_path(session_id, door), _message_key(message_id))
    return await state.broker.idempotency.kept(digest, session_id)


def _replayed(status: int, message: str) -> SwitchboardError:
    if status == 404:
        return NotFound(message)
    if status == 409:
        return Conflict(message)
    return InvalidRequest(message)


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
    if not frontend and answered:
        # It answered no call of the frontend's own (an input request of another client's call): the
        # run's own registration, where its input brought it, serves the frontend's later calls.
        frontend = await _run_frontend(state, session_id, run_id)
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
            timing = _step_timing(raw)
            if timing is not None and (timing.run_id, timing.step) == (run_id, step):
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
        event = decode_known(raw)
        if isinstance(event, RunCompleted | RunFailed | RunCancelled):
            ended.add(event.run_id)
        elif isinstance(event, RunQueued):
            return None if event.run_id in ended else await _queued(state, session_id, event.run_id, seq)
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
    """Open the stream the turn is answered on, post its input and record its answers, before the stream
    starts, so a refusal is an HTTP error naming its field. Every refusal the request can meet is
    decided before anything is written (docs/ag-ui.md#refusals): the stream caps and the answers' checks
    here, the session's room for all of its writes at once, then the input, whose own script decides the
    concurrency policy and the run-scoped client's room in the step that writes it. The answers are
    recorded last, when only a race with another writer could still refuse them: for room, a 409 naming
    the limit (record_answers); for a call settled or decided meanwhile, nothing."""
    subscription, close = await open_stream(state, session_id, principal.id)
    try:
        answers = await read_answers(state, session_id, turn.results, turn.decisions, turn.cancelled)
        need = answers.bytes_written() + await _input_bytes(state, principal, session_id, door, turn)
        # The room is checked, not held: holding it would take one script doing the input's, each
        # result's and each decision's writes (three scripts' work, with the input's idempotency
        # receipt), or a reservation every script of the session would have to count. A request that
        # loses the room to another meanwhile is refused by the write itself.
        full = await state.broker.clients.room(session_id, need) if need else None
        if full is not None:
            raise full
        posted = None
        if turn.message_id is not None:
            posted = await post_input(state, principal, session_id, door, turn.message_id, turn.text, turn.tools)
        await record_answers(state, principal, session_id, answers)
        # What the frontend's messages show it has counts only when it brings no new input.
        seen = turn.seen if turn.message_id is None else None
        # New input while answering steers the run being continued; otherwise it starts its own.
        started = await continuation(state, session_id, answers.going_on, seen, turn.known) or posted
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
            have=frozenset(owed.call_id for owed in answers.answered) | turn.have,
            known=turn.known,
            owed=started.owed,
        )
    return Opened(started, view, subscription, close)


async def _input_bytes(state: AppState, principal: Principal, session_id: str, door: str, turn: FrontendTurn) -> int:
    """At least what posting the turn's input stores (post_input.lua keeps its text twice until its run
    starts; a run-scoped client keeps its tools in its registration and its event): nothing for no input,
    or for a message posted before, whose resend is answered as it was then."""
    if turn.message_id is None or await _posted_before(state, principal, session_id, door, turn.message_id):
        return 0
    tools = 2 * len(dumps(turn.tools)) + WRITE_OVERHEAD if turn.tools else 0
    return 2 * len(turn.text.encode()) + WRITE_OVERHEAD + tools


async def _run_frontend(state: AppState, session_id: str, run_id: str) -> str:
    """The run-scoped registration the run's input brought ('' for none, or one further back than a look
    back reads)."""
    async for seq, raw in back(state, session_id):
        if b'"type":"run_queued"' in raw[:128] and run_id.encode() in raw:
            event = decode_known(raw)
            if isinstance(event, RunQueued) and event.run_id == run_id:
                return (await _queued(state, session_id, run_id, seq)).frontend
    return ""


async def _queued(state: AppState, session_id: str, run_id: str, seq: int) -> Started:
    """A run from where it was queued, with its run-scoped registration: the input's script appends that
    registration, the input and `run_queued` together, in that order."""
    frontend, tools = "", frozenset[str]()
    for _, raw in await state.broker.log.after(session_id, max(0, seq - 3), 2):
        event = decode_known(raw)
        if isinstance(event, ClientRegistered) and event.name == SCOPED_CLIENT_NAME:
            frontend = event.client_id
            tools = frozenset(tool.name for tool in event.tools)
    return Started(run_id, seq, False, 0, frontend, tools)


def _step_timing(raw: bytes) -> StepTiming | None:
    event = decode_known(raw)
    return step_timing(event) if isinstance(event, Custom) else None

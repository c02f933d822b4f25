"""What a frontend's request answers: the results of calls still owed to a client, decisions on
approvals, and answers to input requests (api/doors/input_answers.py). Each is read and checked first
(`read_answers`, which writes nothing) and recorded only once every refusal the request can meet has been
decided (`record_answers`, last in api/doors/turns.py `open_turn`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from api.auth import Principal
from api.doors.input_answers import FrontendAnswer, read_input_answer
from api.schemas.clients import ClientCallResultBody
from api.schemas.events import AllowDecision, ApprovalDecisionForm, DenyDecision
from api.state import AppState
from broker.errors import Conflict, InvalidRequest, NotFound, SessionFull
from broker.services.clients import Caller
from common.codec import dumps

# Results and decisions one request may carry (more than a step can owe: 32 clients of 64 tools each is
# far above what a model calls in one step).
MAX_ANSWERS = 128
# What a write stores beyond what it is handed (its event's fields, the call record's growth, Redis's
# per-entry overhead as the scripts count it): more than any of them adds, so the room a request is
# held to is never less than its scripts will ask for.
WRITE_OVERHEAD = 1024

_DECISION: TypeAdapter[Any] = TypeAdapter(ApprovalDecisionForm)


def first_problem(error: ValidationError) -> str:
    """pydantic's first complaint, where it is (if anywhere) and what."""
    problem = error.errors()[0]
    where = ".".join(str(part) for part in problem["loc"])
    # A validator's own words, without pydantic's label for them.
    message = str(problem["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


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
        raise InvalidRequest(f"{field}: {first_problem(problem)}") from None


def checked_decisions(decisions: list[tuple[str, Any]]) -> list[tuple[str, AllowDecision | DenyDecision]]:
    """Each approval answer as the approvals route's body (none means allow); 400 for the first that is
    not one."""
    if len(decisions) > MAX_ANSWERS:
        raise InvalidRequest(f"resume: {len(decisions)} decisions; the limit is {MAX_ANSWERS}")
    checked = []
    for call_id, payload in decisions:
        try:
            checked.append(
                (call_id, _DECISION.validate_python(payload if payload is not None else {"decision": "allow"}))
            )
        except ValidationError as error:
            raise InvalidRequest(f"resume: {call_id}: {first_problem(error)}") from None
    return checked


@dataclass(frozen=True, slots=True)
class Owed:
    """A call the frontend answered that was owed to a client: its run, its step, its registration."""

    call_id: str
    run_id: str
    step: int
    client_id: str


@dataclass(frozen=True, slots=True)
class _Result:
    owed: Owed
    body: ClientCallResultBody
    # Settled already (answered, failed, cancelled): a resent conversation answers nothing twice.
    settled: bool


@dataclass(frozen=True, slots=True)
class _Decision:
    owed: Owed
    decision: AllowDecision | DenyDecision


@dataclass(frozen=True, slots=True)
class Answers:
    """A request's results for calls of the session's clients and its decisions for calls of the
    session, checked: what `record_answers` will write."""

    results: tuple[_Result, ...] = ()
    decisions: tuple[_Decision, ...] = ()
    inputs: tuple[FrontendAnswer, ...] = ()

    @property
    def answered(self) -> list[Owed]:
        """The calls the request has results for."""
        return [result.owed for result in self.results]

    @property
    def going_on(self) -> list[Owed]:
        """Every call the request answers, the results' first: where the run it continues stands. A call
        whose input request it answers counts with no registration: that call is its client's, not the
        frontend's."""
        asked = [Owed(i.request.call_id, i.run_id, i.step, "") for i in self.inputs if i.run_id]
        return [*self.answered, *(decision.owed for decision in self.decisions), *asked]

    def bytes_written(self) -> int:
        """At least what recording them stores (answer_call.lua and resolve_approval.lua count less)."""
        need = sum(len(dumps(r.body.result())) + WRITE_OVERHEAD for r in self.results if not r.settled)
        for decided in self.decisions:
            kept = decided.decision.message if isinstance(decided.decision, DenyDecision) else None
            edited = decided.decision.arguments if isinstance(decided.decision, AllowDecision) else None
            # The message, or the edited arguments twice (the decision's event and the new dispatch),
            # each stored twice (the event, and what it leads to).
            need += 2 * (len(kept or "") + 2 * len(dumps(edited) if edited is not None else "")) + WRITE_OVERHEAD
        # An answer's content is kept twice: its event and the request's entry.
        need += sum(2 * len(dumps(i.content)) + WRITE_OVERHEAD for i in self.inputs if not i.settled)
        return need


async def read_answers(
    state: AppState,
    session_id: str,
    results: list[tuple[str, ClientCallResultBody]],
    decisions: list[tuple[str, Any]],
    cancelled: frozenset[str] = frozenset(),
) -> Answers:
    """The request's results and decisions, checked, with what they answer; writes nothing. A decision
    naming an input request of the session answers it (`cancelled`: the ids the frontend cancelled). A
    result for a call no client owes and a decision for a call the session does not have count for
    nothing; 400 for too many, for a decision that is not the approvals route's body or edits arguments
    their tool's schema refuses, or an answer the input-request route would refuse."""
    if len(decisions) > MAX_ANSWERS:
        raise InvalidRequest(f"resume: {len(decisions)} decisions; the limit is {MAX_ANSWERS}")
    inputs, approvals = [], []
    for interrupt_id, payload in decisions:
        where = f"resume: {interrupt_id}"
        answered = await read_input_answer(state, session_id, interrupt_id, payload, interrupt_id in cancelled, where)
        if answered is None:
            approvals.append((interrupt_id, payload))
        else:
            inputs.append(answered)
    checked = checked_decisions(approvals)
    if len(results) > MAX_ANSWERS:
        raise InvalidRequest(f"messages: {len(results)} tool results; the limit is {MAX_ANSWERS}")
    calls = state.broker.calls
    found = []
    for call_id, body in results:
        record = await calls.record(session_id, call_id)
        if record is not None and record.kind == "client":
            owed = Owed(call_id, record.run_id, record.step, record.client_id)
            found.append(_Result(owed, body, record.settled))
    decided = []
    for call_id, decision in checked:
        record = await calls.record(session_id, call_id)
        if record is None:
            continue
        if isinstance(decision, AllowDecision) and decision.arguments is not None:
            await state.broker.approvals.check_arguments(session_id, call_id, decision.arguments)
        decided.append(_Decision(Owed(call_id, record.run_id, record.step, record.client_id), decision))
    return Answers(tuple(found), tuple(decided), tuple(inputs))


async def record_answers(state: AppState, principal: Principal, session_id: str, answers: Answers) -> None:
    """Record each result whose call is still owed, each decision not made already (the first decision
    stands: another tab's, or this request's when it is resent) and each answer to a request still open.
    SessionFull naming the call when the session has no room for one: another request took the room this
    one was checked for."""
    for result in answers.results:
        if result.settled:
            continue
        call_id, body = result.owed.call_id, result.body
        try:
            await state.broker.clients.answer(
                session_id,
                result.owed.client_id,
                call_id,
                body.result(),
                is_error=bool(body.is_error),
                caller=Caller(),
                structured=body.structured,
            )
        except SessionFull as full:
            # The call is still owed: a 200 would leave the frontend sure it answered.
            raise _not_recorded(f"the result of call {call_id}", full) from None
        except Conflict:
            # Settled meanwhile (a deadline, a cancel): this result counts for nothing, as a resent one.
            continue
        except (NotFound, InvalidRequest) as refusal:
            raise InvalidRequest(f"the result of call {call_id} was refused: {refusal.message}") from None
    await _record_decisions(state, principal, session_id, answers.decisions)
    for asked in answers.inputs:
        if asked.settled:
            continue
        try:
            await state.broker.inputs.answer(session_id, asked.request, asked.action, asked.content)
        except SessionFull as full:
            raise _not_recorded(f"the answer to input request {asked.request.request_id}", full) from None
        except Conflict:
            # Answered or ended meanwhile (the console, the call's end): the first answer stands.
            continue


async def _record_decisions(
    state: AppState, principal: Principal, session_id: str, decisions: tuple[_Decision, ...]
) -> None:
    for decided in decisions:
        decision = decided.decision
        try:
            await state.broker.approvals.resolve(
                session_id,
                decided.owed.call_id,
                decision.decision,
                "" if isinstance(decision, AllowDecision) else decision.message or "",
                principal.id,
                remember=decision.remember == "session",
                arguments=decision.arguments if isinstance(decision, AllowDecision) else None,
            )
        except SessionFull as full:
            raise _not_recorded(f"the decision on call {decided.owed.call_id}", full) from None
        except Conflict:
            # Decided already (another tab, or this request resent): the first decision stands.
            continue


def _not_recorded(what: str, full: SessionFull) -> SessionFull:
    # What the request wrote before it stays (its input, its earlier answers): its resend writes only
    # the rest, since the input is keyed by its message id and an answered call counts for nothing.
    return SessionFull(f"{what} was not recorded, and nothing after it: {full.message}")

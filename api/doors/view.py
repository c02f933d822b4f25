"""One run as a chat frontend sees it, in the neutral terms both front doors translate: steps, text as it
streams, tool calls with their arguments as they stream and their results, and where the frontend's turn
ends (its own tools called, an approval asked for, or a client of the call asking the person) or the run
does.

The view is fed the session's log (api.doors.follow) from a point inside or before the run and answers
each event with what it shows. The log is the authority: a call is shown under the id the log gives it,
and a view started at the same point shows the same thing, so a frontend that reconnects or resends
sees the same calls under the same ids and never makes one twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from msgspec import UNSET

from api.doors.shown import (
    Approval,
    InputAsked,
    InputEnded,
    Paused,
    Reasoning,
    RunEnded,
    Shown,
    ShownResult,
    StepFinished,
    StepStarted,
    TextDelta,
    TextEnded,
    TextStarted,
    ToolArgs,
    ToolEnded,
    ToolStarted,
)
from api.doors.sign_ins import sign_in
from common.codec import dumps
from common.events.blocks import result_text as result_text
from common.events.catalogue import (
    ApprovalRequested,
    ClientToolDispatched,
    Custom,
    Event,
    InputProvided,
    InputRequested,
    MessageAssistant,
    MessageBody,
    MessageDelta,
    RunCancelled,
    RunCompleted,
    RunFailed,
    RunStarted,
    StepTiming,
    TextBlock,
    ThinkingBlock,
    ThinkingDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResult,
)
from common.events.read import step_timing

_ENDS: dict[type[Event], str] = {RunCompleted: "completed", RunFailed: "failed", RunCancelled: "cancelled"}
# Tuples, not unions: isinstance takes a tuple faster, and the view asks of every event of a run.
_ENDINGS = (RunCompleted, RunFailed, RunCancelled)
_DELTAS = (MessageDelta, ThinkingDelta, ToolCallDelta)


@dataclass
class _Call:
    name: str
    started: bool = False
    ended: bool = False


@dataclass
class RunView:
    """`run_id`: the run to show. `started`: the view begins inside the run (a continuation, or input that
    steered a run already going) at step `step`; otherwise it waits for the run's `run_started`.
    `frontend`: the run-scoped registration that serves the frontend's own tools, if known; `have`:
    calls whose results the frontend has (it answered them, or was shown them), not shown again;
    `known`: calls the frontend was shown before this view began (a continuation), by id, with their
    names, so their results are shown when they come.

    The frontend's turn comes once the step's other calls have their results: a frontend continues only
    when every call of the step it was shown is complete (the AI SDK's `sendAutomaticallyWhen`)."""

    run_id: str
    started: bool = False
    step: int = 0
    frontend: str = ""
    have: frozenset[str] = frozenset()
    known: dict[str, str] = field(default_factory=dict)
    owed: tuple[str, ...] = ()
    # An input request of a call of the run is the frontend's turn (AG-UI: an interrupt), or else an item
    # shown as the run goes on (`InputAsked`, then `InputEnded`: the AI SDK's data part), answered elsewhere.
    pause_on_input: bool = True
    _text: str = ""
    _texts: int = 0
    _streamed_text: bool = False
    _reset: bool = False
    _step_open: bool = False
    _calls: dict[str, _Call] = field(default_factory=dict)
    _frontend_calls: set[str] = field(default_factory=set)
    _owed: list[str] = field(default_factory=list)
    _approvals: list[Approval] = field(default_factory=list)
    _step_calls: list[str] = field(default_factory=list)
    _resulted: set[str] = field(default_factory=set)
    _waiting: set[str] = field(default_factory=set)
    _pause: Paused | None = None
    _done: bool = False
    _asked: dict[str, InputAsked] = field(default_factory=dict)

    def over(self) -> bool:
        """Whether the view has shown its last item (the frontend's turn, or the run's end)."""
        return self._done

    def carry_on(self) -> None:
        """The pause just shown is void (its calls were answered already): the view goes on."""
        self._done = False
        self._pause = None

    def opening(self) -> Iterator[Shown]:
        """What the view shows before any event: the frontend's turn again, when it still owes calls it
        was handed before this view began."""
        if self.owed:
            self._done = True
            yield Paused(self.step - 1, self.owed, ())

    def message_id(self, step: int | None = None) -> str:
        """The id of a step's assistant message: the same in every view of the run."""
        return f"{self.run_id}.{self.step if step is None else step}"

    def logged(self, event: Event) -> Iterator[Shown]:
        """What a logged event of the session shows (nothing, for most)."""
        if isinstance(event, _ENDINGS):
            if event.run_id == self.run_id:
                yield from self._close_step()
                self._done = True
                yield RunEnded(self.run_id, _ENDS[type(event)], event.error if isinstance(event, RunFailed) else "")
        elif isinstance(event, RunStarted):
            if event.run_id == self.run_id and not self.started:
                self.started, self.step = True, 0
        elif self.started:
            # A sign-in the run's step waits on: shown as the run goes on, never the frontend's turn.
            asked = sign_in(event)
            if asked is not None:
                yield asked
            else:
                yield from self._inside(event)

    def _inside(self, event: Event) -> Iterator[Shown]:
        match event:
            case MessageAssistant():
                yield from self._message(event.message)
            case ClientToolDispatched():
                self._dispatched(event)
            case ApprovalRequested():
                self._approval(event)
            case InputRequested():
                yield from self._input(event)
            case InputProvided():
                asked = self._asked.pop(event.request_id, None)
                if asked is not None:
                    reason = event.reason if event.reason is not UNSET else None
                    yield InputEnded(asked, event.action, event.content, reason)
            case ToolResult():
                yield from self._result(event)
            case Custom():
                timing = step_timing(event)
                if timing is not None:
                    yield from self._timing(timing)

    def _dispatched(self, event: ClientToolDispatched) -> None:
        call_id = event.call_id
        # A call that waited for its client (on_leave: wait) is dispatched again under its id: owed once.
        if (
            event.from_ is UNSET
            and call_id in self._calls
            and event.client_id == self.frontend
            and call_id not in self._frontend_calls
        ):
            self._frontend_calls.add(call_id)
            self._owed.append(call_id)

    def _approval(self, event: ApprovalRequested) -> None:
        if event.call_id in self._calls:
            self._approvals.append(Approval(event.call_id, self._calls[event.call_id].name, event.arguments))

    def _input(self, event: InputRequested) -> Iterator[Shown]:
        """A call of the run asks the person: shown, or the frontend's turn at once (the call waits on it),
        with whatever turn was waiting for the step's other calls."""
        call = self._calls.get(event.call_id)
        name = call.name if call is not None else self.known.get(event.call_id)
        if name is None:
            return
        schema = event.schema_ if event.schema_ is not UNSET else None
        url = event.url if event.url is not UNSET else None
        asked = InputAsked(event.request_id, event.call_id, name, event.message, schema, url)
        if not self.pause_on_input:
            self._asked[asked.request_id] = asked
            yield asked
            return
        waiting = self._pause or Paused(self.step - 1, (), ())
        self._pause, self._waiting, self._done = None, set(), True
        yield Paused(waiting.step, waiting.calls, waiting.approvals, (asked,))

    def live(self, event: Event) -> Iterator[Shown]:
        """What a live extra (a delta of the step being written) shows."""
        if not isinstance(event, _DELTAS) or not self.started or event.run_id != self.run_id:
            return
        step = event.step
        if step > self.step and not self._step_open:
            # A view that began inside a run it had not seen start (input that steered it) learns the
            # step from the first one it sees.
            self.step = step
        if step != self.step:
            return
        if isinstance(event, MessageDelta) and event.reset:
            # A retried attempt: what streamed is void. A frontend cannot take text back, so the rest of
            # this step's text comes whole with its message (a new run of text), and tool input likewise.
            yield from self._end_text()
            self._reset = True
            return
        if self._reset:
            return
        if isinstance(event, MessageDelta) and event.delta:
            yield from self._text_delta(event.delta)
        elif isinstance(event, ToolCallDelta):
            yield from self._tool_delta(event.call_id, event.name, event.delta)

    def _text_delta(self, delta: str) -> Iterator[Shown]:
        yield from self._open_step()
        if not self._text:
            self._texts += 1
            self._text = f"{self.message_id()}.t{self._texts}"
            yield TextStarted(self.message_id(), self._text)
        self._streamed_text = True
        yield TextDelta(self.message_id(), self._text, delta)

    def _tool_delta(self, call_id: str, name: str, delta: str) -> Iterator[Shown]:
        call = self._calls.setdefault(call_id, _Call(name))
        if call.ended:
            return
        yield from self._open_step()
        yield from self._end_text()
        if not call.started:
            call.started = True
            yield ToolStarted(call_id, call.name, self.message_id())
        yield ToolArgs(call_id, delta)

    def _open_step(self) -> Iterator[Shown]:
        if not self._step_open:
            self._step_open = True
            yield StepStarted(self.step)

    def _close_step(self) -> Iterator[Shown]:
        yield from self._end_text()
        if self._step_open:
            self._step_open = False
            yield StepFinished(self.step)

    def _end_text(self) -> Iterator[Shown]:
        if self._text:
            yield TextEnded(self.message_id(), self._text)
            self._text = ""

    def _message(self, message: MessageBody) -> Iterator[Shown]:
        yield from self._open_step()
        streamed = self._streamed_text and not self._reset
        for block in message.content:
            match block:
                case ThinkingBlock() if not block.data.redacted:
                    self._texts += 1
                    yield Reasoning(self.message_id(), f"{self.message_id()}.r{self._texts}", block.data.thinking)
                case TextBlock() if not streamed and block.data.text:
                    self._texts += 1
                    part = f"{self.message_id()}.t{self._texts}"
                    yield TextStarted(self.message_id(), part)
                    yield TextDelta(self.message_id(), part, block.data.text)
                    yield TextEnded(self.message_id(), part)
                case ToolCallBlock():
                    yield from self._end_text()
                    yield from self._call(block.data.id, block.data.name, block.data.arguments)
        yield from self._end_text()

    def _call(self, call_id: str, name: str, arguments: dict[str, Any]) -> Iterator[Shown]:
        call = self._calls.setdefault(call_id, _Call(name))
        self._step_calls.append(call_id)
        if not call.started or self._reset:
            if not call.started:
                call.started = True
                yield ToolStarted(call_id, name, self.message_id())
            if self._reset or not call.ended:
                # Whole arguments when none streamed (or what streamed was void): the frontend needs
                # them to run its tool, and joined fragments must be the arguments as written.
                yield ToolArgs(call_id, dumps(arguments))
        call.ended = True
        yield ToolEnded(call_id, name, arguments)

    def _result(self, event: ToolResult) -> Iterator[Shown]:
        call_id = event.call_id
        self._resulted.add(call_id)
        call = self._calls.get(call_id)
        name = call.name if call is not None else self.known.get(call_id)
        if call_id not in self.have and name is not None:
            yield ShownResult(call_id, name, result_text(event.content), event.is_error)
        if self._pause is not None and call_id in self._waiting:
            self._waiting.discard(call_id)
            if not self._waiting:
                self._done = True
                yield self._pause

    def _timing(self, timing: StepTiming) -> Iterator[Shown]:
        step = timing.step
        if timing.run_id != self.run_id or step < self.step:
            return
        self.step = step
        # The last event a step's commit appends: every call of the step, and what became of it, is known.
        yield from self._close_step()
        owed, approvals = tuple(self._owed), tuple(self._approvals)
        held = set(owed) | {approval.call_id for approval in approvals}
        waiting = {call for call in self._step_calls if call not in held and call not in self._resulted}
        self.step += 1
        self._texts, self._streamed_text, self._reset = 0, False, False
        self._owed, self._approvals, self._step_calls = [], [], []
        if not owed and not approvals:
            return
        pause = Paused(step, owed, approvals)
        if waiting:
            self._pause, self._waiting = pause, waiting
        else:
            self._done = True
            yield pause

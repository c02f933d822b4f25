"""Runs: input starts or steers one, a worker begins and commits its steps, cancel and failure end it.

A step is one arq job, `run_step(session_id, run_id, step)`, with the job id `<prefix>:step:<run>:<step>`,
so the same step can never be queued twice. Whoever schedules a step (a script) also leaves its member in
the continuation index; it leaves that index once the job is enqueued, and the sweeper enqueues whatever
a dead process left behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from broker import events
from broker.aio import aw
from broker.core import Core
from broker.errors import BrokerUnavailable, NotFound, translate_redis_errors
from broker.layouts import run_args, run_keys

RUN_STEP_JOB = "run_step"
CLIENT_TOOL_PREFIX = "client__"
RUN_GONE_CANCELLED = "the run was cancelled before the client answered"
RUN_GONE_FAILED = "the run failed before the client answered"
# Entries of a registration's call stream older than this are trimmed: their ack deadline is long past.
_CALL_STREAM_RETENTION_FACTOR = 2
_COMMIT_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Submitted:
    outcome: Literal["new_run", "steered"]
    run_id: str
    scheduled: str


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """A tool call the model made: its id, the model-visible name, its arguments."""

    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Committed:
    outcome: Literal["completed", "waiting", "continue", "cancelled", "stale"]
    scheduled: str


@dataclass(frozen=True, slots=True)
class _Draft:
    """A model step ready to commit: its message and its calls, each call's `(client, tool)` parsed."""

    session_id: str
    run_id: str
    step: int
    message: str
    calls: list[PlannedCall]
    targets: list[tuple[str, str] | None]


def parse_client_tool(name: str) -> tuple[str, str] | None:
    """`client__<name>__<tool>` as (name, tool); client names hold no `_`, so the first `__` splits."""
    if not name.startswith(CLIENT_TOOL_PREFIX):
        return None
    client, sep, tool = name[len(CLIENT_TOOL_PREFIX) :].partition("__")
    if not sep or not client or not tool:
        return None
    return client, tool


def _unavailable(call: PlannedCall, client: str | None, tool: str | None, resolved: bool) -> str:
    if client is None:
        text = f"no tool named {call.name} is available in this session"
    elif not resolved:
        text = f"no client named {client} is registered in this session, so {call.name} cannot be called"
    else:
        text = f"client {client} does not serve a tool named {tool}"
    return events.tool_result(call.call_id, text, is_error=True)


class Runs:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def submit(self, session_id: str, run_id: str, input_id: str, text: str, source: str) -> Submitted:
        """Start a run, or queue the text to steer the active one (CONTRACT 5's default policy)."""
        keys = self._core.keys
        start = events.message_user(text, "external" if source == "external" else "client")
        steer = events.message_user(text, "external" if source == "external" else "steer")
        outcome, run, scheduled = await self._core.scripts.run(
            "post_input",
            run_keys(keys, session_id),
            [*run_args(keys, session_id, run_id), input_id, start, steer],
            {"session": f"no session {session_id}"},
        )
        return Submitted("new_run" if outcome == "new_run" else "steered", run, scheduled)

    async def cancel(self, session_id: str) -> str | None:
        """Cancel the active run; returns its id, or None when none was active."""
        keys = self._core.keys
        run_id, _ = await self._core.scripts.run(
            "cancel_run",
            run_keys(keys, session_id),
            [*run_args(keys, session_id, ""), RUN_GONE_CANCELLED],
            {"session": f"no session {session_id}"},
        )
        return str(run_id) or None

    async def begin(self, session_id: str, run_id: str, step: int) -> Literal["run", "stale", "cancelled"]:
        keys = self._core.keys
        try:
            (outcome,) = await self._core.scripts.run(
                "begin_step",
                run_keys(keys, session_id),
                [*run_args(keys, session_id, run_id), step, RUN_GONE_CANCELLED],
            )
        except NotFound:
            return "stale"
        return "run" if outcome == "run" else "cancelled" if outcome == "cancelled" else "stale"

    async def cancel_requested(self, session_id: str, run_id: str) -> bool:
        with translate_redis_errors():
            current, cancel = await aw(
                self._core.redis.hmget(self._core.keys.session(session_id).run, ["run_id", "cancel"])
            )
        return bool(current != run_id.encode() or cancel == b"1")

    async def commit(
        self, session_id: str, run_id: str, step: int, content: list[events.Block], model: str | None,
        calls: list[PlannedCall],
    ) -> Committed:  # fmt: skip
        """Commit the step's message and dispatch its calls in one script, resolving names as it goes."""
        targets = [parse_client_tool(call.name) for call in calls]
        draft = _Draft(session_id, run_id, step, events.message_assistant(content, model), calls, targets)
        names = sorted({target[0] for target in draft.targets if target is not None})
        for _ in range(_COMMIT_ATTEMPTS):
            with translate_redis_errors():
                ids = (
                    await aw(self._core.redis.hmget(self._core.keys.session(session_id).names, names)) if names else []
                )
            resolved = {name: bytes(cid).decode() for name, cid in zip(names, ids, strict=True) if cid is not None}
            outcome, scheduled = await self._commit_once(draft, resolved)
            if outcome != "retry":
                return Committed(outcome, scheduled)
        raise BrokerUnavailable("client names kept changing while the step was committed")

    async def _commit_once(self, draft: _Draft, resolved: dict[str, str]) -> tuple[Any, str]:
        keys, settings = self._core.keys, self._core.settings
        s = keys.session(draft.session_id)
        extra_keys: list[str] = []
        args: list[str | int] = [
            *run_args(keys, draft.session_id, draft.run_id),
            draft.step,
            settings.ack_timeout_ms,
            draft.message,
            len(draft.calls),
            RUN_GONE_CANCELLED,
            settings.ack_timeout_ms * _CALL_STREAM_RETENTION_FACTOR,
        ]
        for call, target in zip(draft.calls, draft.targets, strict=True):
            client, tool = target if target is not None else (None, None)
            cid = resolved.get(client, "") if client is not None else ""
            if cid:
                extra_keys += [s.client(cid), s.client_calls(cid), s.deadline(call.call_id)]
            args += [
                call.call_id,
                client or "",
                cid,
                tool or "",
                events.tool_call(call.call_id, call.name, call.arguments),
                events.client_tool_dispatched(cid, call.call_id, tool or "", call.arguments) if cid else "",
                _unavailable(call, client, tool, bool(cid)),
            ]
        try:
            outcome, scheduled = await self._core.scripts.run(
                "commit_step", [*run_keys(keys, draft.session_id), *extra_keys], args
            )
        except NotFound:
            return "stale", ""
        return outcome, str(scheduled)

    async def finish(self, session_id: str, run_id: str, step: int, outcome: str, error: str = "") -> None:
        keys = self._core.keys
        text = RUN_GONE_CANCELLED if outcome == "run_cancelled" else RUN_GONE_FAILED
        try:
            await self._core.scripts.run(
                "finish_run",
                run_keys(keys, session_id),
                [*run_args(keys, session_id, run_id), step, outcome, error, text],
            )
        except NotFound:
            return

    async def enqueue(self, member: str) -> None:
        """Enqueue the step job a script scheduled, then take it out of the continuation index."""
        if not member:
            return
        session_id, rest = self._core.keys.split_member(member)
        run_id, _, step = rest.rpartition(":")
        with translate_redis_errors():
            await self._core.arq.enqueue_job(
                RUN_STEP_JOB, session_id, run_id, int(step), _job_id=self._core.keys.step_job_id(run_id, int(step))
            )
            await aw(self._core.redis.zrem(self._core.keys.continuations, member))

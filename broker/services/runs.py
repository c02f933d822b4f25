"""Runs: input starts, steers or queues one; a worker begins, holds and commits its steps; cancel, failure
and a step limit end it; a step whose worker stopped is reclaimed as a new try.

A step is one entry on its partition's work stream, `s|<session>|<run>|<step>|<attempt>`, written by the
script that owes it; a reclaimed step is owed again as the next attempt, so a late duplicate of the old
try finds itself stale.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.scripts.layouts import run_names
from broker.services.clients import (
    CALL_STREAM_RETENTION_FACTOR,
    MAX_ACTIVE_CLIENTS,
    MAX_NAME_LENGTH,
    Caller,
    Receipt,
    receipt_names,
)
from common.codec import dumps, loads
from common.events import build as events
from common.policies import Policy, denied_text

CLIENT_TOOL_PREFIX = "client__"
RUN_GONE_CANCELLED = "the run was cancelled before the client answered"
RUN_GONE_FAILED = "the run failed before the client answered"
SCOPED_CLIENT_NAME = "turn"
# A step whose worker stopped this many times ends the run rather than be tried again.
MAX_RECLAIMS = 3


@dataclass(frozen=True, slots=True)
class Submitted:
    """How input was taken: `body` is the answer's JSON as the first request with its Idempotency-Key
    was given it (SubmitOutcomeBody); the fields are read from it."""

    outcome: Literal["new_run", "steered"]
    run_id: str
    scoped_client_id: str | None
    body: str

    @classmethod
    def of(cls, body: str) -> Submitted:
        answer = loads(body)
        return cls(answer["outcome"], answer["run_id"], answer.get("client_id"), body)


@dataclass(frozen=True, slots=True)
class PlannedCall:
    """A tool call the model made: its id, the model-visible name, its arguments. `invalid` says why the
    provider's arguments could not be read (they are then `{}` and the call gets an error result)."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    invalid: str = ""


@dataclass(frozen=True, slots=True)
class Route:
    """Where a call goes. `kind` client: to `client_id` (a registered `client_name`, checked again at
    commit, or '' for a run-scoped client); server: to a worker; none: an error result (`error`)."""

    kind: Literal["client", "server", "none"]
    tool: str
    policy: Policy = "allow"
    client_name: str = ""
    client_id: str = ""
    server: str = ""
    error: str = ""
    # A client tool's own deadlines (ms; 0: the deployment's result deadline, no heartbeat).
    timeout_ms: int = 0
    heartbeat_ms: int = 0
    # A client tool's `on_leave`: "wait" when its call waits for its client should the registration go.
    on_leave: str = ""
    # A server call's source: '' for the deployment's own tools, `mcp:<grant>` for an MCP server's.
    source: str = ""
    # How long a `require_approval` call's approval waits before it resolves as a deny (ms; 0: for ever).
    approval_timeout_ms: int = 0
    # The schema an approver's edited arguments are held to, for a server tool that has one (a client
    # tool's is read from its registration when the decision comes).
    schema: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Committed:
    outcome: Literal["completed", "waiting", "continue", "cancelled", "stale", "retry", "failed"]
    """'failed': the step's output would pass SWITCHBOARD_MAX_SESSION_BYTES; the run ended with run_failed."""


@dataclass(frozen=True, slots=True)
class OfferedClient:
    """An active registration whose tools the model is offered this step."""

    client_id: str
    name: str
    tools: list[dict[str, Any]]
    scoped: bool


def parse_client_tool(name: str) -> tuple[str, str] | None:
    """`client__<name>__<tool>` as (name, tool); client names hold no `_`, so the first `__` splits."""
    if not name.startswith(CLIENT_TOOL_PREFIX):
        return None
    client, sep, tool = name[len(CLIENT_TOOL_PREFIX) :].partition("__")
    if not sep or not client or not tool:
        return None
    return client, tool


def client_tools(offered: Sequence[OfferedClient]) -> dict[str, tuple[OfferedClient, dict[str, Any]]]:
    """Each tool of the offered registrations by the name a model calls it by: a registered client's as
    `client__<name>__<tool>`, a run-scoped registration's (the run's own tools) as its own name. A
    registered client's tool wins a name both give."""
    named: dict[str, tuple[OfferedClient, dict[str, Any]]] = {}
    for client in sorted(offered, key=lambda c: not c.scoped):
        for tool in client.tools:
            visible = tool["name"] if client.scoped else f"{CLIENT_TOOL_PREFIX}{client.name}__{tool['name']}"
            named[visible] = (client, tool)
    return named


@dataclass(frozen=True, slots=True)
class StepCall:
    """One tool call of a step as commit_step.lua reads it: one argument, a JSON object by field name
    (`encode`); a field that is None is left out of it (the script reads it as absent)."""

    call_id: str
    kind: Literal["client", "server", "none"]
    tool: str
    """The raw tool name (a client's own name for it, or the server tool's)."""
    policy: Policy
    name: str
    """The model-visible tool name: a decision remembered for the session under it decides a
    `require_approval` call at once (resolve_approval.lua)."""
    tool_call: str
    """Its `tool_call` event JSON."""
    error: str
    """Its error `tool_result` JSON: the answer for `deny`, or for a tool no active registration holds."""
    client_name: str | None = None
    """A registered name the script checks still resolves to `client_id` (None for a run-scoped client)."""
    client_id: str | None = None
    payload: str | None = None
    """The client_tool_dispatched JSON of a client call, the arguments JSON of a server call."""
    approval: str | None = None
    """The approval_requested JSON (a `require_approval` call)."""
    timeout_ms: int | None = None
    """A client tool's result deadline (None: the deployment's)."""
    heartbeat_ms: int | None = None
    """A client tool's heartbeat (None: none)."""
    on_leave: str | None = None
    """`wait` for a client tool whose call waits for its client should its registration go (None: it
    fails with client_gone)."""
    source: str | None = None
    """A server call's source: None for the deployment's own tools, `mcp:<grant>` for an MCP server's."""
    schema: str | None = None
    """The JSON Schema an approver's edited arguments are held to (None: none, or a client tool's, which is
    its registration's)."""
    approval_timeout_ms: int | None = None
    """How long the approval waits before it resolves as a deny (None: for ever)."""

    @classmethod
    def of(cls, call: PlannedCall, route: Route, traceparent: str | None = None) -> StepCall:
        payload = None
        if route.kind == "client":
            payload = events.client_tool_dispatched(
                route.client_id, call.call_id, route.tool, call.arguments, traceparent=traceparent
            )
        elif route.kind == "server":
            payload = dumps(call.arguments)
        approval = None
        if route.policy == "require_approval" and route.kind != "none":
            approval = events.approval_requested(call.call_id, route.server, route.tool, call.arguments)
        if route.error:
            error = route.error
        elif route.policy == "deny":
            error = denied_text(call.name)
        else:
            error = f"the tool {call.name} is not available to this run"
        return cls(
            call_id=call.call_id,
            kind=route.kind,
            tool=route.tool,
            policy=route.policy,
            name=call.name,
            tool_call=events.tool_call(call.call_id, call.name, call.arguments),
            error=events.tool_result(call.call_id, error, is_error=True),
            client_name=route.client_name or None,
            client_id=route.client_id or None,
            payload=payload,
            approval=approval,
            timeout_ms=route.timeout_ms or None,
            heartbeat_ms=route.heartbeat_ms or None,
            on_leave=route.on_leave or None,
            source=route.source or None,
            schema=dumps(route.schema) if approval and route.schema is not None else None,
            approval_timeout_ms=route.approval_timeout_ms or None if approval else None,
        )

    def encode(self) -> str:
        return dumps({field.name: value for field in fields(self) if (value := getattr(self, field.name)) is not None})


class Runs:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def _script(
        self,
        name: str,
        session_id: str,
        run_id: str,
        args: Mapping[str, str | int | Sequence[str]],
        keys: Mapping[str, str | Sequence[str]] | None = None,
    ) -> list[Any]:
        """Run a script of the run layout (lib/run.lua) on `run_id` ('' for whichever run is active) with
        its own `keys` and `args` by name."""
        run_keys, run_args = run_names(self._core.keys, session_id, run_id)
        partition = self._core.keys.session(session_id).partition
        return await self._core.scripts.run(
            name, {**run_keys, **(keys or {})}, {**run_args, **args}, partition=partition
        )

    async def submit(
        self,
        session_id: str,
        run_id: str,
        input_id: str,
        text: str,
        source: str,
        scoped: tuple[str, list[dict[str, Any]]] | None = None,
        *,
        scoped_ttl_s: int | None = None,
        receipt: Receipt | None = None,
    ) -> Submitted:
        """Start, steer or queue a run by the session's policy; `scoped` is a run-scoped registration
        (its client id and tools) for input that brings its own tools, leased for `scoped_ttl_s` when
        given (else it lives as long as its run). With `receipt`, a request whose Idempotency-Key was
        answered already gets that answer and takes no input."""
        s = self._core.keys.session(session_id)
        scoped_id, tools = scoped if scoped is not None else ("", [])
        # The caller was checked before (the route's dependency): the script checks no token.
        receipt_keys, receipt_args = receipt_names(self._core, session_id, Caller(), receipt)
        (body,) = await self._script(
            "post_input",
            session_id,
            run_id,
            {
                **receipt_args,
                "input_id": input_id,
                "text": text,
                "source": source,
                "scoped": scoped_id,
                "scoped_name": SCOPED_CLIENT_NAME,
                "tools": dumps(tools),
                "tool_names": "\n".join(tool["name"] for tool in tools),
                "max_clients": MAX_ACTIVE_CLIENTS,
                "max_len": MAX_NAME_LENGTH,
                "lease_s": scoped_ttl_s or "",
            },
            {**receipt_keys, "clients": s.clients, "client": s.client(scoped_id)},
        )
        return Submitted.of(str(body))

    async def cancel(self, session_id: str) -> str | None:
        """Cancel the active run; its id (None when none was active)."""
        run_id, _ = await self.cancel_run(session_id)
        return run_id

    async def cancel_run(self, session_id: str) -> tuple[str | None, bool]:
        """Cancel the active run: its id (None when none was active), and whether it ended here (it
        waited) rather than being flagged for its running step's worker to end."""
        run_id, outcome = await self._script("cancel_run", session_id, "", {"gone_text": RUN_GONE_CANCELLED})
        return str(run_id) or None, outcome == "ended"

    async def begin(
        self, session_id: str, run_id: str, step: int, attempt: int, max_steps: int, entry: str = "", trace: str = ""
    ) -> Literal["run", "stale", "ended"]:
        """Begin a step under its lease; `entry` is the work entry that brought it (done with here); `trace`
        the run's trace id when traced (on `run_started` and the run's end event)."""
        lease = self._core.settings.step_lease_ms
        try:
            (outcome,) = await self._script(
                "begin_step",
                session_id,
                run_id,
                {
                    "step": step,
                    "attempt": attempt,
                    "max_steps": max_steps,
                    "lease_ms": lease,
                    "gone_text": RUN_GONE_CANCELLED,
                    "entry": entry,
                    "trace": trace,
                },
            )
        except NotFound:
            return "stale"
        return "run" if outcome == "run" else "ended" if outcome == "ended" else "stale"

    async def renew(self, session_id: str, run_id: str, step: int, attempt: int) -> bool:
        """Extend the step's lease; False when it is no longer this worker's."""
        lease = self._core.settings.step_lease_ms
        (renewed,) = await self._script(
            "renew_step", session_id, run_id, {"step": step, "attempt": attempt, "lease_ms": lease}
        )
        return bool(int(renewed))

    async def cancel_requested(self, session_id: str, run_id: str) -> bool:
        with translate_redis_errors():
            current, cancel = await self._core.redis.hmget(
                self._core.keys.session(session_id).run, ["run_id", "cancel"]
            )
        return bool(current != run_id.encode() or cancel == b"1")

    async def offered(self, session_id: str) -> list[OfferedClient]:
        """The active registrations whose tools a step of the active run offers: the registered ones, and
        the run's own (run-scoped) ones."""
        s = self._core.keys.session(session_id)
        with translate_redis_errors():
            async with self._core.redis.pipeline() as pipe:
                pipe.hgetall(s.names)
                pipe.hget(s.run, "run_id")
                names, run_id = await pipe.execute()
            ids = {bytes(cid).decode(): bytes(name).decode() for name, cid in names.items()}
            async with self._core.redis.pipeline() as pipe:
                for cid in ids:
                    pipe.hmget(s.client(cid), ["tools", "run", "state"])
                rows = await pipe.execute()
        current = bytes(run_id).decode() if run_id else ""
        offered = []
        for (cid, name), (tools, run, state) in zip(ids.items(), rows, strict=True):
            if state != b"active" or tools is None:
                continue
            scoped = bool(run)
            # Another run's scoped registration (a queued input's) is not this run's to offer.
            if scoped and bytes(run).decode() != current:
                continue
            offered.append(OfferedClient(cid, name, loads(tools), scoped))
        return offered

    async def commit(
        self,
        session_id: str,
        run_id: str,
        step: int,
        attempt: int,
        message: str,
        calls: list[tuple[PlannedCall, Route]],
        timing: str,
        usage: str = "",
        traceparents: Mapping[str, str] | None = None,
    ) -> Committed:
        """Commit the step's message and route its calls in one script. 'retry' means a registered name
        resolved differently when the script ran: route again and commit again. `usage`: the step's token
        counts (a JSON object, '' for none), added to the run's; `traceparents`: each call's span by call
        id, when the run is traced (a client call's `client_tool_dispatched` carries it)."""
        s = self._core.keys.session(session_id)
        settings = self._core.settings
        spans = traceparents or {}
        planned = [StepCall.of(call, route, spans.get(call.call_id)) for call, route in calls]
        # The script takes a client hash and call stream per client call that names a client, in order.
        clients = [
            key
            for c in planned
            if c.kind == "client" and c.client_id
            for key in (s.client(c.client_id), s.client_calls(c.client_id))
        ]
        try:
            (outcome,) = await self._script(
                "commit_step",
                session_id,
                run_id,
                {
                    "step": step,
                    "attempt": attempt,
                    "ack_ms": settings.ack_timeout_ms,
                    "message": message,
                    "gone_text": RUN_GONE_CANCELLED,
                    "retention_ms": settings.ack_timeout_ms * CALL_STREAM_RETENTION_FACTOR,
                    "timing": timing,
                    "usage": usage,
                    "calls": [c.encode() for c in planned],
                },
                {"clients": clients},
            )
        except NotFound:
            return Committed("stale")
        return Committed(outcome)

    async def finish(
        self, session_id: str, run_id: str, step: int, attempt: int, outcome: str, error: str = ""
    ) -> None:
        text = RUN_GONE_CANCELLED if outcome == "run_cancelled" else RUN_GONE_FAILED
        with contextlib.suppress(NotFound):
            await self._script(
                "finish_run",
                session_id,
                run_id,
                {"step": step, "attempt": attempt, "outcome": outcome, "error": error, "gone_text": text},
            )

    async def reclaim(self, session_id: str) -> str | None:
        """Give the session's running step to another worker if its lease lapsed; the id of the run it
        ended instead (its step's workers stopped too often), else None."""
        outcome, *rest = await self._script(
            "reclaim_step", session_id, "", {"max_reclaims": MAX_RECLAIMS, "gone_text": RUN_GONE_FAILED}
        )
        return str(rest[0]) if outcome == "ended" and rest else None

    async def dequeue(self, session_id: str) -> None:
        await self._script("dequeue", session_id, "", {})

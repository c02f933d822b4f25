"""Runs: input starts, steers or queues one; a worker begins, holds and commits its steps; cancel, failure
and a step limit end it; a step whose worker stopped is reclaimed as a new try.

A step is one entry on its partition's work stream, `s|<session>|<run>|<step>|<attempt>`, written by the
script that owes it; a reclaimed step is owed again as the next attempt, so a late duplicate of the old
try finds itself stale.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Literal

from broker import events
from broker.clients import MAX_ACTIVE_CLIENTS, MAX_NAME_LENGTH
from broker.codec import canonical_json, dumps, loads, sha256_hex
from broker.core import Core
from broker.errors import NotFound, translate_redis_errors
from broker.layouts import run_args, run_keys

CLIENT_TOOL_PREFIX = "client__"
RUN_GONE_CANCELLED = "the run was cancelled before the client answered"
RUN_GONE_FAILED = "the run failed before the client answered"
SCOPED_CLIENT_NAME = "turn"
# A step whose worker stopped this many times ends the run rather than be tried again.
MAX_RECLAIMS = 3
# Entries of a registration's call stream older than this are trimmed: their ack deadline is long past.
CALL_STREAM_RETENTION_FACTOR = 2

Policy = Literal["allow", "require_approval", "deny"]


@dataclass(frozen=True, slots=True)
class Submitted:
    outcome: Literal["new_run", "steered"]
    run_id: str
    scoped_client_id: str | None


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
    # A server call's source: '' for the deployment's own tools, `mcp:<grant>` for an MCP server's.
    source: str = ""
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


def args_hash(arguments: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of the arguments (docs/architecture.md, Decisions the code relies on)."""
    return sha256_hex(canonical_json(arguments))


def _call_args(call: PlannedCall, route: Route) -> list[str | int]:
    """The fifteen ARGV entries of one call for commit_step.lua."""
    payload = ""
    if route.kind == "client":
        payload = events.client_tool_dispatched(route.client_id, call.call_id, route.tool, call.arguments)
    elif route.kind == "server":
        payload = dumps(call.arguments)
    approval = ""
    if route.policy == "require_approval" and route.kind != "none":
        approval = dumps(
            {
                "type": "approval_requested",
                "call_id": call.call_id,
                "server": route.server,
                "tool": route.tool,
                "arguments": call.arguments,
                "args_hash": args_hash(call.arguments),
            }
        )
    error = route.error or f"the tool {call.name} is not available to this run"
    return [
        call.call_id,
        route.kind,
        route.client_name,
        route.client_id,
        route.tool,
        route.policy,
        events.tool_call(call.call_id, call.name, call.arguments),
        payload,
        events.tool_result(call.call_id, error, is_error=True),
        approval,
        route.timeout_ms or "",
        route.heartbeat_ms or "",
        call.name,
        route.source,
        dumps(route.schema) if approval and route.schema is not None else "",
    ]


class Runs:
    def __init__(self, core: Core) -> None:
        self._core = core

    def _run(self, session_id: str, run_id: str) -> tuple[list[str], list[str | int]]:
        keys = self._core.keys
        return run_keys(keys, session_id), run_args(keys, session_id, run_id)

    async def _script(
        self,
        name: str,
        session_id: str,
        keys: list[str],
        args: list[str | int],
        refusals: dict[str, str] | None = None,
    ) -> list[Any]:
        partition = self._core.keys.session(session_id).partition
        return await self._core.scripts.run(name, keys, args, refusals, partition=partition)

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
    ) -> Submitted:
        """Start, steer or queue a run by the session's policy; `scoped` is a run-scoped registration
        (its client id and tools) for input that brings its own tools, leased for `scoped_ttl_s` when
        given (else it lives as long as its run)."""
        keys, args = self._run(session_id, run_id)
        s = self._core.keys.session(session_id)
        scoped_id, tools = scoped if scoped is not None else ("", [])
        outcome, run, scoped_client = await self._script(
            "post_input",
            session_id,
            [*keys, s.clients, s.client(scoped_id)],
            [
                *args,
                input_id,
                text,
                source,
                scoped_id,
                SCOPED_CLIENT_NAME,
                dumps(tools),
                "\n".join(tool["name"] for tool in tools),
                MAX_ACTIVE_CLIENTS,
                MAX_NAME_LENGTH,
                scoped_ttl_s or "",
            ],
            {"session": f"no session {session_id}"},
        )
        kind: Literal["new_run", "steered"] = "new_run" if outcome == "new_run" else "steered"
        return Submitted(kind, run, scoped_client or None)

    async def cancel(self, session_id: str) -> str | None:
        """Cancel the active run; its id (None when none was active)."""
        keys, args = self._run(session_id, "")
        run_id, _ = await self._script(
            "cancel_run", session_id, keys, [*args, RUN_GONE_CANCELLED], {"session": f"no session {session_id}"}
        )
        return str(run_id) or None

    async def begin(
        self, session_id: str, run_id: str, step: int, attempt: int, max_steps: int, entry: str = ""
    ) -> Literal["run", "stale", "ended"]:
        """Begin a step under its lease; `entry` is the work entry that brought it (done with here)."""
        keys, args = self._run(session_id, run_id)
        lease = self._core.settings.step_lease_ms
        try:
            (outcome,) = await self._script(
                "begin_step", session_id, keys, [*args, step, attempt, max_steps, lease, RUN_GONE_CANCELLED, entry]
            )
        except NotFound:
            return "stale"
        return "run" if outcome == "run" else "ended" if outcome == "ended" else "stale"

    async def renew(self, session_id: str, run_id: str, step: int, attempt: int) -> bool:
        """Extend the step's lease; False when it is no longer this worker's."""
        keys, args = self._run(session_id, run_id)
        lease = self._core.settings.step_lease_ms
        (renewed,) = await self._script("renew_step", session_id, keys, [*args, step, attempt, lease])
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
            async with self._core.redis.pipeline(transaction=False) as pipe:
                pipe.hgetall(s.names)
                pipe.hget(s.run, "run_id")
                names, run_id = await pipe.execute()
            ids = {bytes(cid).decode(): bytes(name).decode() for name, cid in names.items()}
            async with self._core.redis.pipeline(transaction=False) as pipe:
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
    ) -> Committed:
        """Commit the step's message and route its calls in one script. 'retry' means a registered name
        resolved differently when the script ran: route again and commit again."""
        keys, args = self._run(session_id, run_id)
        s = self._core.keys.session(session_id)
        settings = self._core.settings
        extra_keys: list[str] = []
        argv: list[str | int] = [
            *args,
            step,
            attempt,
            settings.ack_timeout_ms,
            message,
            len(calls),
            RUN_GONE_CANCELLED,
            settings.ack_timeout_ms * CALL_STREAM_RETENTION_FACTOR,
            timing,
        ]
        for call, route in calls:
            if route.kind == "client" and route.client_id:
                extra_keys += [s.client(route.client_id), s.client_calls(route.client_id)]
            argv += _call_args(call, route)
        try:
            (outcome,) = await self._script("commit_step", session_id, [*keys, *extra_keys], argv)
        except NotFound:
            return Committed("stale")
        return Committed(outcome)

    async def finish(
        self, session_id: str, run_id: str, step: int, attempt: int, outcome: str, error: str = ""
    ) -> None:
        keys, args = self._run(session_id, run_id)
        text = RUN_GONE_CANCELLED if outcome == "run_cancelled" else RUN_GONE_FAILED
        with contextlib.suppress(NotFound):
            await self._script("finish_run", session_id, keys, [*args, step, attempt, outcome, error, text])

    async def reclaim(self, session_id: str) -> None:
        """Give the session's running step to another worker if its lease lapsed."""
        keys, args = self._run(session_id, "")
        await self._script("reclaim_step", session_id, keys, [*args, MAX_RECLAIMS, RUN_GONE_FAILED])

    async def dequeue(self, session_id: str) -> None:
        keys, args = self._run(session_id, "")
        await self._script("dequeue", session_id, keys, args)

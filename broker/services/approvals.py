"""Approvals: the first decision on a call that waits for one wins; a second is a conflict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from broker.core import Core
from broker.errors import BrokerUnavailable, InvalidRequest, NotFound, translate_redis_errors
from broker.refusals import message as refusal_message
from broker.scripts.layouts import call_names
from common.codec import dumps, loads
from common.events import build as events
from common.schema.checks import ArgumentChecks, Unchecked

_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Resolved:
    event: str


class Approvals:
    def __init__(self, core: Core, checks: ArgumentChecks) -> None:
        self._core = core
        self._checks = checks

    async def resolve(
        self,
        session_id: str,
        call_id: str,
        decision: Literal["allow", "deny"],
        message: str,
        resolved_by: str,
        *,
        remember: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> Resolved:
        """Decide the call. `remember` decides later calls of the same tool in this session the same way;
        `arguments` (with allow) replace the model's, checked first against a client tool's schema
        (InvalidRequest naming the field and the rule when they fail)."""
        keys = self._core.keys
        s = keys.session(session_id)
        settings = self._core.settings
        for _ in range(_ATTEMPTS):
            with translate_redis_errors():
                raw = await self._core.redis.hget(s.calls, call_id)
            if raw is None:
                raise NotFound(refusal_message("no_call_in_session", [call_id]))
            # An allowed client call goes to the registration it was bound to at commit; the script
            # checks the binding read here is still the record's.
            record = loads(raw)
            client_id = str(record.get("client", ""))
            edited, dispatch = "", ""
            if arguments is not None and decision == "allow":
                edited = dumps(arguments)
                await self._check_record(session_id, record, arguments)
                if record.get("kind") == "client":
                    # A call an MCP client made says so again when it is sent with the edited arguments.
                    source = record.get("src") or None
                    dispatch = events.client_tool_dispatched(
                        client_id, call_id, str(record["tool"]), arguments, source=source
                    )
            call, args = call_names(keys, session_id, call_id, "")
            reply = await self._core.scripts.run(
                "resolve_approval",
                {**call, "client": s.client(client_id), "stream": s.client_calls(client_id)},
                {
                    **args,
                    "decision": decision,
                    "message": message,
                    "resolved_by": resolved_by,
                    "ack_ms": settings.ack_timeout_ms,
                    "retention_ms": settings.ack_timeout_ms * 2,
                    "bound": client_id,
                    "remember": "session" if remember else "",
                    "edited": edited,
                    "dispatch": dispatch,
                },
                partition=s.partition,
            )
            if reply[0] != "retry":
                return Resolved(reply[0])
        raise BrokerUnavailable(f"call {call_id} kept changing while it was decided")

    async def check_arguments(self, session_id: str, call_id: str, arguments: dict[str, Any]) -> None:
        """Check an approver's edited arguments as `resolve` would, deciding nothing: InvalidRequest
        naming the rule they fail (nothing to check when the session has no such call)."""
        with translate_redis_errors():
            raw = await self._core.redis.hget(self._core.keys.session(session_id).calls, call_id)
        if raw is not None:
            await self._check_record(session_id, loads(raw), arguments)

    async def _check_record(self, session_id: str, record: dict[str, Any], arguments: dict[str, Any]) -> None:
        if record.get("kind") == "client":
            client = self._core.keys.session(session_id).client(str(record.get("client", "")))
            await self._check(client, str(record.get("tool", "")), arguments)
        elif record.get("schema"):
            # A server tool whose schema the step kept with the call (an MCP server's).
            await self._check_against(loads(record["schema"]), str(record.get("tool", "")), arguments)

    async def _check(self, client_key: str, tool: str, arguments: dict[str, Any]) -> None:
        """Edited arguments must satisfy the schema the client declared for the tool (as it stands now: a
        tool it no longer offers fails the call when the decision lands, so there is nothing to check)."""
        with translate_redis_errors():
            raw = await self._core.redis.hget(client_key, "tools")
        for declared in loads(raw) if raw else []:
            if declared.get("name") == tool:
                await self._check_against(declared.get("parameters") or {}, tool, arguments)
                return

    async def _check_against(self, schema: dict[str, Any], tool: str, arguments: dict[str, Any]) -> None:
        try:
            problem = await self._checks.problem(schema, arguments)
        except Unchecked as unchecked:
            raise InvalidRequest(
                f"arguments: they could not be checked against the schema of {tool}: {unchecked}"
            ) from None
        if problem:
            raise InvalidRequest(f"arguments: they do not match the schema of {tool}: {problem}")

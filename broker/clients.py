"""Client registrations and their calls: register, ping, replace tools, leave; ack and answer a call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker import events
from broker.codec import dumps
from broker.core import Core
from broker.errors import NotFound
from broker.layouts import call_args, call_keys, client_args, client_keys

MAX_ACTIVE_CLIENTS = 32
MAX_NAME_LENGTH = 32


@dataclass(frozen=True, slots=True)
class Registered:
    id: str
    name: str
    expires_at: int | None


@dataclass(frozen=True, slots=True)
class PingOutcome:
    expires_at: int | None
    alive: bool
    owed: list[str]


def _tools(tools: list[dict[str, Any]]) -> tuple[str, str]:
    return dumps(tools), "\n".join(tool["name"] for tool in tools)


def _refusals(session_id: str, client_id: str, call_id: str = "") -> dict[str, str]:
    return {
        "session": f"no session {session_id}",
        "client": f"no active client {client_id} in this session (it left, lapsed, or never registered)",
        "call": f"client {client_id} has no call {call_id}",
    }


class Clients:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def register(
        self, session_id: str, client_id: str, name: str, ttl_s: int | None, tools: list[dict[str, Any]]
    ) -> Registered:
        keys = self._core.keys
        s = keys.session(session_id)
        lifetime = {"type": "never"} if ttl_s is None else {"type": "ttl", "data": {"seconds": ttl_s}}
        tools_json, tool_names = _tools(tools)
        assigned, expires = await self._core.scripts.run(
            "register_client",
            [s.meta, s.events, s.names, s.clients, s.client(client_id), s.lease(client_id), keys.leases],
            [
                s.live,
                session_id,
                client_id,
                name,
                dumps(lifetime),
                0 if ttl_s is None else ttl_s * 1000,
                tools_json,
                tool_names,
                MAX_ACTIVE_CLIENTS,
                MAX_NAME_LENGTH,
            ],
            _refusals(session_id, client_id),
        )
        return Registered(client_id, assigned, None if int(expires) < 0 else int(expires))

    async def ping(self, session_id: str, client_id: str) -> PingOutcome:
        """Extend the lease. A client found lapsed is ended here: `alive` is False, and the work that ending
        owes comes back for the caller to perform before it answers 404."""
        reply = await self._core.scripts.raw(
            "ping_client",
            client_keys(self._core.keys, session_id, client_id),
            client_args(self._core.keys, session_id, client_id),
        )
        if int(reply[0]) == 404:
            if reply[1] == "session":
                raise NotFound(_refusals(session_id, client_id)["session"])
            return PingOutcome(None, alive=False, owed=reply[2])
        expires = int(reply[1])
        return PingOutcome(None if expires < 0 else expires, alive=True, owed=reply[2])

    async def leave(self, session_id: str, client_id: str) -> list[str]:
        """Leave; the work owed (the next step, when this failed the last owed call)."""
        (owed,) = await self._core.scripts.run(
            "leave_client",
            client_keys(self._core.keys, session_id, client_id),
            client_args(self._core.keys, session_id, client_id),
            _refusals(session_id, client_id),
        )
        return list(owed)

    async def update_tools(self, session_id: str, client_id: str, tools: list[dict[str, Any]]) -> str:
        s = self._core.keys.session(session_id)
        tools_json, tool_names = _tools(tools)
        (event,) = await self._core.scripts.run(
            "update_tools",
            [s.meta, s.events, s.client(client_id)],
            [s.live, client_id, tools_json, tool_names],
            _refusals(session_id, client_id),
        )
        return str(event)

    async def ack(self, session_id: str, client_id: str, call_id: str) -> str:
        """The `client_tool_acked` event (the same one again for a repeated ack)."""
        keys = self._core.keys
        (event,) = await self._core.scripts.run(
            "ack_call",
            call_keys(keys, session_id, call_id),
            [*call_args(keys, session_id, call_id, client_id), self._core.settings.result_timeout_ms],
            _refusals(session_id, client_id, call_id),
        )
        return str(event)

    async def answer(
        self, session_id: str, client_id: str, call_id: str, text: str, *, is_error: bool, tag: str
    ) -> list[str]:
        """Record the result; returns the work owed (the next step, when this was the step's last call)."""
        keys = self._core.keys
        (owed,) = await self._core.scripts.run(
            "answer_call",
            call_keys(keys, session_id, call_id),
            [
                *call_args(keys, session_id, call_id, client_id),
                events.tool_result(call_id, text, is_error=is_error),
                tag,
                self._core.settings.result_timeout_ms,
            ],
            _refusals(session_id, client_id, call_id),
        )
        return list(owed)

"""Approvals: the first decision on a call that waits for one wins; a second answers 409."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from broker.codec import loads
from broker.core import Core
from broker.errors import BrokerUnavailable, NotFound, translate_redis_errors
from broker.layouts import call_args, call_keys

_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Resolved:
    event: str


class Approvals:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def resolve(
        self, session_id: str, call_id: str, decision: Literal["allow", "deny"], message: str, resolved_by: str
    ) -> Resolved:
        keys = self._core.keys
        s = keys.session(session_id)
        settings = self._core.settings
        refusals = {"session": f"no session {session_id}", "call": f"no call {call_id} in this session"}
        for _ in range(_ATTEMPTS):
            with translate_redis_errors():
                raw = await self._core.redis.hget(s.calls, call_id)
            if raw is None:
                raise NotFound(refusals["call"])
            # An allowed client call goes to the registration it was bound to at commit; the script
            # checks the binding read here is still the record's.
            client_id = str(loads(raw).get("client", ""))
            reply = await self._core.scripts.run(
                "resolve_approval",
                [*call_keys(keys, session_id), s.client(client_id), s.client_calls(client_id)],
                [
                    *call_args(keys, session_id, call_id, ""),
                    decision,
                    message,
                    resolved_by,
                    settings.ack_timeout_ms,
                    settings.ack_timeout_ms * 2,
                    client_id,
                ],
                refusals,
                partition=s.partition,
            )
            if reply[0] != "retry":
                return Resolved(reply[0])
        raise BrokerUnavailable(f"call {call_id} kept changing while it was decided")

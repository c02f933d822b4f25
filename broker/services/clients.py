"""Client registrations and their calls: register, ping, replace tools, leave; ack and answer a call."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from broker.core import Core
from broker.errors import NotFound, SessionFull, Unauthorized, translate_redis_errors
from broker.keys import POOL_GROUP
from broker.refusals import Outcome
from broker.scripts.layouts import Named, call_names, client_names
from broker.scripts.runner import answered
from broker.transport import aio
from common.codec import dumps, loads
from common.events import build as events

MAX_ACTIVE_CLIENTS = 32
MAX_NAME_LENGTH = 32
# A write to a session route declaring more than this is held against its session's room before it is
# read (api/room.py, check_room.lua).
LARGE_WRITE_BYTES = 256 * 1024
# Entries of a registration's call stream older than this many ack deadlines are trimmed: long past.
CALL_STREAM_RETENTION_FACTOR = 2


def receipt_names(core: Core, session_id: str, caller: Caller, receipt: Receipt | None) -> Named:
    """The keys and arguments lib/hot.lua declares: tokens and receipt keys, token, fingerprint, ttl."""
    s = core.keys.session(session_id)
    return (
        {"tokens": s.tokens, "receipt": receipt.key if receipt else s.idempotency("none")},
        {
            "token": caller.token_sha,
            "fp": receipt.fingerprint if receipt else "",
            "ttl": receipt.ttl_ms if receipt else 0,
        },
    )


async def lapse_client(core: Core, session_id: str, client_id: str) -> str:
    """Lapse the registration if its lease ran out ('lapsed'); 'alive' moves its timer on; 'gone'."""
    keys = core.keys
    names, args = client_names(keys, session_id, client_id, core.settings.idempotency_ttl_ms)
    (outcome,) = await core.scripts.run(
        "lapse_client",
        names,
        {**args, "result_ms": core.settings.result_timeout_ms},
        partition=keys.session(session_id).partition,
    )
    return str(outcome)


@dataclass(frozen=True, slots=True)
class Registered:
    """A registration as its request is answered: `body` is the answer's JSON as the first request with
    its Idempotency-Key was given it; the fields are read from it."""

    id: str
    name: str
    expires_at: int | None
    body: str

    @classmethod
    def of(cls, body: str) -> Registered:
        answer = loads(body)
        expires = answer["expires_at"]
        at = None if expires is None else round(datetime.fromisoformat(expires).timestamp() * 1000)
        return cls(answer["id"], answer["name"], at, body)


@dataclass(frozen=True, slots=True)
class ActiveClient:
    """A registration as it stands: what `GET .../clients` lists."""

    id: str
    name: str
    lifetime: dict[str, Any]
    expires_at: int | None
    created_at: int
    tools: list[dict[str, Any]]
    # A run-scoped registration (a turn's own tools, which a model calls by their own names).
    scoped: bool = False


@dataclass(frozen=True, slots=True)
class Receipt:
    """Where an Idempotency-Key's receipt lives, the request's fingerprint, and how long it is kept."""

    key: str
    fingerprint: str
    ttl_ms: int


@dataclass(frozen=True, slots=True)
class Caller:
    """Who acts on a hot route: a session token (its SHA-256, checked by the script), or an API key the
    caller already checked (`token_sha` empty)."""

    token_sha: str = ""


def _tools(tools: list[dict[str, Any]]) -> tuple[str, str]:
    return dumps(tools), "\n".join(tool["name"] for tool in tools)


class Clients:
    def __init__(self, core: Core) -> None:
        self._core = core

    def receipt(self, session_id: str, digest: str, fingerprint: str, ttl_ms: int) -> Receipt:
        """The receipt of a hot route's Idempotency-Key (scoped by `digest`) in its session's slot, which
        the route's script reads and writes in the same step as the operation."""
        return Receipt(self._core.keys.session(session_id).idempotency(digest), fingerprint, ttl_ms)

    async def register(
        self,
        session_id: str,
        client_id: str,
        name: str,
        ttl_s: int | None,
        tools: list[dict[str, Any]],
        receipt: Receipt | None = None,
    ) -> Registered:
        """Register `client_id`; with `receipt`, a request whose Idempotency-Key was answered already gets
        that answer (another client id's) and registers nothing. Given the `name` it asked for, it is
        dispatched the calls waiting for that name whose tools it offers (on_leave: wait)."""
        keys = self._core.keys
        s = keys.session(session_id)
        lifetime = {"type": "never"} if ttl_s is None else {"type": "ttl", "data": {"seconds": ttl_s}}
        tools_json, tool_names = _tools(tools)
        # The caller was checked before (the route's dependency): the script checks no token.
        receipt_keys, receipt_args = receipt_names(self._core, session_id, Caller(), receipt)
        (body,) = await self._core.scripts.run(
            "register_client",
            {
                **receipt_keys,
                "meta": s.meta,
                "events": s.events,
                "names": s.names,
                "clients": s.clients,
                "client": s.client(client_id),
                "calls": s.calls,
                "owed": s.owed,
                "stream": s.client_calls(client_id),
            },
            {
                **receipt_args,
                "channel": s.live,
                "sid": session_id,
                "cid": client_id,
                "name": name,
                "lifetime": dumps(lifetime),
                "ttl_ms": 0 if ttl_s is None else ttl_s * 1000,
                "tools": tools_json,
                "tool_names": tool_names,
                "max_clients": MAX_ACTIVE_CLIENTS,
                "max_len": MAX_NAME_LENGTH,
                "ack_ms": self._core.settings.ack_timeout_ms,
                "retention_ms": self._core.settings.ack_timeout_ms * CALL_STREAM_RETENTION_FACTOR,
            },
            partition=s.partition,
        )
        return Registered.of(str(body))

    async def active(self, session_id: str) -> list[ActiveClient]:
        """The session's active registrations, oldest first (at most MAX_ACTIVE_CLIENTS)."""
        s = self._core.keys.session(session_id)
        redis = self._core.redis
        with translate_redis_errors():
            names = aio.record(await redis.hgetall(s.names))
            async with redis.pipeline() as pipe:
                for client_id in names.values():
                    pipe.hgetall(s.client(client_id.decode()))
                records = await pipe.execute()
        found = []
        for client_id, record in zip(names.values(), records, strict=True):
            if record.get(b"state") != b"active":
                continue
            expires = record.get(b"expires_at")
            found.append(
                ActiveClient(
                    id=client_id.decode(),
                    name=record[b"name"].decode(),
                    lifetime=loads(record[b"lifetime"]),
                    expires_at=int(expires) if expires else None,
                    created_at=int(record[b"created_at"]),
                    tools=loads(record[b"tools"]),
                    scoped=bool(record.get(b"run")),
                )
            )
        return sorted(found, key=lambda client: client.created_at)

    async def ping(
        self, session_id: str, client_id: str, caller: Caller = Caller(), receipt: Receipt | None = None
    ) -> str:
        """Extend the lease: the body naming the new expiry. A client found lapsed is ended here, and is
        NotFound as one that is gone."""
        s = self._core.keys.session(session_id)
        receipt_keys, receipt_args = receipt_names(self._core, session_id, caller, receipt)
        reply = await self._core.scripts.raw(
            "ping_client",
            {**receipt_keys, "meta": s.meta, "client": s.client(client_id)},
            {**receipt_args, "sid": session_id, "cid": client_id},
        )
        if reply[0] != Outcome.OK and reply[1] == "ping_lapsed":
            await lapse_client(self._core, session_id, client_id)
        (body,) = answered("ping_client", reply)
        return str(body)

    async def leave(self, session_id: str, client_id: str) -> None:
        """Leave: the name is released and the calls it still owes fail with client_gone (those of a tool
        declared on_leave: wait wait for the next registration of the name)."""
        keys, settings = self._core.keys, self._core.settings
        names, args = client_names(keys, session_id, client_id, settings.idempotency_ttl_ms)
        await self._core.scripts.run(
            "leave_client",
            names,
            {**args, "result_ms": settings.result_timeout_ms},
            partition=keys.session(session_id).partition,
        )

    async def update_tools(self, session_id: str, client_id: str, tools: list[dict[str, Any]]) -> str:
        """Replace the tool set: the `client_tools_updated` event. Owed calls of a dropped tool declared
        on_leave: wait wait for their client; waiting calls of its name whose tools it now offers are
        dispatched to it."""
        keys, settings = self._core.keys, self._core.settings
        tools_json, tool_names = _tools(tools)
        names, args = client_names(keys, session_id, client_id, settings.idempotency_ttl_ms)
        (event,) = await self._core.scripts.run(
            "update_tools",
            names,
            {
                **args,
                "tools": tools_json,
                "tool_names": tool_names,
                "ack_ms": settings.ack_timeout_ms,
                "retention_ms": settings.ack_timeout_ms * CALL_STREAM_RETENTION_FACTOR,
                "result_ms": settings.result_timeout_ms,
                "group": POOL_GROUP,
            },
            partition=keys.session(session_id).partition,
        )
        return str(event)

    async def ack(
        self,
        session_id: str,
        client_id: str,
        call_id: str,
        caller: Caller = Caller(),
        receipt: Receipt | None = None,
        member: str = "",
    ) -> str:
        """The `client_tool_acked` event (the same one again for a repeated ack). `member` is the pool
        member acking (`Pools`); another member's ack of the call is a Conflict."""
        keys = self._core.keys
        call, args = call_names(keys, session_id, call_id, client_id)
        receipt_keys, receipt_args = receipt_names(self._core, session_id, caller, receipt)
        (body,) = await self._core.scripts.run(
            "ack_call",
            {**call, **receipt_keys, "stream": keys.session(session_id).client_calls(client_id)},
            {
                **args,
                **receipt_args,
                "result_ms": self._core.settings.result_timeout_ms,
                "member": member,
                "group": POOL_GROUP,
            },
            partition=keys.session(session_id).partition,
        )
        return str(body)

    async def progress(
        self,
        session_id: str,
        client_id: str,
        call_id: str,
        message: str | None,
        fraction: float | None,
        caller: Caller = Caller(),
        receipt: Receipt | None = None,
    ) -> str:
        """The `client_tool_progress` event, for a call this client acked (a Conflict before the ack or
        once settled); a tool with a heartbeat gets its result deadline moved on."""
        keys = self._core.keys
        call, args = call_names(keys, session_id, call_id, client_id)
        receipt_keys, receipt_args = receipt_names(self._core, session_id, caller, receipt)
        (body,) = await self._core.scripts.run(
            "progress_call",
            {**call, **receipt_keys},
            {
                **args,
                **receipt_args,
                "event": events.client_tool_progress(client_id, call_id, message, fraction),
                "result_ms": self._core.settings.result_timeout_ms,
            },
            partition=keys.session(session_id).partition,
        )
        return str(body)

    async def room(self, session_id: str, need: int, caller: Caller = Caller()) -> SessionFull | None:
        """The SessionFull naming SWITCHBOARD_MAX_SESSION_BYTES that a write of `need` more bytes would
        get, else None (room, storage not bounded, or a token or session that is not good, which the
        write itself is refused for). For a large write, before it is sent: its own script checks again,
        exactly (this reserves nothing)."""
        cap = self._core.settings.max_session_bytes
        if not cap:
            return None
        s = self._core.keys.session(session_id)
        try:
            await self._core.scripts.run(
                "check_room",
                {"meta": s.meta, "tokens": s.tokens},
                {"sid": session_id, "token": caller.token_sha, "need": need, "cap": cap},
            )
        except SessionFull as full:
            return full
        except (NotFound, Unauthorized):
            return None
        return None

    async def answer(
        self,
        session_id: str,
        client_id: str,
        call_id: str,
        text: str | list[events.Block],
        *,
        is_error: bool,
        caller: Caller = Caller(),
        receipt: Receipt | None = None,
        structured: dict[str, Any] | None = None,
    ) -> None:
        """Record the result (a text, or the blocks of a result with images and other content; `structured`
        its JSON object too), and owe the next step when this was the step's last call."""
        keys = self._core.keys
        call, args = call_names(keys, session_id, call_id, client_id)
        receipt_keys, receipt_args = receipt_names(self._core, session_id, caller, receipt)
        blocks = [events.text_block(text)] if isinstance(text, str) else text
        event = events.tool_result_blocks(call_id, blocks, is_error=is_error, structured=structured)
        await self._core.scripts.run(
            "answer_call",
            {**call, **receipt_keys, "stream": keys.session(session_id).client_calls(client_id)},
            {
                **args,
                **receipt_args,
                "event": event,
                "result_ms": self._core.settings.result_timeout_ms,
                "group": POOL_GROUP,
            },
            partition=keys.session(session_id).partition,
        )

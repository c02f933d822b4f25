"""The inbox: what waits on a person or a client across the workspace (open approvals, calls waiting for
their client, input requests, sign-ins to MCP servers), kept in the workspace slot so a page of it costs
O(page) on a Cluster.

A session's scripts run in its partition's slot and cannot write here, so the inbox is written after the
fact from the session's notices (workers/inbox_notices.py): `open` and `close` are idempotent and apply a
notice only when it is newer than the last one applied to the same call. Each open item is in one lex
index per combination of the filters (`KeySpace.inbox_index`), so any filtered listing is one ZRANGE."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import asdict, dataclass
from itertools import product
from typing import Any, Literal, get_args

from broker.core import Core
from broker.errors import BrokerUnavailable, InvalidRequest, translate_redis_errors
from common.codec import dumps, loads

InboxKind = Literal["approval", "call", "input", "authorization"]
KINDS: tuple[InboxKind, ...] = get_args(InboxKind)

_ATTEMPTS = 5
# `since` is written with a fixed width in the index members, so their lex order is `since` order.
_SINCE_DIGITS = 15
_MAX_SINCE = 10**_SINCE_DIGITS - 1
# A cursor is an index member in base64url (a call id may hold any character). Any such text is a place
# in the lex order, so any cursor that decodes is a valid one: the page starts after that place.
MAX_CURSOR_CHARS = 1024
CURSOR_PATTERN = "^([A-Za-z0-9_-]{4})*([A-Za-z0-9_-]{2,3})?$"
_CURSOR = re.compile(CURSOR_PATTERN)


@dataclass(frozen=True, slots=True)
class Item:
    """One thing that waits. `since` and `deadline` are ms since the epoch; `client_name` is a call's."""

    kind: InboxKind
    session_id: str
    run_id: str | None
    call_id: str
    tool: str
    client_name: str | None
    since: int
    deadline: int | None
    subject: str | None
    agent_id: str
    # An input request's id: its item is its own, as a call may hold several open at once.
    request_id: str | None = None
    # A sign-in's id (kind `authorization`, whose `call_id` is empty and `tool` the grant's name), and the
    # link the person opens to sign in.
    authorization_id: str | None = None
    authorization_url: str | None = None

    @property
    def key(self) -> str:
        """What the item is of within its session: the input request or the sign-in, else the call."""
        return self.request_id or self.authorization_id or self.call_id

    @property
    def field(self) -> str:
        return item_field(self.session_id, self.key)

    @property
    def member(self) -> str:
        return f"{min(max(self.since, 0), _MAX_SINCE):0{_SINCE_DIGITS}d}|{self.field}"


@dataclass(frozen=True, slots=True)
class InboxPage:
    items: list[Item]
    next_cursor: str | None


def item_field(session_id: str, call_id: str) -> str:
    return f"{session_id}|{call_id}"


def _item(raw: bytes | str) -> Item:
    record: dict[str, Any] = loads(raw)
    return Item(**record)


def encode_cursor(member: str) -> str:
    return base64.urlsafe_b64encode(member.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> bytes:
    """The place in the lex order a cursor names; InvalidRequest naming `after` for text that is not one."""
    if len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidRequest(f"after: at most {MAX_CURSOR_CHARS} characters")
    if _CURSOR.fullmatch(cursor) is None:
        raise InvalidRequest("after: not a cursor this listing gives (pass its next_cursor as it came)")
    try:
        return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        raise InvalidRequest("after: not a cursor this listing gives (pass its next_cursor as it came)") from None


class Inbox:
    def __init__(self, core: Core) -> None:
        self._core = core

    def _indexes(self, item: Item) -> list[str]:
        """The 4 (no subject) or 8 indexes an item is in: every combination of its filter values."""
        subjects = (None,) if item.subject is None else (None, item.subject)
        return [
            self._core.keys.inbox_index(kind, agent, subject)
            for kind, agent, subject in product((None, item.kind), (None, item.agent_id), subjects)
        ]

    async def open(self, item: Item, *, seq: int) -> str:
        """Open (or replace) the item for its call (or input request), unless a notice of it at or after
        `seq` was applied already, or its session is deleted: 'applied', 'stale' or 'gone'."""
        return await self._change(item.session_id, item.key, seq, item)

    async def close(self, session_id: str, call_id: str, *, seq: int) -> str:
        """Close the call's item, or the input request's when `call_id` is a request id (none open: a close
        is still recorded, so a late open of an older notice opens nothing): 'applied', 'stale' or 'gone'."""
        return await self._change(session_id, call_id, seq, None)

    async def _change(self, session_id: str, call_id: str, seq: int, new: Item | None) -> str:
        keys = self._core.keys
        field = item_field(session_id, call_id)
        for _ in range(_ATTEMPTS):
            with translate_redis_errors():
                raw = await self._core.redis.hget(keys.inbox_items, field)
            current = _item(raw) if raw is not None else None
            old_indexes = self._indexes(current) if current else []
            new_indexes = self._indexes(new) if new else []
            (outcome,) = await self._core.scripts.run(
                "inbox_change",
                {
                    "items": keys.inbox_items,
                    "seqs": keys.inbox_session(session_id),
                    "indexes": old_indexes + new_indexes,
                },
                {
                    "field": field,
                    "call_id": call_id,
                    "seq": seq,
                    "expect": bytes(raw).decode() if raw is not None else "",
                    "old": current.member if current else "",
                    "drop": len(old_indexes),
                    "member": new.member if new else "",
                    "item": dumps(asdict(new)) if new else "",
                },
            )
            if outcome != "retry":
                return str(outcome)
        raise BrokerUnavailable(f"the inbox item of call {call_id} kept changing while it was written")

    async def forget(self, session_id: str) -> None:
        """Take a deleted session's items out of every index; notices of it that come later open nothing
        for as long as a deleted session's tokens are remembered. Safe to run again."""
        keys = self._core.keys
        call_ids = await self._core.scripts.run(
            "inbox_forget",
            {"seqs": keys.inbox_session(session_id)},
            {"tombstone_ms": self._core.settings.session_token_ttl_ms},
        )
        if not call_ids:
            return
        fields = [item_field(session_id, str(call_id)) for call_id in call_ids]
        with translate_redis_errors():
            found = await self._core.redis.hmget(keys.inbox_items, fields)
        for call_id, raw in zip(call_ids, found, strict=True):
            if raw is not None:
                await self.close(session_id, str(call_id), seq=0)

    async def page(
        self,
        *,
        kind: InboxKind | None = None,
        agent_id: str | None = None,
        subject: str | None = None,
        limit: int,
        after: str | None = None,
    ) -> InboxPage:
        """The open items matching every filter given, oldest `since` first (ties by session, then call);
        `after` is a `next_cursor` this gave."""
        keys = self._core.keys
        reply = await self._core.scripts.run(
            "inbox_page",
            {"items": keys.inbox_items, "index": keys.inbox_index(kind, agent_id, subject)},
            {"after": decode_cursor(after) if after else b"", "count": limit + 1},
        )
        members = [str(m) for m in reply[0::2]]
        items = [_item(raw) for raw in reply[1::2]]
        more = len(members) > limit
        return InboxPage(items[:limit], encode_cursor(members[limit - 1]) if more else None)

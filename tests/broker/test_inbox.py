"""The inbox's index: open and close idempotent under replays and reordering, every filter combination, cursor
pages over ties in `since`, and a deleted session's items gone for good."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from broker import Broker
from broker.errors import InvalidRequest
from broker.services.inbox import KINDS, InboxKind, Item, encode_cursor
from common.codec import uuid7
from tests.helpers import make_session

pytestmark = pytest.mark.both_redis

AGENT_A = "0190f2a0-0000-7000-8000-0000000000a1"
AGENT_B = "0190f2a0-0000-7000-8000-0000000000b2"
SINCE = 1_765_000_000_000


def item(
    call_id: str,
    *,
    kind: InboxKind = "approval",
    session_id: str | None = None,
    agent_id: str = AGENT_A,
    subject: str | None = None,
    since: int = SINCE,
) -> Item:
    return Item(
        kind=kind,
        session_id=session_id or uuid7(),
        run_id=uuid7(),
        call_id=call_id,
        tool="highlight_row",
        client_name="web" if kind == "call" else None,
        since=since,
        deadline=None,
        subject=subject,
        agent_id=agent_id,
    )


async def everything(
    broker: Broker,
    *,
    kind: InboxKind | None = None,
    agent_id: str | None = None,
    subject: str | None = None,
    limit: int = 200,
) -> list[Item]:
    found: list[Item] = []
    after: str | None = None
    while True:
        page = await broker.inbox.page(kind=kind, agent_id=agent_id, subject=subject, limit=limit, after=after)
        assert len(page.items) <= limit
        found += page.items
        if page.next_cursor is None:
            return found
        after = page.next_cursor


async def test_open_and_close_are_idempotent_and_a_replayed_notice_changes_nothing(broker: Broker) -> None:
    waiting = item("call-1")
    assert await broker.inbox.open(waiting, seq=5) == "applied"
    assert await broker.inbox.open(waiting, seq=5) == "stale"
    assert await everything(broker) == [waiting]
    assert await broker.inbox.close(waiting.session_id, "call-1", seq=7) == "applied"
    assert await everything(broker) == []
    # The open handed again after its close, and the close again: nothing comes back.
    assert await broker.inbox.open(waiting, seq=5) == "stale"
    assert await broker.inbox.close(waiting.session_id, "call-1", seq=7) == "stale"
    assert await everything(broker) == []
    # The same call waits again later (its client left a second time): a newer notice opens it.
    again = replace(waiting, kind="call", client_name="web", since=SINCE + 9)
    assert await broker.inbox.open(again, seq=9) == "applied"
    assert await everything(broker) == [again]
    assert await everything(broker, kind="approval") == []
    assert await everything(broker, kind="call") == [again]


async def test_a_close_before_its_open_leaves_no_ghost(broker: Broker) -> None:
    late = item("call-2")
    assert await broker.inbox.close(late.session_id, "call-2", seq=12) == "applied"
    assert await broker.inbox.open(late, seq=10) == "stale"
    assert await everything(broker) == []
    assert await everything(broker, agent_id=AGENT_A, kind="approval") == []


async def test_an_item_replaced_by_a_newer_one_leaves_none_of_its_indexes(broker: Broker) -> None:
    first = item("call-3", subject="alice")
    await broker.inbox.open(first, seq=3)
    second = replace(first, kind="call", client_name="web", subject=None, since=SINCE + 1)
    await broker.inbox.open(second, seq=4)
    assert await everything(broker, subject="alice") == []
    assert await everything(broker, kind="approval") == []
    assert await everything(broker, kind="call") == [second]
    await broker.inbox.close(first.session_id, "call-3", seq=5)
    for kind, agent, subject in itertools.product((None, *KINDS), (None, AGENT_A), (None, "alice")):
        assert await broker.core.redis.zcard(broker.core.keys.inbox_index(kind, agent, subject)) == 0
    assert await broker.core.redis.hget(broker.core.keys.inbox_items, first.field) is None


async def test_every_filter_and_combination_lists_what_matches_it(broker: Broker) -> None:
    opened: list[Item] = []
    for n, (kind, agent, subject) in enumerate(
        itertools.product(KINDS, (AGENT_A, AGENT_B), (None, "alice", "bob:{x} é"))
    ):
        for copy in range(2):
            one = item(f"c{n}-{copy}", kind=kind, agent_id=agent, subject=subject, since=SINCE + (n * 7) % 5)
            assert await broker.inbox.open(one, seq=1) == "applied"
            opened.append(one)
    ordered = sorted(opened, key=lambda i: (i.since, i.session_id, i.call_id))
    filters = itertools.product((None, *KINDS), (None, AGENT_A, AGENT_B), (None, "alice", "bob:{x} é"))
    for want_kind, want_agent, want_subject in filters:
        expected = [
            i
            for i in ordered
            if want_kind in (None, i.kind)
            and want_agent in (None, i.agent_id)
            and (want_subject is None or i.subject == want_subject)
        ]
        listed = await everything(broker, kind=want_kind, agent_id=want_agent, subject=want_subject, limit=4)
        assert listed == expected
    assert await everything(broker, subject="carol") == []
    assert await everything(broker, agent_id=uuid7()) == []


async def test_cursor_pages_cover_ties_in_since_once_each(broker: Broker) -> None:
    session_id = uuid7()
    tied = [item(f"tie-{n:02d}", session_id=session_id) for n in range(25)]
    others = [item(f"o-{n}", since=SINCE - 10 + n * 3) for n in range(8)]
    for one in [*tied, *others]:
        await broker.inbox.open(one, seq=1)
    pages: list[list[Item]] = []
    after: str | None = None
    while True:
        page = await broker.inbox.page(limit=7, after=after)
        pages.append(page.items)
        if page.next_cursor is None:
            break
        after = page.next_cursor
    listed = [i for page in pages for i in page]
    assert [len(p) for p in pages] == [7, 7, 7, 7, 5]
    assert listed == sorted([*tied, *others], key=lambda i: (i.since, i.session_id, i.call_id))
    # An item closed between two pages is not listed, and the next page still starts after the cursor.
    first = await broker.inbox.page(limit=3)
    assert first.next_cursor is not None
    await broker.inbox.close(first.items[-1].session_id, first.items[-1].call_id, seq=2)
    rest = await everything(broker, limit=3)
    following = await broker.inbox.page(limit=100, after=first.next_cursor)
    assert following.items == rest[2:]


async def test_a_cursor_is_a_place_in_the_order_and_text_that_is_none_is_refused(broker: Broker) -> None:
    early, late = item("early", since=SINCE), item("late", since=SINCE + 5)
    for one in (early, late):
        await broker.inbox.open(one, seq=1)
    # Any text that decodes is a place: the page starts after it, as after a member.
    between = await broker.inbox.page(limit=5, after=encode_cursor(f"{SINCE + 1:015d}"))
    assert between.items == [late]
    assert (await broker.inbox.page(limit=5, after=encode_cursor("~"))).items == []
    for bad in ("%%%", "A", "ab=", "A" * 2000):
        with pytest.raises(InvalidRequest, match=r"^after"):
            await broker.inbox.page(limit=5, after=bad)


async def test_a_deleted_sessions_items_go_and_stay_gone(broker: Broker) -> None:
    session_id = await make_session(broker)
    other = item("kept")
    mine = [item(f"m{n}", session_id=session_id, subject="alice", kind=KINDS[n % 3]) for n in range(3)]
    for one in [other, *mine]:
        await broker.inbox.open(one, seq=2)
    await broker.inbox.close(session_id, "m0", seq=3)
    await broker.sessions.delete(session_id)
    assert await everything(broker) == [other]
    assert await everything(broker, subject="alice") == []
    # A notice of the deleted session handed late opens nothing; the purge forgets it again, harmlessly.
    assert await broker.inbox.open(replace(mine[1], since=SINCE + 50), seq=99) == "gone"
    await broker.sessions.purge(session_id)
    assert await everything(broker) == [other]
    remembered = broker.core.keys.inbox_session(session_id)
    assert await broker.core.redis.hget(remembered, "~gone") == b"1"

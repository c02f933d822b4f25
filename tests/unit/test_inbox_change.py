"""What each notice does to the inbox (workers/inbox_notices.py `change`): a pure mapping of typed events."""

from __future__ import annotations

from broker.services.inbox import Item
from common.events.catalogue import (
    BY_TYPE,
    AnyEvent,
    ApprovalRequested,
    ApprovalResolved,
    ClientToolAcked,
    ClientToolDispatched,
    ClientToolFailed,
    ClientToolWaiting,
    RunCompleted,
    ToolResult,
)
from workers.inbox_notices import INBOX_EVENT_TYPES, Close, Open, change, waiting_call
from workers.notices import Notice

SID = "0190f2a0-0000-7000-8000-0000000000aa"
AGENT = "0190f2a0-0000-7000-8000-0000000000bb"
RUN = "0190f2a0-0000-7000-8000-0000000000cc"
AT = "2026-12-06T05:47:27.592123Z"
AT_MS = 1_796_536_047_592


def notice(event: AnyEvent, subject: str | None = "user-42", approval_deadline: int | None = None) -> Notice:
    return Notice(SID, RUN, AGENT, subject, 7, event, b"", approval_deadline)


def test_an_approval_requested_opens_an_approval_from_when_it_was_logged() -> None:
    requested = ApprovalRequested(
        call_id="c1", server="client:web", tool="sign", arguments={}, args_hash="h", seq=7, created_at=AT
    )
    assert change(notice(requested)) == Open(
        Item(
            kind="approval",
            session_id=SID,
            run_id=RUN,
            call_id="c1",
            tool="sign",
            client_name=None,
            since=AT_MS,
            deadline=None,
            subject="user-42",
            agent_id=AGENT,
        )
    )


def test_an_approvals_deadline_is_the_one_its_call_record_gave_the_notice() -> None:
    requested = ApprovalRequested(
        call_id="c1", server="client:web", tool="sign", arguments={}, args_hash="h", seq=7, created_at=AT
    )
    opened = change(notice(requested, approval_deadline=AT_MS + 86_400_000))
    assert isinstance(opened, Open)
    assert opened.item.deadline == AT_MS + 86_400_000


def test_what_ends_a_wait_closes_it_and_the_rest_changes_nothing() -> None:
    ending: list[AnyEvent] = [
        ApprovalResolved(call_id="c1", decision="deny", deny_message=None, resolved_by=None),
        ClientToolDispatched(client_id="k", call_id="c1", tool="sign", arguments={}),
        ClientToolFailed(client_id="k", call_id="c1", reason="client_gone"),
        ToolResult(call_id="c1", content=[], is_error=True),
    ]
    for event in ending:
        assert change(notice(event)) == Close(SID, "c1")
    unchanged: list[AnyEvent] = [ClientToolAcked(client_id="k", call_id="c1"), RunCompleted(run_id=RUN)]
    for other in unchanged:
        assert change(notice(other)) is None


def test_the_types_the_inbox_reads_are_catalogued_and_a_waiting_call_is_one_call_away() -> None:
    assert set(BY_TYPE) >= INBOX_EVENT_TYPES
    opened = waiting_call(
        notice(ToolResult(call_id="c2", content=[], is_error=False), None), "c2", "scan", "phone", 5, 9
    )
    assert opened.item.kind == "call"
    assert (opened.item.client_name, opened.item.since, opened.item.deadline, opened.item.subject) == (
        "phone",
        5,
        9,
        None,
    )


def test_a_call_waiting_for_its_client_opens_a_call_from_when_the_wait_began() -> None:
    waiting = ClientToolWaiting(
        call_id="c3",
        tool="sign",
        client_name="web",
        since=AT,
        deadline="2026-12-07T05:47:27.592123Z",
        run_id=RUN,
        seq=7,
        created_at=AT,
    )
    assert change(notice(waiting)) == Open(
        Item(
            kind="call",
            session_id=SID,
            run_id=RUN,
            call_id="c3",
            tool="sign",
            client_name="web",
            since=AT_MS,
            deadline=AT_MS + 86_400_000,
            subject="user-42",
            agent_id=AGENT,
        )
    )
    assert "client_tool_waiting" in INBOX_EVENT_TYPES

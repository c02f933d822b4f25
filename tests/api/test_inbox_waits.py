"""The inbox through the real notice workers: an approval's item carries its approval_timeout_s as its
deadline, and every way a wait ends takes its item out (an approval decided, timed out, its call or run
cancelled, its session deleted; a call waiting for its client cancelled the same ways, or failed with
client_gone when nobody came)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import pytest

from common.codec import rfc3339_ms
from tests.api.test_input_requests import ASK, acked_call, ask, tool
from tests.api.test_waiting_calls import CALL, WAITING, first_call, leave, wait_for
from tests.api_client import Api, Event, Session, of_type, run_over
from workers.notices import Notices

pytestmark = pytest.mark.both_redis

TOOL = "client__web__highlight_row"
Kind = Literal["approval", "call"]
End = Literal["cancel_run", "cancel_call", "delete_session"]


def floor_ms(created_at: str) -> int:
    """The ms of an event's `created_at`, cut as the scripts' clock cuts it (not rounded)."""
    return (datetime.fromisoformat(created_at) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


async def items_of(api: Api, session: Session) -> list[dict[str, Any]]:
    answer = await api.key.get("/v1/inbox", params={"limit": 200})
    assert answer.status_code == 200, answer.text
    return [item for item in answer.json()["items"] if item["session_id"] == session.id]


async def inbox_until(api: Api, session: Session, count: int, timeout: float = 10) -> list[dict[str, Any]]:
    """The session's items once there are `count` of them (the workers apply notices after the fact)."""
    until = time.monotonic() + timeout
    while True:
        found = await items_of(api, session)
        if len(found) == count:
            return found
        assert time.monotonic() < until, found
        await asyncio.sleep(0.05)


async def approval_open(api: Api, approval_timeout_s: int | None = None) -> tuple[Session, Event]:
    policy: Any = "require_approval"
    if approval_timeout_s is not None:
        policy = {"policy": "require_approval", "approval_timeout_s": approval_timeout_s}
    session = await api.session(client_tool_policies={TOOL: policy})
    await api.register(session)
    await api.send(session, CALL)
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")))
    return session, of_type(events, "approval_requested")[0]


async def call_waiting(api: Api, tool: dict[str, Any] = WAITING) -> tuple[Session, Event]:
    session = await api.session()
    web = await api.register(session, tools=[tool])
    await api.send(session, CALL)
    await first_call(api, session)
    await leave(api, session, web["id"])
    events = await wait_for(api, session, lambda es: bool(of_type(es, "client_tool_waiting")))
    return session, of_type(events, "client_tool_waiting")[0]


async def opened(api: Api, kind: Kind) -> tuple[Session, str]:
    """A session with one item of `kind` in the inbox, and its call id."""
    session, event = await (approval_open(api) if kind == "approval" else call_waiting(api))
    (item,) = await inbox_until(api, session, 1)
    assert (item["kind"], item["call_id"]) == (kind, event["call_id"])
    return session, str(event["call_id"])


async def test_an_approvals_item_carries_its_deadline(api: Api) -> None:
    session, requested = await approval_open(api, approval_timeout_s=3600)
    (item,) = await inbox_until(api, session, 1)
    # When its timer resolves it as a deny: the request's time (the scripts' ms) and the policy's hour.
    assert rfc3339_ms(item["deadline"]) == floor_ms(requested["created_at"]) + 3_600_000
    assert rfc3339_ms(item["since"]) == rfc3339_ms(requested["created_at"])
    # Without approval_timeout_s it waits for ever.
    forever, _ = await approval_open(api)
    (item,) = await inbox_until(api, forever, 1)
    assert item["deadline"] is None


async def test_an_input_requests_item_carries_its_calls_timeout_and_none_without_one(api: Api) -> None:
    for timeout_s in (3600, None):
        session = await api.session()
        web = await api.register(session, tools=[tool(timeout_s=timeout_s)] if timeout_s else None)
        call_id = await acked_call(api, session, web["id"])
        assert (await ask(api, session, web["id"], call_id, ASK)).status_code == 201
        (item,) = await inbox_until(api, session, 1)
        assert (item["kind"], item["call_id"]) == ("input", call_id)
        if timeout_s is None:
            # The result deadline waits while the request is open: nothing is due.
            assert item["deadline"] is None
            continue
        # The tool's timeout_s runs on from the ack (the scripts' ms), open request or not.
        (acked,) = of_type(await api.events(session), "client_tool_acked")
        assert rfc3339_ms(item["deadline"]) == floor_ms(acked["created_at"]) + timeout_s * 1000


async def test_an_approval_that_times_out_leaves_the_inbox(api: Api) -> None:
    # Long enough to see its item open on a busy machine.
    session, requested = await approval_open(api, approval_timeout_s=3)
    (item,) = await inbox_until(api, session, 1)
    assert item["call_id"] == requested["call_id"]
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_resolved")), timeout=10)
    resolved = of_type(events, "approval_resolved")[0]
    assert resolved["reason"] == "timeout"
    # The deadline the item showed is when the timer came due.
    assert rfc3339_ms(item["deadline"]) <= floor_ms(resolved["created_at"])
    await inbox_until(api, session, 0)


@pytest.mark.parametrize("kind", ["approval", "call"])
@pytest.mark.parametrize("end", ["cancel_run", "cancel_call", "delete_session"])
async def test_a_wait_ended_by_a_cancel_or_a_delete_leaves_the_inbox(api: Api, kind: Kind, end: End) -> None:
    session, call_id = await opened(api, kind)
    if end == "delete_session":
        assert (await api.key.delete(f"/v1/sessions/{session.id}")).status_code == 204
    else:
        path = f"/v1/sessions/{session.id}/cancel"
        if end == "cancel_call":
            path = f"/v1/sessions/{session.id}/calls/{call_id}/cancel"
        async with api.as_session(session) as client:
            answer = await client.post(path)
        assert answer.status_code == 200, answer.text
        events = await wait_for(api, session, run_over if end == "cancel_run" else of_result(call_id))
        if kind == "call":
            failed = of_type(events, "client_tool_failed")[-1]
            assert failed == failed | {"call_id": call_id, "reason": "run_gone"}
        else:
            resolved = of_type(events, "approval_resolved")[0]
            assert resolved == resolved | {"call_id": call_id, "decision": "deny"}
    await inbox_until(api, session, 0)


async def test_an_approval_whose_client_left_leaves_the_inbox(api: Api) -> None:
    """The client the call would go to leaves while it awaits approval: the call fails, the approval is
    resolved as a deny, and its item goes."""
    session, requested = await approval_open(api)
    (item,) = await inbox_until(api, session, 1)
    assert item["call_id"] == requested["call_id"]
    (web,) = of_type(await api.events(session), "client_registered")
    await leave(api, session, web["client_id"])
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_resolved")))
    assert of_type(events, "approval_resolved")[0]["decision"] == "deny"
    await inbox_until(api, session, 0)


async def test_a_call_nobody_came_for_leaves_the_inbox(api: Api) -> None:
    # Its wait ends with its timeout_s counted from its first dispatch: long enough to see the item.
    session, waiting = await call_waiting(api, {**WAITING, "timeout_s": 3})
    await inbox_until(api, session, 1)
    events = await wait_for(api, session, run_over)
    failed = of_type(events, "client_tool_failed")[-1]
    assert failed == failed | {"call_id": waiting["call_id"], "reason": "client_gone"}
    await inbox_until(api, session, 0)


async def test_a_waiting_calls_notice_names_its_run_without_the_calls_record(api: Api) -> None:
    session, waiting = await call_waiting(api)
    broker = api.stack.broker
    # A settled call's record is trimmed a day on; a notice taken after that reads the run off the event.
    # (Its session's only call: the record goes with the hash.)
    await broker.core.redis.unlink(broker.core.keys.session(session.id).calls)
    notice = await Notices(broker).read(session.id, waiting["seq"])
    assert notice is not None
    assert notice.run_id == waiting["run_id"] is not None


def of_result(call_id: str) -> Any:
    return lambda events: any(e["type"] == "tool_result" and e["call_id"] == call_id for e in events)

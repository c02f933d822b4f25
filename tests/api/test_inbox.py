"""GET /v1/inbox and the session `subject`: a real approval's notices open and close its item (replayed and
reordered alike), the filters and pages over the wire, who may read it, bad input, and a deleted session."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from broker.services.inbox import Item
from common.codec import dumps, rfc3339_ms, uuid7
from common.events.read import from_values
from tests.api.test_access import mint
from tests.api_client import Api, Event, Session, of_type, run_over
from workers.inbox_notices import INBOX_EVENT_TYPES, inbox_consumer
from workers.notices import Notice

pytestmark = pytest.mark.both_redis

GATED: dict[str, Any] = {"client_tool_policies": {"client__web__highlight_row": "require_approval"}}
SINCE = 1_765_000_000_000


def notices(session: Session, events: list[Event], subject: str | None) -> list[Notice]:
    """The notices a session's log makes for the inbox, each with the run it belongs to."""
    found, run_id = [], None
    for event in events:
        run_id = event.get("run_id", run_id)
        if event["type"] in INBOX_EVENT_TYPES:
            raw = dumps(event).encode()
            found.append(Notice(session.id, run_id, session.agent_id, subject, event["seq"], from_values(event), raw))
    return found


async def inbox(api: Api, **params: Any) -> list[dict[str, Any]]:
    """Every page of the inbox for these filters."""
    items: list[dict[str, Any]] = []
    while True:
        answer = await api.key.get("/v1/inbox", params=params)
        assert answer.status_code == 200, answer.text
        page = answer.json()
        items += page["items"]
        if page["next_cursor"] is None:
            return items
        params = {**params, "after": page["next_cursor"]}


async def subject_session(api: Api, subject: str | None, agent_id: str | None = None) -> Session:
    agent_id = agent_id or await api.agent(**GATED)
    body = {"agent_id": agent_id} | ({} if subject is None else {"subject": subject})
    created = await api.key.post("/v1/sessions", json=body)
    assert created.status_code == 201, created.text
    return Session(created.json()["id"], created.json()["session_token"], agent_id)


async def test_a_real_approval_opens_its_item_and_its_decision_closes_it(api: Api) -> None:
    consume = inbox_consumer(api.stack.broker.inbox)
    session = await subject_session(api, "user-42")
    web = await api.register(session)
    await api.send(session, '/call client__web__highlight_row {"row_id": "7"}')
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")))
    requested = of_type(events, "approval_requested")[0]
    for notice in notices(session, events, "user-42") * 2:
        await consume(notice)
    (item,) = await inbox(api)
    run_id = of_type(events, "run_started")[0]["run_id"]
    # When the approval was asked, to the ms the item keeps.
    assert rfc3339_ms(item.pop("since")) == rfc3339_ms(requested["created_at"])
    assert item == {
        "kind": "approval",
        "session_id": session.id,
        "run_id": run_id,
        "call_id": requested["call_id"],
        "tool": "highlight_row",
        "client_name": None,
        "deadline": None,
        "subject": "user-42",
        "agent_id": session.agent_id,
        "request_id": None,
        "authorization_id": None,
        "authorization_url": None,
    }
    assert [i["call_id"] for i in await inbox(api, kind="approval", subject="user-42", agent_id=session.agent_id)] == [
        requested["call_id"]
    ]
    async with api.as_session(session) as client:
        decided = await client.post(
            f"/v1/sessions/{session.id}/approvals/{requested['call_id']}", json={"decision": "allow"}
        )
    assert decided.status_code == 200, decided.text
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    await api.call(session, web["id"], requested["call_id"], "result", text="done")
    events = await api.wait_for(session, run_over)
    # Handed in any order and more than once, the notices leave nothing open.
    every = notices(session, events, "user-42")
    for notice in [*reversed(every), *every]:
        await consume(notice)
    assert await inbox(api) == []


async def test_filters_and_pages_over_the_wire(api: Api) -> None:
    broker = api.stack.broker
    agents = [uuid7(), uuid7()]
    opened: list[Item] = []
    for n, (kind, agent, subject) in enumerate(itertools.product(("approval", "call"), agents, (None, "alice"))):
        for copy in range(3):
            one = Item(
                kind=kind,  # type: ignore[arg-type]
                session_id=uuid7(),
                run_id=None,
                call_id=f"call/{n}?{copy}",
                tool="sign",
                client_name="phone" if kind == "call" else None,
                since=SINCE + n % 3,
                deadline=SINCE + 86_400_000 if kind == "call" else None,
                subject=subject,
                agent_id=agent,
            )
            await broker.inbox.open(one, seq=1)
            opened.append(one)
    ordered = sorted(opened, key=lambda i: (i.since, i.session_id, i.call_id))
    filters = itertools.product((None, "approval", "call", "input"), (None, *agents), (None, "alice"))
    for want_kind, want_agent, want_subject in filters:
        asked = {"kind": want_kind, "agent_id": want_agent, "subject": want_subject}
        listed = await inbox(api, limit=2, **{k: v for k, v in asked.items() if v})
        expected = [
            i
            for i in ordered
            if want_kind in (None, i.kind)
            and want_agent in (None, i.agent_id)
            and (want_subject is None or i.subject == want_subject)
        ]
        assert [(i["session_id"], i["call_id"]) for i in listed] == [(i.session_id, i.call_id) for i in expected]
    first = (await api.key.get("/v1/inbox", params={"limit": 5})).json()
    assert len(first["items"]) == 5
    assert first["next_cursor"]
    assert first["items"][0]["deadline"] is None
    calls = await inbox(api, kind="call")
    assert {c["client_name"] for c in calls} == {"phone"}
    assert all(c["deadline"] for c in calls)
    # The agent filter takes an id with or without hyphens, as every path id; empty filters are none.
    assert await inbox(api, agent_id=agents[0].replace("-", "")) == await inbox(api, agent_id=agents[0])
    assert await inbox(api, agent_id="", after="") == await inbox(api)


async def test_who_may_read_the_inbox(api: Api) -> None:
    session = await api.session()
    async with api.stack.client() as anonymous:
        del anonymous.headers["authorization"]
        assert (await anonymous.get("/v1/inbox")).status_code == 401
    async with api.as_session(session) as token:
        refused = await token.get("/v1/inbox")
        assert refused.status_code == 403
        assert "API key" in refused.json()["error"]["message"]
    async with api.stack.client(await mint(api, "session.manage", "agent.read")) as manager:
        refused = await manager.get("/v1/inbox")
        assert refused.status_code == 403
        assert "session.read" in refused.json()["error"]["message"]
    async with api.stack.client(await mint(api, "session.read")) as reader:
        assert (await reader.get("/v1/inbox")).status_code == 200


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"kind": "bogus"}, "kind"),
        ({"kind": ""}, "kind"),
        ({"agent_id": "not-a-uuid"}, "agent_id"),
        ({"agent_id": "x" * 65}, "agent_id"),
        ({"subject": ""}, "subject"),
        ({"subject": "s" * 201}, "subject"),
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"after": "!!"}, "after"),
        ({"after": "abcde"}, "after"),
        ({"after": "a+b/"}, "after"),
        ({"after": "A" * 1025}, "after"),
    ],
)
async def test_bad_input_names_the_parameter(api: Api, params: dict[str, str], named: str) -> None:
    answer = await api.key.get("/v1/inbox", params=params)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["message"].startswith(named), answer.text


async def test_the_subject_is_kept_and_shown_only_when_set(api: Api) -> None:
    agent_id = await api.agent()
    plain = await api.key.post("/v1/sessions", json={"agent_id": agent_id})
    assert "subject" not in plain.json()
    named = await api.key.post("/v1/sessions", json={"agent_id": agent_id, "subject": "ü" * 200})
    assert named.status_code == 201, named.text
    assert named.json()["subject"] == "ü" * 200
    got = await api.key.get(f"/v1/sessions/{named.json()['id']}")
    assert got.json()["subject"] == "ü" * 200
    assert "subject" not in (await api.key.get(f"/v1/sessions/{plain.json()['id']}")).json()
    listed = {s["id"]: s for s in (await api.key.get("/v1/sessions")).json()["items"]}
    assert listed[named.json()["id"]]["subject"] == "ü" * 200
    assert "subject" not in listed[plain.json()["id"]]
    # A replay answers the receipt, subject included.
    once = {"Idempotency-Key": "subject-once"}
    body = {"agent_id": agent_id, "subject": "bob"}
    first = await api.key.post("/v1/sessions", json=body, headers=once)
    again = await api.key.post("/v1/sessions", json=body, headers=once)
    assert first.json()["subject"] == again.json()["subject"] == "bob"


@pytest.mark.parametrize(
    ("subject", "says"),
    [("", "at least 1 character"), ("s" * 201, "at most 200 characters"), (42, "string"), (["a"], "string")],
)
async def test_a_bad_subject_is_refused_naming_the_field_and_the_limit(api: Api, subject: Any, says: str) -> None:
    agent_id = await api.agent()
    answer = await api.key.post("/v1/sessions", json={"agent_id": agent_id, "subject": subject})
    assert answer.status_code == 400, answer.text
    message = answer.json()["error"]["message"]
    assert message.startswith("subject"), message
    assert says in message, message
    assert (await api.key.get("/v1/sessions")).json()["items"] == []


async def test_a_deleted_sessions_items_are_gone(api: Api) -> None:
    consume = inbox_consumer(api.stack.broker.inbox)
    session = await subject_session(api, "carol")
    other = await subject_session(api, "carol", session.agent_id)
    for one in (session, other):
        await api.register(one)
        await api.send(one, "/call client__web__highlight_row")
    for one in (session, other):
        events = await api.wait_for(one, lambda es: bool(of_type(es, "approval_requested")))
        for notice in notices(one, events, "carol"):
            await consume(notice)
    assert {i["session_id"] for i in await inbox(api, subject="carol")} == {session.id, other.id}
    early = notices(session, await api.events(session), "carol")
    assert (await api.key.delete(f"/v1/sessions/{session.id}")).status_code == 204
    assert [i["session_id"] for i in await inbox(api)] == [other.id]
    assert [i["session_id"] for i in await inbox(api, subject="carol", kind="approval")] == [other.id]
    # Its notices handed late (the approval's included) open nothing.
    for notice in early:
        await consume(notice)
    assert [i["session_id"] for i in await inbox(api, agent_id=session.agent_id)] == [other.id]

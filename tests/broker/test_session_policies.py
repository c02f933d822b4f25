"""The policies a session is held to, as the API reads them for the calls no model makes: its version's,
read once per version and kept within a bound; and a call no run made, dispatched under them."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from broker import Broker
from broker.errors import NotFound
from broker.services import policies
from broker.services.agents import AgentVersion
from common.codec import uuid7
from common.events.catalogue import TextBlock
from tests.helpers import HIGHLIGHT, SCRIPTED_CONFIG, log_events, make_session

pytestmark = pytest.mark.both_redis

WEB = "0190f2a0-0000-7000-8000-00000000000a"


async def test_a_sessions_policies_are_its_versions_read_once_each_within_the_bound(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(policies, "MAX_VERSIONS", 2)
    reads: list[str] = []
    version = broker.agents.version

    async def counted(version_id: str) -> AgentVersion:
        reads.append(version_id)
        return await version(version_id)

    monkeypatch.setattr(broker.agents, "version", counted)
    first, second, third = [
        await make_session(broker, {**SCRIPTED_CONFIG, "client_tool_policies": {f"client__web__t{i}": "deny"}})
        for i in range(3)
    ]
    reads.clear()  # publishing reads the version back
    for session_id in (first, second, first):
        await broker.policies.client_policies(session_id)
    assert len(reads) == 2
    # The third version puts out the one least recently used (the second), never more than two kept.
    assert await broker.policies.client_policies(third) == {"client__web__t2": "deny"}
    assert await broker.policies.client_policies(first) == {"client__web__t0": "deny"}
    assert len(reads) == 3
    await broker.policies.client_policies(second)
    assert len(reads) == 4
    with pytest.raises(NotFound):
        await broker.policies.client_policies(uuid7())


@pytest.mark.parametrize(("remembered", "outcome"), [(None, "awaiting"), ("allow", "dispatched"), ("deny", "denied")])
async def test_a_call_no_run_made_that_needs_approval(
    broker: Broker, remembered: Literal["allow", "deny"] | None, outcome: str
) -> None:
    session_id = await make_session(broker)
    web = await broker.clients.register(session_id, WEB, "web", 60, [HIGHLIGHT])
    name = "client__web__highlight_row"
    arguments: dict[str, Any] = {"row_id": "7"}
    if remembered is not None:
        first = await broker.calls.dispatch(
            session_id, (web.id, web.name), "highlight_row", arguments, policy="require_approval", name=name
        )
        await broker.approvals.resolve(session_id, first.call_id, remembered, "", "someone", remember=True)
    before = len(await log_events(broker, session_id))
    sent = await broker.calls.dispatch(
        session_id, (web.id, web.name), "highlight_row", arguments, policy="require_approval", name=name
    )
    assert sent.outcome == outcome
    written = (await log_events(broker, session_id))[before:]
    record = await broker.calls.record(session_id, sent.call_id)
    if outcome == "awaiting":
        assert [e["type"] for e in written] == ["approval_requested"]
        assert written[0]["from"] == "mcp"
        assert record is not None
        assert (record.state, record.client_id, record.run_id) == ("awaiting", web.id, "")
    elif outcome == "dispatched":
        assert [e["type"] for e in written] == ["approval_resolved", "client_tool_dispatched"]
        assert written[0]["remembered"] is True
    else:
        assert [e["type"] for e in written] == ["approval_resolved", "tool_result"]
        assert sent.denial is not None
        [block] = sent.denial.content
        assert isinstance(block, TextBlock)
        assert block.data.text == "the user denied this call"
        assert record is None

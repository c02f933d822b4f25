"""A registered tool's `annotations` (an extension, MCP's hints): listed back as given, bounded, and a
destructive tool the agent's policies do not name waits for approval."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api_client import Api, of_type, run_over

DELETE = {
    "name": "delete_row",
    "description": "Delete a row",
    "parameters": {"type": "object"},
    "annotations": {"title": "Delete a row", "destructiveHint": True, "readOnlyHint": False},
}


async def test_annotations_are_listed_back_as_given(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[DELETE])
    (client,) = (await api.key.get(f"/v1/sessions/{session.id}/clients")).json()["items"]
    assert client["tools"][0]["annotations"] == DELETE["annotations"]


async def test_a_destructive_tool_waits_for_approval_unless_a_policy_names_it(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[DELETE])
    await api.send(session, "/call client__web__delete_row")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "approval_requested")))
    assert of_type(events, "approval_requested")[0]["tool"] == "delete_row"

    named = await api.session(client_tool_policies={"client__web__delete_row": "allow"})
    await api.register(named, tools=[DELETE])
    await api.send(named, "/call client__web__delete_row")
    events = await api.wait_for(named, lambda es: bool(of_type(es, "client_tool_dispatched")))
    assert not of_type(events, "approval_requested")
    assert not run_over(events)


@pytest.mark.parametrize(
    "annotations",
    [
        {f"hint{i}": True for i in range(17)},
        {"x" * 65: True},
        {"title": "t" * 501},
        {"nested": {"a": 1}},
        {"count": 3},
        [True],
    ],
)
async def test_bad_annotations_are_refused(api: Api, annotations: Any) -> None:
    session = await api.session()
    body = {"name": "web", "lifetime": {"type": "never"}, "tools": [{**DELETE, "annotations": annotations}]}
    async with api.as_session(session) as client:
        refused = await client.post(f"/v1/sessions/{session.id}/clients", json=body)
    assert refused.status_code == 400, refused.text
    assert "annotations" in refused.json()["error"]["message"]

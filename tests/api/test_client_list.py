"""`GET .../clients`: the session's active registrations, for the console's clients panel."""

from __future__ import annotations

from tests.api_client import Api


async def test_active_clients_are_listed_oldest_first_with_tools_and_expiry(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, "web", ttl=60)
    worker = await api.register(session, "worker", ttl=None, tools=[])
    gone = await api.register(session, "gone")
    async with api.as_session(session) as http:
        assert (await http.delete(f"/v1/sessions/{session.id}/clients/{gone['id']}")).status_code == 204
        listed = await http.get(f"/v1/sessions/{session.id}/clients")
    assert listed.status_code == 200
    items = listed.json()["items"]
    assert [(c["id"], c["name"]) for c in items] == [(web["id"], "web"), (worker["id"], "worker")]
    assert items[0]["lifetime"] == {"type": "ttl", "data": {"seconds": 60}}
    assert items[0]["expires_at"] == web["expires_at"]
    assert [t["name"] for t in items[0]["tools"]] == ["highlight_row"]
    assert items[1]["lifetime"] == {"type": "never"}
    assert items[1]["expires_at"] is None
    assert items[1]["tools"] == []


async def test_another_sessions_token_sees_no_clients(api: Api) -> None:
    mine, other = await api.session(), await api.session()
    await api.register(mine)
    async with api.as_session(other) as http:
        answer = await http.get(f"/v1/sessions/{mine.id}/clients")
    assert answer.status_code == 404

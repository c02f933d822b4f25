"""Idempotency-Key: the same key and body replays the first answer; another body is 409; duplicates wait."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.api_client import Api, Session, of_type, run_over, types
from tests.helpers import HIGHLIGHT

REGISTER = {"name": "web", "lifetime": {"type": "ttl", "data": {"seconds": 60}}, "tools": [HIGHLIGHT]}


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


async def test_register_replays_and_registers_once(api: Api) -> None:
    session = await api.session()
    path = f"/v1/sessions/{session.id}/clients"
    async with api.as_session(session) as client:
        first = await client.post(path, json=REGISTER, headers=keyed("r1"))
        again = await client.post(path, json=REGISTER, headers=keyed("r1"))
        other = await client.post(path, json={**REGISTER, "name": "other"}, headers=keyed("r1"))
        fresh = await client.post(path, json=REGISTER, headers=keyed("r2"))
    assert first.status_code == again.status_code == 201
    assert again.content == first.content
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "conflict"
    assert fresh.json()["name"] == "web-2"
    assert types(await api.events(session)).count("client_registered") == 2


async def test_concurrent_duplicates_wait_and_replay(api: Api) -> None:
    session = await api.session()
    path = f"/v1/sessions/{session.id}/clients"
    async with api.as_session(session) as client:
        answers = await asyncio.gather(*(client.post(path, json=REGISTER, headers=keyed("same")) for _ in range(8)))
    assert {a.status_code for a in answers} == {201}
    assert len({a.content for a in answers}) == 1
    assert types(await api.events(session)).count("client_registered") == 1


async def test_ping_ack_result_and_input_replay_exactly(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    base = f"/v1/sessions/{session.id}"
    async with api.as_session(session) as client:
        ping = [await client.post(f"{base}/clients/{web['id']}/ping", headers=keyed("p")) for _ in range(2)]
        assert ping[0].status_code == ping[1].status_code == 200
        assert ping[0].content == ping[1].content
        text = {"type": "input", "text": "/call client__web__highlight_row"}
        posts = [await client.post(f"{base}/events", json=text, headers=keyed("i")) for _ in range(2)]
        assert posts[0].content == posts[1].content
        events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
        call = f"{base}/clients/{web['id']}/calls/{of_type(events, 'client_tool_dispatched')[0]['call_id']}"
        acks = [await client.post(f"{call}/ack", headers=keyed("a")) for _ in range(2)]
        assert acks[0].content == acks[1].content
        renewed = await client.post(f"{call}/ack", headers=keyed("a2"))
        assert renewed.status_code == 200
        assert renewed.content == acks[0].content
        results = [await client.post(f"{call}/result", json={"text": "ok"}, headers=keyed("res")) for _ in range(2)]
        assert [r.status_code for r in results] == [204, 204]
        changed = await client.post(f"{call}/result", json={"text": "other"}, headers=keyed("res"))
        assert changed.status_code == 409
        second = await client.post(f"{call}/result", json={"text": "ok"}, headers=keyed("res2"))
        assert second.status_code == 409
        assert "already has a result" in second.json()["error"]["message"]
    events = await api.wait_for(session, run_over)
    assert types(events).count("message_user") == 1
    assert types(events).count("tool_result") == 1
    assert types(events).count("client_tool_acked") == 1


async def test_creates_that_return_a_secret_replay_a_receipt(api: Api) -> None:
    agent_id = await api.agent()
    created = await api.key.post("/v1/sessions", json={"agent_id": agent_id}, headers=keyed("s"))
    replay = await api.key.post("/v1/sessions", json={"agent_id": agent_id}, headers=keyed("s"))
    assert (created.status_code, replay.status_code) == (201, 200)
    first, receipt = created.json(), replay.json()
    assert "session_token" in first
    assert "session_token" not in receipt
    assert receipt["session_token_id"]
    assert {k: v for k, v in first.items() if k != "session_token"} == {
        k: v for k, v in receipt.items() if k != "session_token_id"
    }
    sessions = (await api.key.get("/v1/sessions")).json()["items"]
    assert [s["id"] for s in sessions] == [first["id"]]

    tokens = f"/v1/sessions/{first['id']}/tokens"
    minted, again = [await api.key.post(tokens, headers=keyed("t")) for _ in range(2)]
    assert (minted.status_code, again.status_code) == (201, 200)
    assert set(minted.json()) == {"expires_at", "session_token"}
    assert set(again.json()) == {"expires_at", "id", "session_id"}

    body = {"label": "ci", "permissions": ["session.read"]}
    key, key_again = [await api.key.post("/v1/api-keys", json=body, headers=keyed("k")) for _ in range(2)]
    assert (key.status_code, key_again.status_code) == (201, 200)
    assert "secret" in key.json()
    assert "secret" not in key_again.json()
    assert key.json()["id"] == key_again.json()["id"]


async def test_keys_are_scoped_per_credential(api: Api) -> None:
    session = await api.session()
    other_token = (await api.key.post(f"/v1/sessions/{session.id}/tokens")).json()["session_token"]
    second = Session(session.id, other_token, session.agent_id)
    answers: list[httpx.Response] = []
    for who in (session, second):
        async with api.as_session(who) as client:
            answers.append(
                await client.post(f"/v1/sessions/{session.id}/clients", json=REGISTER, headers=keyed("shared"))
            )
    assert [a.json()["name"] for a in answers] == ["web", "web-2"]


async def test_a_refusal_is_the_answer_too(api: Api) -> None:
    session = await api.session()
    bad_client = "01900000-0000-7000-8000-000000000000"
    path = f"/v1/sessions/{session.id}/clients/{bad_client}/ping"
    async with api.as_session(session) as client:
        answers: list[Any] = [await client.post(path, headers=keyed("gone")) for _ in range(2)]
    assert [a.status_code for a in answers] == [404, 404]
    assert answers[0].content == answers[1].content

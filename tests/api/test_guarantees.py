"""Promises that cut across routes: tool replacement, event shapes, stored secrets, jobs never held."""

from __future__ import annotations

from pydantic import TypeAdapter

from api.schemas.events import SessionEvent
from broker.transport import aio
from broker.transport.aio import command
from tests.api_client import Api, of_type, run_over, types
from tests.helpers import held_work

EVENTS = TypeAdapter(list[SessionEvent])


async def test_replacing_tools_refuses_dropped_ones_but_lets_running_calls_answer(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, '/call client__web__highlight_row {"row_id": "1"}')
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    running = of_type(events, "client_tool_dispatched")[0]
    lookup = {"name": "lookup", "description": "Find a row", "parameters": {"type": "object"}}
    async with api.as_session(session) as client:
        replaced = await client.put(f"/v1/sessions/{session.id}/clients/{web['id']}/tools", json={"tools": [lookup]})
    assert replaced.status_code == 200
    updated = replaced.json()
    assert updated["type"] == "client_tools_updated"
    assert updated["client_id"] == web["id"]
    assert updated["tools"] == [lookup]
    # The call made under the dropped tool still delivers its result.
    answer = await api.call(session, web["id"], running["call_id"], "result", text="done anyway")
    assert answer.status_code == 204
    await api.wait_for(session, run_over)
    await api.send(session, "/call client__web__highlight_row\n/call client__web__lookup")
    events = await api.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) == 2)
    dispatched = of_type(events, "client_tool_dispatched")[-1]
    assert dispatched["tool"] == "lookup"
    refused = of_type(events, "tool_result")[-1]
    assert refused["is_error"] is True
    assert "does not serve a tool named highlight_row" in refused["content"][0]["data"]["text"]


async def test_every_event_matches_the_twenty_types(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, "/call client__web__highlight_row\n/call client__x__y\nplain")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    call_id = of_type(events, "client_tool_dispatched")[0]["call_id"]
    await api.call(session, web["id"], call_id, "ack")
    await api.call(session, web["id"], call_id, "result", text="ok", is_error=None)
    await api.wait_for(session, run_over)
    await api.send(session, "/fail boom")
    events = await api.wait_for(session, lambda es: bool(of_type(es, "run_failed")))
    parsed = EVENTS.validate_python(events)
    assert len(parsed) == len(events)
    assert {e["type"] for e in events} >= {"client_tool_acked", "tool_result", "run_failed", "client_registered"}
    for event in events:
        assert event["created_at"].endswith("Z")


async def test_secrets_are_stored_only_as_hashes(api: Api) -> None:
    session = await api.session()
    minted = (await api.key.post("/v1/api-keys", json={"label": "x", "permissions": ["agent.read"]})).json()
    byok = {"api_key": "sk-very-secret", "base_url": "https://example.com", "display_name": "p", "format": "anthropic"}
    await api.key.post("/v1/model-providers", json=byok)
    prefix = api.stack.settings.key_prefix
    dumped = b""
    for redis in api.stack.broker.core.connected.masters():
        cursor = 0
        while True:
            cursor, keys = await command(redis, "SCAN", cursor, "MATCH", f"{prefix}:*", "COUNT", 500)
            for key in keys:
                kind = await redis.type(key)
                if kind == b"hash":
                    dumped += b"".join(k + v for k, v in aio.record(await redis.hgetall(key)).items())
                elif kind == b"string":
                    dumped += aio.reply(await redis.get(key)) or b""
            if int(cursor) == 0:
                break
    for secret in (session.token, minted["secret"], api.stack.api_key):
        assert secret.encode() not in dumped
    # A BYOK key is stored (the worker needs it) but no route returns it.
    assert b"sk-very-secret" in dumped


async def test_no_job_is_held_while_a_run_waits_on_a_client(api: Api) -> None:
    session = await api.session()
    await api.register(session)
    await api.send(session, "/call client__web__highlight_row")
    await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    assert await held_work(api.stack.broker, session.id) == []
    assert "run_completed" not in types(await api.events(session))

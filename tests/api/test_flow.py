"""The client tool protocol end to end over HTTP: dispatch, ack, result, and the run going on."""

from __future__ import annotations

import asyncio

import pytest

from tests.api_client import Api, of_type, run_over, types

pytestmark = pytest.mark.both_redis


async def test_one_call_round_trip_in_order(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    sent = await api.send(session, '/call client__web__highlight_row {"row_id": "42"}')
    assert sent["outcome"] == "new_run"
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    dispatched = of_type(events, "client_tool_dispatched")[0]
    assert dispatched["client_id"] == web["id"]
    assert dispatched["tool"] == "highlight_row"
    assert dispatched["arguments"] == {"row_id": "42"}

    ack = await api.call(session, web["id"], dispatched["call_id"], "ack")
    assert ack.status_code == 200
    assert ack.json()["type"] == "client_tool_acked"
    assert ack.json()["call_id"] == dispatched["call_id"]
    result = await api.call(session, web["id"], dispatched["call_id"], "result", text="Row 42 is highlighted.")
    assert result.status_code == 204
    assert result.content == b""

    events = await api.wait_for(session, run_over)
    tail = types(events)[types(events).index("message_user") :]
    assert tail == [
        "message_user",
        "run_queued",
        "run_started",
        "message_assistant",
        "tool_call",
        "client_tool_dispatched",
        "client_tool_acked",
        "tool_result",
        "message_assistant",
        "run_completed",
    ]
    assert {e["run_id"] for e in events if e["type"].startswith("run_")} == {sent["run_id"]}
    first, final = of_type(events, "message_assistant")
    block = first["message"]["content"][0]
    assert block == {
        "type": "tool_call",
        "data": {"id": dispatched["call_id"], "name": "client__web__highlight_row", "arguments": {"row_id": "42"}},
    }
    assert final["message"]["content"] == [
        {"type": "text", "data": {"text": "client__web__highlight_row: Row 42 is highlighted."}}
    ]
    tool_result = of_type(events, "tool_result")[0]
    assert tool_result["is_error"] is False
    assert tool_result["content"] == [{"type": "text", "data": {"text": "Row 42 is highlighted."}}]


async def test_parallel_calls_to_two_clients_continue_once(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, "web")
    worker = await api.register(session, "worker", ttl=None, tools=[{"name": "lookup", "parameters": {}}])
    text = "\n".join(
        [
            '/call client__web__highlight_row {"row_id": "1"}',
            "/call client__worker__lookup",
            '/call client__web__highlight_row {"row_id": "2"}',
        ]
    )
    await api.send(session, text)
    events = await api.wait_for(session, lambda es: len(of_type(es, "client_tool_dispatched")) == 3)
    owners = {"web": web["id"], "worker": worker["id"]}
    dispatched = of_type(events, "client_tool_dispatched")
    assert [d["client_id"] for d in dispatched] == [owners["web"], owners["worker"], owners["web"]]
    # Acked at once, then answered in reverse: until the last answer, the run must not go on.
    for event in dispatched:
        assert (await api.call(session, event["client_id"], event["call_id"], "ack")).status_code == 200
    *first_answers, last = reversed(dispatched)
    for event in first_answers:
        answer = await api.call(session, event["client_id"], event["call_id"], "result", text=f"ok {event['tool']}")
        assert answer.status_code == 204
        await asyncio.sleep(0.1)
        assert types(await api.events(session)).count("message_assistant") == 1
    final = await api.call(session, last["client_id"], last["call_id"], "result", text=f"ok {last['tool']}")
    assert final.status_code == 204
    events = await api.wait_for(session, run_over)
    assert types(events).count("message_assistant") == 2
    assert types(events).count("run_started") == 1
    assert of_type(events, "message_assistant")[-1]["message"]["content"][0]["data"]["text"] == "\n".join(
        [
            "client__web__highlight_row: ok highlight_row",
            "client__worker__lookup: ok lookup",
            "client__web__highlight_row: ok highlight_row",
        ]
    )


async def test_unknown_tools_answer_the_model_at_once(api: Api) -> None:
    session = await api.session()
    await api.register(session)
    await api.send(session, "/call client__ghost__anything\n/call client__web__nope\n/call server_tool")
    events = await api.wait_for(session, run_over)
    assert "client_tool_dispatched" not in types(events)
    results = of_type(events, "tool_result")
    assert [r["is_error"] for r in results] == [True, True, True]
    answer = of_type(events, "message_assistant")[-1]["message"]["content"][0]["data"]["text"]
    assert answer.splitlines()[0].startswith("client__ghost__anything failed: no client named ghost")
    assert of_type(events, "run_completed")


async def test_plain_input_is_echoed(api: Api) -> None:
    session = await api.session()
    await api.send(session, "hello there")
    events = await api.wait_for(session, run_over)
    assert types(events) == [
        "session_created",
        "message_user",
        "run_queued",
        "run_started",
        "message_assistant",
        "run_completed",
    ]
    assert of_type(events, "message_user")[0]["source"] == "client"
    assert of_type(events, "message_assistant")[0]["message"]["content"][0]["data"]["text"] == "You said: hello there"


async def test_fail_line_fails_the_run_with_its_message(api: Api) -> None:
    session = await api.session()
    await api.send(session, "/fail the model is down")
    events = await api.wait_for(session, run_over)
    assert of_type(events, "run_failed")[0]["error"] == "the model is down"
    assert "message_assistant" not in types(events)


async def test_steering_input_joins_the_active_run(api: Api) -> None:
    session = await api.session()
    first = await api.send(session, "/sleep 0.4")
    second = await api.send(session, "and then this")
    assert second == {"outcome": "steered", "run_id": first["run_id"]}
    events = await api.wait_for(session, run_over)
    users = of_type(events, "message_user")
    assert [u["source"] for u in users] == ["client", "steer"]
    answers = [m["message"]["content"][0]["data"]["text"] for m in of_type(events, "message_assistant")]
    assert answers[-1] == "You said: and then this"
    assert types(events).count("run_completed") == 1

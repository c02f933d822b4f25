"""Tool-call arguments stream to readers that ask (`?include=deltas`) as `tool_call_delta` frames, from
every model adapter, named as the model sees the tool; the log never keeps them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.api_client import Api, Event, Session, of_type
from tests.fakes import FakeProvider, Reply, anthropic_stream, openai_stream
from tests.sse import Frames
from workers.models.aliases import shorten

# The fake providers listen on 127.0.0.1, a loopback address: allowed here only.
pytestmark = pytest.mark.private_providers

ROW = {"name": "highlight_row", "description": "Highlight a row.", "parameters": {"type": "object"}}
LONG_TOOL = {**ROW, "name": "t" * 40}
VISIBLE = f"client__{'a' * 32}__{'t' * 40}"


async def _session(api: Api, fake: FakeProvider, form: str) -> Session:
    base_url = fake.url if form == "anthropic" else f"{fake.url}/v1"
    body = {"api_key": "k", "base_url": base_url, "display_name": "fake", "format": form}
    provider = (await api.key.post("/v1/model-providers", json=body)).json()
    agent = (await api.key.post("/v1/agents", json={"name": form})).json()
    model: dict[str, Any] = {"format": form, "model": "m", "max_tokens": 100}
    if form == "openai_responses":
        model["context_window"] = 8000
    version = {"model_provider_id": provider["id"], "model": model}
    assert (await api.key.post(f"/v1/agents/{agent['id']}/versions", json=version)).status_code == 201
    return await api.session(agent["id"])


async def _deltas_until_dispatch(frames: Frames, calls: int) -> list[Event]:
    """The tool_call_delta frames read before `calls` calls were dispatched."""
    seen: list[Event] = []
    dispatched = 0
    while dispatched < calls:
        frame = await frames.next()
        if not frame.data:
            continue
        if frame.id is None:
            assert frame.event["type"] in ("message_delta", "tool_call_delta"), frame.event
            if frame.event["type"] == "tool_call_delta":
                seen.append(frame.event)
        elif frame.event["type"] == "client_tool_dispatched":
            dispatched += 1
    return seen


def _joined(deltas: list[Event]) -> dict[str, dict[str, Any]]:
    """Each call's fragments joined, with the one name and index every fragment of it carries."""
    calls: dict[str, dict[str, Any]] = {}
    for delta in deltas:
        assert set(delta) == {"type", "run_id", "step", "call_id", "index", "name", "delta"}
        call = calls.setdefault(delta["call_id"], {"name": delta["name"], "index": delta["index"], "text": ""})
        assert (call["name"], call["index"]) == (delta["name"], delta["index"])
        call["text"] += delta["delta"]
    return calls


async def _check(api: Api, session: Session, deltas: list[Event], expected: list[tuple[str, dict[str, Any]]]) -> None:
    events = await api.events(session)
    logged = of_type(events, "tool_call")
    joined = _joined(deltas)
    assert [(c["name"], c["arguments"]) for c in logged] == expected
    for index, call in enumerate(logged):
        streamed = joined[call["call_id"]]
        assert (streamed["name"], streamed["index"]) == (call["name"], index)
        assert json.loads(streamed["text"]) == call["arguments"]
    assert len({(d["run_id"], d["step"]) for d in deltas}) == 1
    assert not [e for e in events if e["type"] in ("tool_call_delta", "message_delta")]


async def test_the_scripted_model_streams_each_calls_arguments_in_pieces(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[ROW])
    arguments = {"row_id": "row-42", "note": "a longer argument, streamed in several pieces"}
    async with api.stream(session, include="deltas") as frames:
        await api.send(
            session, f"/call client__web__highlight_row {json.dumps(arguments)}\n/call client__web__highlight_row"
        )
        deltas = await _deltas_until_dispatch(frames, 2)
    await _check(api, session, deltas, [("client__web__highlight_row", arguments), ("client__web__highlight_row", {})])


async def test_anthropic_input_json_deltas_stream_under_the_model_visible_name(api: Api, fake: FakeProvider) -> None:
    session = await _session(api, fake, "anthropic")
    await api.register(session, name="a" * 32, tools=[LONG_TOOL])
    uses: list[dict[str, Any]] = [
        {"type": "text", "text": "Two rows."},
        {"type": "tool_use", "id": "toolu_1", "name": shorten(VISIBLE), "input": {"row": 1}},
        {"type": "tool_use", "id": "toolu_2", "name": shorten(VISIBLE), "input": {"row": 2}},
    ]
    fake.replies = [Reply(frames=anthropic_stream(*uses, stop="tool_use"))]
    async with api.stream(session, include="deltas") as frames:
        await api.send(session, "light them")
        deltas = await _deltas_until_dispatch(frames, 2)
    await _check(api, session, deltas, [(VISIBLE, {"row": 1}), (VISIBLE, {"row": 2})])


async def test_openai_function_call_argument_deltas_stream_under_the_model_visible_name(
    api: Api, fake: FakeProvider
) -> None:
    session = await _session(api, fake, "openai_responses")
    await api.register(session, name="a" * 32, tools=[LONG_TOOL])
    call = {"type": "function_call", "call_id": "call_1", "name": shorten(VISIBLE), "arguments": {"row": 7}}
    fake.replies = [Reply(frames=openai_stream({"type": "message", "text": "One row."}, call))]
    async with api.stream(session, include="deltas") as frames:
        await api.send(session, "light it")
        deltas = await _deltas_until_dispatch(frames, 1)
    await _check(api, session, deltas, [(VISIBLE, {"row": 7})])


async def test_a_reader_that_did_not_ask_gets_no_deltas(api: Api) -> None:
    session = await api.session()
    await api.register(session, tools=[ROW])
    async with api.stream(session) as frames:
        await api.send(session, '/call client__web__highlight_row {"row_id": "1"}')
        while True:
            frame = await frames.next()
            if frame.data:
                assert frame.id is not None, frame.event
                if frame.event["type"] == "client_tool_dispatched":
                    break

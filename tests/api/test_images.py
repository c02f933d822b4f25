"""Results with images: checked on the way in, shown to the SDK as text, given to the model as images."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from tests.api.test_providers import CLAUDE, GPT, provider_session
from tests.api_client import Api, Event, Session, of_type, run_over, whole_log
from tests.fakes import FakeProvider, Reply, anthropic_stream, openai_stream

# The fake providers listen on 127.0.0.1, a loopback address: allowed here only.
pytestmark = pytest.mark.private_providers

CALL = '/call client__web__highlight_row {"row_id": "7"}'
# A 1x1 PNG (one red pixel).
PIXEL = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
        "0000000d49444154789c63f8cfc0f01f00050001ff89993d1d0000000049454e44ae426082"
    )
).decode()


async def dispatched_call(api: Api, session: Session) -> str:
    events = await api.wait_for(session, lambda es: bool(of_type(es, "client_tool_dispatched")))
    call_id: str = of_type(events, "client_tool_dispatched")[0]["call_id"]
    return call_id


async def listing(api: Api, session: Session, include: str | None = None) -> list[Event]:
    path = f"/v1/sessions/{session.id}/events"
    extra = {"include": include} if include else {}
    return await whole_log(lambda params: api.key.get(path, params={**params, **extra}))


def image(media_type: str = "image/png", data: str = PIXEL) -> dict[str, Any]:
    return {"type": "image", "media_type": media_type, "data": data}


@pytest.mark.both_redis
async def test_an_image_result_is_text_by_default_and_an_image_for_readers_that_ask(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, CALL)
    call_id = await dispatched_call(api, session)
    content = [{"type": "text", "text": "the row, as drawn"}, image()]
    answered = await api.call(session, web["id"], call_id, "result", content=content)
    assert answered.status_code == 204, answered.text
    await api.wait_for(session, run_over)

    (plain,) = of_type(await listing(api, session), "tool_result")
    assert plain["content"] == [
        {"type": "text", "data": {"text": "the row, as drawn"}},
        {"type": "text", "data": {"text": "[image/png, 1 KB]"}},
    ]
    (full,) = of_type(await listing(api, session, "images"), "tool_result")
    assert full["content"][1] == {"type": "image", "data": {"media_type": "image/png", "data": PIXEL}}
    async with api.stream(session, after_seq=0, include="images") as frames:
        while (event := await frames.event())["type"] != "tool_result":
            pass
    assert event["content"][1]["type"] == "image"
    async with api.stream(session, after_seq=0) as frames:
        while (event := await frames.event())["type"] != "tool_result":
            pass
    assert event["content"][1] == {"type": "text", "data": {"text": "[image/png, 1 KB]"}}


async def refused_result(api: Api, body: dict[str, Any], named: str) -> None:
    """A call's result `body` is refused with a 400 naming `named`, and no result is logged."""
    session = await api.session()
    web = await api.register(session)
    await api.send(session, CALL)
    call_id = await dispatched_call(api, session)
    refused = await api.call(session, web["id"], call_id, "result", **body)
    assert refused.status_code == 400, refused.text
    assert named in refused.json()["error"]["message"]
    assert not of_type(await api.events(session), "tool_result")


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"content": [image("image/bmp")]}, "media_type"),
        ({"content": [image(data="not base64!")]}, "content[0].image.data: String should match pattern"),
        ({"content": [image(data=base64.b64encode(b"x" * (5 * 1024 * 1024 + 1)).decode())]}, "limit"),
        ({"text": "both", "content": [image()]}, "one of the two"),
        ({"is_error": False}, "one of the two"),
        ({"content": []}, "content"),
        ({"content": [{"type": "video", "data": "AAAA"}]}, "content"),
    ],
)
async def test_bad_result_content_is_refused_and_nothing_is_recorded(
    api: Api, body: dict[str, Any], named: str
) -> None:
    await refused_result(api, body, named)


@pytest.mark.parametrize("text_only", [False, True])
async def test_anthropic_gets_the_image_in_the_tool_result_or_as_its_placeholder(
    api: Api, fake: FakeProvider, text_only: bool
) -> None:
    session = await provider_session(api, fake, CLAUDE, text_only=text_only)
    web = await api.register(session)
    use = {"type": "tool_use", "id": "toolu_1", "name": "client__web__highlight_row", "input": {"row_id": "1"}}
    fake.replies = [
        Reply(frames=anthropic_stream(use, stop="tool_use")),
        Reply(frames=anthropic_stream({"type": "text", "text": "I see it."})),
    ]
    await api.send(session, "show me")
    await dispatched_call(api, session)
    content = [{"type": "text", "text": "here"}, image()]
    assert (await api.call(session, web["id"], "toolu_1", "result", content=content)).status_code == 204
    await api.wait_for(session, run_over)
    result = fake.requests[1]["messages"][-1]["content"][0]
    if text_only:
        # A provider that takes no images gets each as its placeholder.
        assert result["content"] == "here\n[image/png, 1 KB]"
    else:
        assert result["content"] == [
            {"type": "text", "text": "here"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}},
        ]


async def test_openai_responses_gets_the_image_in_the_function_call_output(api: Api, fake: FakeProvider) -> None:
    session = await provider_session(api, fake, GPT)
    web = await api.register(session)
    function_call: dict[str, Any] = {"type": "function_call", "call_id": "fc_1", "name": "client__web__highlight_row"}
    function_call["arguments"] = {"row_id": "1"}
    fake.replies = [
        Reply(frames=openai_stream(function_call)),
        Reply(frames=openai_stream({"type": "message", "text": "I see it."})),
    ]
    await api.send(session, "show me")
    await dispatched_call(api, session)
    assert (await api.call(session, web["id"], "fc_1", "result", content=[image("image/jpeg")])).status_code == 204
    await api.wait_for(session, run_over)
    output = fake.requests[1]["input"][-1]
    assert output == {
        "type": "function_call_output",
        "call_id": "fc_1",
        "output": [{"type": "input_image", "image_url": f"data:image/jpeg;base64,{PIXEL}"}],
    }

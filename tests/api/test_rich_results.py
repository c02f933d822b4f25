"""Results with MCP's other content types (audio, embedded resources, resource links) and structured content:
checked on the way in, shown to the Subako view as text, to readers that ask as they are, and to an MCP
caller of the session's server as MCP content."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import mcp.types as mt
import pytest

from common.events.blocks import MAX_STRUCTURED_BYTES
from tests.api.test_images import CALL, PIXEL, dispatched_call, listing, refused_result
from tests.api.test_session_mcp import LOOKUP, dispatched, mcp_client
from tests.api_client import Api, of_type, run_over

WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()
BIG = base64.b64encode(b"x" * (5 * 1024 * 1024 + 1)).decode()
HALF = base64.b64encode(b"x" * (5 * 1024 * 1024 // 2 + 1)).decode()


def audio(media_type: str = "audio/wav", data: str = WAV) -> dict[str, Any]:
    return {"type": "audio", "media_type": media_type, "data": data}


def resource(**fields: Any) -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": "file:///notes/a.txt", **fields}}


def link(**fields: Any) -> dict[str, Any]:
    return {"type": "resource_link", "uri": "https://example.com/report.pdf", **fields}


RICH = [
    {"type": "text", "text": "three things"},
    # MCP's own spelling of the media type is taken.
    {"type": "audio", "mimeType": "audio/wav", "data": WAV},
    resource(media_type="text/plain", text="the note"),
    resource(mimeType="application/pdf", blob=PIXEL),
    link(name="report", description="The quarter's report", mimeType="application/pdf"),
]


@pytest.mark.both_redis
async def test_rich_blocks_are_text_by_default_and_themselves_for_readers_that_ask(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, CALL)
    call_id = await dispatched_call(api, session)
    answered = await api.call(session, web["id"], call_id, "result", content=RICH, structured={"count": 3})
    assert answered.status_code == 204, answered.text
    await api.wait_for(session, run_over)

    (plain,) = of_type(await listing(api, session), "tool_result")
    assert plain["content"] == [
        {"type": "text", "data": {"text": "three things"}},
        {"type": "text", "data": {"text": "[audio: audio/wav, 1 KiB]"}},
        {"type": "text", "data": {"text": "[resource: file:///notes/a.txt, text/plain]\nthe note"}},
        {"type": "text", "data": {"text": "[resource: file:///notes/a.txt, application/pdf, 1 KiB]"}},
        {
            "type": "text",
            "data": {
                "text": "[resource link: report <https://example.com/report.pdf>, application/pdf: "
                "The quarter's report]"
            },
        },
    ]
    # Subako readers ignore a key they do not know: the structured content stays in every view.
    assert plain["structured"] == {"count": 3}
    (full,) = of_type(await listing(api, session, "extensions"), "tool_result")
    assert full["content"][1:] == [
        {"type": "audio", "data": {"media_type": "audio/wav", "data": WAV}},
        {"type": "resource", "data": {"uri": "file:///notes/a.txt", "media_type": "text/plain", "text": "the note"}},
        {"type": "resource", "data": {"uri": "file:///notes/a.txt", "media_type": "application/pdf", "blob": PIXEL}},
        {
            "type": "resource_link",
            "data": {
                "uri": "https://example.com/report.pdf",
                "name": "report",
                "description": "The quarter's report",
                "media_type": "application/pdf",
            },
        },
    ]
    async with api.stream(session, after_seq=0, include="extensions") as frames:
        while (event := await frames.event())["type"] != "tool_result":
            pass
    assert [block["type"] for block in event["content"]] == ["text", "audio", "resource", "resource", "resource_link"]
    async with api.stream(session, after_seq=0) as frames:
        while (event := await frames.event())["type"] != "tool_result":
            pass
    assert {block["type"] for block in event["content"]} == {"text"}


async def test_images_and_rich_blocks_are_asked_for_apart(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    await api.send(session, CALL)
    call_id = await dispatched_call(api, session)
    content = [{"type": "image", "media_type": "image/png", "data": PIXEL}, audio()]
    assert (await api.call(session, web["id"], call_id, "result", content=content)).status_code == 204
    await api.wait_for(session, run_over)
    kinds = {}
    for include in ("images", "extensions", "images,extensions"):
        (event,) = of_type(await listing(api, session, include), "tool_result")
        kinds[include] = [block["type"] for block in event["content"]]
    assert kinds == {
        "images": ["image", "text"],
        "extensions": ["text", "audio"],
        "images,extensions": ["image", "audio"],
    }


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"content": [audio("video/mp4")]}, "content[0].audio.media_type"),
        ({"content": [audio(data="not base64!")]}, "content[0].audio.data: String should match pattern"),
        ({"content": [audio(data=BIG)]}, "the limit is 5,242,880"),
        ({"content": [audio(), audio(data=HALF), resource(blob=HALF)]}, "the limit is 5,242,880"),
        ({"content": [{"type": "audio", "data": WAV}]}, "content[0].audio.media_type"),
        ({"content": [{"type": "audio", "media_type": "audio/wav", "mimeType": "audio/wav", "data": WAV}]}, "not both"),
        ({"content": [resource()]}, "one of the two"),
        ({"content": [resource(text="t", blob=PIXEL)]}, "one of the two"),
        ({"content": [resource(blob="%%%")]}, "content[0].resource.resource.blob"),
        ({"content": [resource(text=3)]}, "content[0].resource.resource.text"),
        ({"content": [resource(text="x" * 65_537)]}, "content[0].resource.resource.text"),
        ({"content": [{"type": "text", "text": "y" * 65_000}, resource(text="x" * 1_000)]}, "the limit is 65,536"),
        ({"content": [resource(text="t", media_type="not a type")]}, "content[0].resource.resource.media_type"),
        ({"content": [{"type": "resource", "resource": {"text": "t"}}]}, "content[0].resource.resource.uri"),
        ({"content": [{"type": "resource", "uri": "file:///a", "text": "t"}]}, "content[0].resource"),
        ({"content": [link(uri="javascript:alert(1)")]}, "the javascript: scheme is not taken"),
        ({"content": [link(uri="data:text/html,<b>x</b>")]}, "the data: scheme is not taken"),
        ({"content": [link(uri="no scheme here")]}, "content[0].resource_link.uri"),
        ({"content": [link(uri="https://example.com/" + "a" * 2_048)]}, "content[0].resource_link.uri"),
        ({"content": [link(name="n" * 257)]}, "content[0].resource_link.name"),
        ({"content": [link(description="d" * 2_001)]}, "content[0].resource_link.description"),
        ({"content": [link(name=7)]}, "content[0].resource_link.name"),
        ({"content": [link(size=10)]}, "content[0].resource_link.size"),
        ({"content": [{"type": "resource_link"}]}, "content[0].resource_link.uri"),
        ({"text": "t", "structured": [1, 2]}, "structured"),
        ({"text": "t", "structured": {"x": "y" * MAX_STRUCTURED_BYTES}}, "the limit is 65,536"),
    ],
)
async def test_bad_rich_content_is_refused_naming_the_field_and_nothing_is_recorded(
    api: Api, body: dict[str, Any], named: str
) -> None:
    await refused_result(api, body, named)


@pytest.mark.both_redis
async def test_an_mcp_caller_gets_each_content_type_as_mcp_content(api: Api) -> None:
    session = await api.session()
    web = await api.register(session, tools=[LOOKUP])
    async with mcp_client(api, session) as client:
        calling = asyncio.create_task(client.call_tool("client__web__lookup", {"word": "rich"}))
        (event,) = await dispatched(api, session)
        await api.call(session, web["id"], event["call_id"], "ack")
        answered = await api.call(
            session, web["id"], event["call_id"], "result", content=[*RICH, link()], structured={"count": 3}
        )
        assert answered.status_code == 204, answered.text
        result = await asyncio.wait_for(calling, 10)
    spoken, sound, note, blob, report, bare = result.content
    assert isinstance(spoken, mt.TextContent)
    assert isinstance(sound, mt.AudioContent)
    assert (sound.mime_type, sound.data) == ("audio/wav", WAV)
    assert isinstance(note, mt.EmbeddedResource)
    assert isinstance(note.resource, mt.TextResourceContents)
    assert (str(note.resource.uri), note.resource.mime_type, note.resource.text) == (
        "file:///notes/a.txt",
        "text/plain",
        "the note",
    )
    assert isinstance(blob, mt.EmbeddedResource)
    assert isinstance(blob.resource, mt.BlobResourceContents)
    assert (blob.resource.mime_type, blob.resource.blob) == ("application/pdf", PIXEL)
    assert isinstance(report, mt.ResourceLink)
    assert (str(report.uri), report.name, report.description, report.mime_type) == (
        "https://example.com/report.pdf",
        "report",
        "The quarter's report",
        "application/pdf",
    )
    # MCP's link needs a name: one the tool gave none is named by its URI.
    assert isinstance(bare, mt.ResourceLink)
    assert bare.name == "https://example.com/report.pdf"
    assert result.structured_content == {"count": 3}
    assert result.is_error is False

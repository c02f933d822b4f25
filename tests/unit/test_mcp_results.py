"""An MCP server's tools and results as Switchboard takes them: which tools a model is offered, and
each kind of content a result may hold."""

from __future__ import annotations

import base64
from typing import Any

import mcp.types as mt
import pytest

from common.codec import dumps
from common.events.blocks import MAX_STRUCTURED_BYTES
from common.events.build import MAX_IMAGE_BYTES, MAX_RESULT_BLOCKS, MAX_RESULT_CHARS
from tests.mcp_servers import PIXEL
from workers.mcp.hub import offered
from workers.mcp.listing import MAX_DESCRIPTION_CHARS, MAX_SCHEMA_CHARS
from workers.mcp.results import EMPTY_TEXT, map_result


def tool(name: str = "t", schema: dict[str, Any] | None = None, description: str = "d") -> mt.Tool:
    return mt.Tool(name=name, description=description, input_schema=schema or {"type": "object"})


@pytest.mark.parametrize("name", ["bad name", "", "x" * 129, "naïve", "a/b"])
def test_a_tool_whose_name_no_model_may_be_given_is_left_out(name: str) -> None:
    assert offered(tool(name), "server") is None


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/x"}}},
        {"$ref": "file:///etc/passwd"},
        {"type": "object", "properties": {"x": {"type": "string", "pattern": "(?<=a)b"}}},
        {"type": "object", "properties": {f"p{i}": {"description": "x" * 100} for i in range(MAX_SCHEMA_CHARS // 100)}},
    ],
)
def test_a_tool_whose_schema_may_not_be_stored_is_left_out(schema: dict[str, Any]) -> None:
    assert offered(tool(schema=schema), "server") is None


def test_an_ordinary_tool_is_offered_as_declared_its_description_cut() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": "^[a-z]+$"}}}
    found = offered(tool("search.v2", schema, "d" * (MAX_DESCRIPTION_CHARS + 10)), "server")
    assert found is not None
    assert (found.name, found.parameters) == ("search.v2", schema)
    assert len(found.description) == MAX_DESCRIPTION_CHARS


def result(*content: Any, structured: Any = None, error: bool = False) -> mt.CallToolResult:
    return mt.CallToolResult(content=list(content), structured_content=structured, is_error=error)


def text(value: str) -> mt.TextContent:
    return mt.TextContent(type="text", text=value)


def image(data: str = PIXEL, kind: str = "image/png") -> mt.ImageContent:
    return mt.ImageContent(type="image", data=data, mime_type=kind)


def test_text_and_images_pass_as_blocks_and_is_error_as_an_error() -> None:
    mapped = map_result(result(text("here"), image(), error=True))
    assert mapped.is_error is True
    assert mapped.blocks == [
        {"type": "text", "data": {"text": "here"}},
        {"type": "image", "data": {"media_type": "image/png", "data": PIXEL}},
    ]


@pytest.mark.parametrize(
    ("item", "says"),
    [
        (image(kind="image/bmp"), "left out: not PNG, JPEG, WebP or GIF"),
        (image(data="not base64!"), "its data is not base64"),
        (image(data=base64.b64encode(b"x" * (MAX_IMAGE_BYTES + 1)).decode()), "of images, audio and blobs a result"),
        (mt.AudioContent(type="audio", data="AAAA", mime_type="text/plain"), "left out: not an audio type"),
        (mt.AudioContent(type="audio", data="not base64!", mime_type="audio/wav"), "its data is not base64"),
        (
            mt.EmbeddedResource(type="resource", resource=mt.BlobResourceContents(uri="mem://b", blob="%%%")),
            "its data is not base64",
        ),
        (
            mt.ResourceLink(type="resource_link", uri="javascript:alert(1)", name="x"),
            "the javascript: scheme is not taken",
        ),
        (
            mt.EmbeddedResource(type="resource", resource=mt.TextResourceContents(uri="no scheme", text="t")),
            "not a URI with a scheme",
        ),
        (mt.ResourceLink(type="resource_link", uri="https://x/" + "a" * 3000, name="x"), "longer than 2,048"),
    ],
)
def test_content_that_cannot_be_taken_is_named_in_text(item: Any, says: str) -> None:
    (block,) = map_result(result(item)).blocks
    assert block["type"] == "text"
    assert says in block["data"]["text"]


def test_audio_resources_and_links_pass_as_their_own_blocks() -> None:
    mapped = map_result(
        result(
            mt.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
            mt.EmbeddedResource(
                type="resource",
                resource=mt.TextResourceContents(uri="mem://n", text="the note", mime_type="text/plain"),
            ),
            mt.EmbeddedResource(type="resource", resource=mt.BlobResourceContents(uri="mem://b", blob="AAAA")),
            mt.ResourceLink(type="resource_link", uri="file:///a.txt", name="a", description="A file"),
        )
    )
    assert mapped.blocks == [
        {"type": "audio", "data": {"media_type": "audio/wav", "data": "AAAA"}},
        {"type": "resource", "data": {"uri": "mem://n", "media_type": "text/plain", "text": "the note"}},
        {"type": "resource", "data": {"uri": "mem://b", "blob": "AAAA"}},
        {"type": "resource_link", "data": {"uri": "file:///a.txt", "name": "a", "description": "A file"}},
    ]


def test_binary_content_of_every_kind_shares_one_budget() -> None:
    half = base64.b64encode(b"x" * (MAX_IMAGE_BYTES // 2 + 1)).decode()
    mapped = map_result(
        result(
            mt.AudioContent(type="audio", data=half, mime_type="audio/wav"),
            mt.EmbeddedResource(type="resource", resource=mt.BlobResourceContents(uri="mem://b", blob=half)),
        )
    )
    assert [b["type"] for b in mapped.blocks] == ["audio", "text"]
    assert "of images, audio and blobs a result" in mapped.blocks[1]["data"]["text"]


def test_a_text_resource_counts_with_the_results_text() -> None:
    big = mt.TextResourceContents(uri="mem://n", text="x" * MAX_RESULT_CHARS)
    mapped = map_result(result(text("y" * 10), mt.EmbeddedResource(type="resource", resource=big)))
    kept = mapped.blocks[1]
    assert kept["type"] == "resource"
    assert len(kept["data"]["text"]) + 10 <= MAX_RESULT_CHARS
    assert kept["data"]["text"].endswith("characters]")


def test_structured_content_is_its_json_unless_a_text_block_holds_it() -> None:
    added = map_result(result(text("3"), structured={"result": 3}))
    assert [b["data"]["text"] for b in added.blocks] == ["3", '{"result":3}']
    held = map_result(result(text(dumps({"a": [1, 2]})), structured={"a": [1, 2]}))
    assert len(held.blocks) == 1
    assert (added.structured, held.structured) == ({"result": 3}, {"a": [1, 2]})


def test_structured_content_past_its_bound_is_left_out_and_said_so() -> None:
    mapped = map_result(result(text("t"), structured={"x": "y" * MAX_STRUCTURED_BYTES}))
    assert mapped.structured is None
    assert "structured content left out" in mapped.blocks[-1]["data"]["text"]


def test_an_empty_result_says_so() -> None:
    assert map_result(result()).blocks == [{"type": "text", "data": {"text": EMPTY_TEXT}}]


def test_a_result_is_held_to_a_clients_limits() -> None:
    many = map_result(result(*(text(str(i)) for i in range(MAX_RESULT_BLOCKS + 5))))
    assert len(many.blocks) == MAX_RESULT_BLOCKS
    assert "6 more content blocks left out" in many.blocks[-1]["data"]["text"]
    long = map_result(result(text("x" * (MAX_RESULT_CHARS * 2))))
    (block,) = long.blocks
    assert len(block["data"]["text"]) <= MAX_RESULT_CHARS
    assert block["data"]["text"].endswith("characters]")
    images = map_result(result(*(image() for _ in range(3))))
    assert [b["type"] for b in images.blocks] == ["image", "image", "image"]

"""A result's rich blocks (audio, resources, links) as text: the Subako view of a stored result, the doors'
text of a result, the console's, and the marks that find them without decoding."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from common.codec import loads
from common.events.blocks import as_text, audio_block, resource_block, resource_link_block, result_text, uri_problem
from common.events.build import image_block, text_block, tool_result_blocks
from common.events.catalogue import ToolResult
from common.events.marks import has_images, has_rich_blocks
from common.events.read import decode

WAV = "UklGRiQAAABXQVZFZm10IA=="
PIXEL = "iVBORw0KGgo="
BLOCKS = [
    text_block("here"),
    image_block("image/png", PIXEL),
    audio_block("audio/wav", WAV),
    resource_block("mem://n", "text/plain", text="the note"),
    resource_block("file:///a.zip", None, blob=WAV),
    resource_link_block("https://example.com/r", "report", "It", "application/pdf"),
]
WORDS = [
    "here",
    "[image/png, 1 KB]",
    "[audio: audio/wav, 1 KiB]",
    "[resource: mem://n, text/plain]\nthe note",
    "[resource: file:///a.zip, application/octet-stream, 1 KiB]",
    "[resource link: report <https://example.com/r>, application/pdf: It]",
]
TRANSCRIPT = Path(__file__).resolve().parents[2] / "api" / "static" / "transcript.js"


def stored(blocks: list[dict[str, object]], structured: dict[str, object] | None = None) -> bytes:
    body = tool_result_blocks("c1", blocks, is_error=False, structured=structured)
    return b'{"seq":7,"created_at":"2026-01-01T00:00:00Z",' + body[1:].encode()


def test_the_view_names_each_block_it_is_asked_to_and_keeps_the_rest() -> None:
    data = stored(BLOCKS, {"n": 1})
    assert has_images(data)
    assert has_rich_blocks(data)
    plain = loads(as_text(data, True, True))
    assert [block["data"]["text"] for block in plain["content"]] == WORDS
    assert (plain["seq"], plain["structured"]) == (7, {"n": 1})
    images_only = loads(as_text(data, True, False))
    assert [block["type"] for block in images_only["content"]] == ["text", "text", *(b["type"] for b in BLOCKS[2:])]
    rich_only = loads(as_text(data, False, True))
    assert [block["type"] for block in rich_only["content"]] == ["text", "image", "text", "text", "text", "text"]


def test_the_marks_find_rich_blocks_only_as_json_structure() -> None:
    assert not has_rich_blocks(stored([text_block('{"type":"audio"} is not a block')]))
    assert has_rich_blocks(stored([resource_link_block("https://x/y")]))
    assert not has_rich_blocks(stored([image_block("image/png", PIXEL)]))


def test_a_result_as_one_text_for_the_doors() -> None:
    event = decode(stored(BLOCKS))
    assert isinstance(event, ToolResult)
    assert result_text(event.content) == "\n".join(WORDS)


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("https://example.com/a", None),
        ("test://embedded-resource", None),
        ("file:///tmp/a.txt", None),
        ("JavaScript:alert(1)", "the javascript: scheme is not taken"),
        ("data:text/plain,hi", "the data: scheme is not taken"),
        ("vbscript:x", "the vbscript: scheme is not taken"),
        ("/relative/path", "not a URI with a scheme (no spaces or control characters)"),
        ("https://a b", "not a URI with a scheme (no spaces or control characters)"),
        ("https://a\nb", "not a URI with a scheme (no spaces or control characters)"),
        ("https://x/" + "a" * 2_048, "longer than 2,048 characters"),
    ],
)
def test_which_uris_are_taken(uri: str, problem: str | None) -> None:
    assert uri_problem(uri) == problem


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js (node on PATH), which .ci/run installs")
def test_the_console_names_each_block_as_the_server_does() -> None:
    script = (
        f"import {{ blockText }} from {json.dumps(TRANSCRIPT.as_uri())};"
        f"console.log(JSON.stringify({json.dumps(BLOCKS)}.map(blockText)));"
    )
    printed = subprocess.run(
        ["node", "--input-type=module", "-e", script], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    # The console shows an image as an image, not as text.
    assert json.loads(printed) == [WORDS[0], None, *WORDS[2:]]

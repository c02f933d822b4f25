"""A tool result with MCP's other content types as each model format is given it: what the wire carries goes
as itself (images; PDFs where a function result takes documents), the rest as a text placeholder naming it."""

from __future__ import annotations

import base64
from typing import Any

from common.codec import dumps
from common.events.blocks import audio_block, resource_block, resource_link_block
from common.events.build import image_block, message_assistant, text_block, tool_call_block, tool_result_blocks
from common.events.read import decode_known
from workers.models.aliases import Aliases
from workers.models.anthropic_messages import to_messages as anthropic_messages
from workers.models.base import Message, ModelRequest
from workers.models.gemini_wire import to_contents
from workers.models.openai_chat import to_messages as chat_messages
from workers.models.openai_responses import to_input
from workers.models.scripted import ScriptedModel
from workers.transcript import fold

PIXEL = base64.b64encode(b"\x89PNG not really").decode()
WAV = base64.b64encode(b"RIFF" + b"\x00" * 12_000).decode()
PDF = base64.b64encode(b"%PDF-1.7 " + b"x" * 3_000).decode()
ZIP = base64.b64encode(b"PK" + b"\x00" * 2_000).decode()
NAME = "client__web__fetch"
ALIASES = Aliases([NAME])

AUDIO = "[audio: audio/wav, 12 KiB, not shown to this model]"
NOTE = "[resource: mem://notes/1, text/plain]\nthe note"
ZIPPED = "[resource: file:///a.zip, application/zip, 2 KiB, not shown to this model]"
LINK = "[resource link: report <https://example.com/r.pdf>: The report]"
PDF_UNSEEN = "[resource: file:///r.pdf, application/pdf, 3 KiB, not shown to this model]"


def transcript() -> list[Message]:
    """A user asks, the model calls a tool, the tool answers with every kind of block."""
    blocks = [
        text_block("fetched"),
        image_block("image/png", PIXEL),
        audio_block("audio/wav", WAV),
        resource_block("mem://notes/1", "text/plain", text="the note"),
        resource_block("file:///r.pdf", "application/pdf", blob=PDF),
        resource_block("file:///a.zip", "application/zip", blob=ZIP),
        resource_link_block("https://example.com/r.pdf", "report", "The report"),
    ]
    events = [
        dumps({"type": "message_user", "message": {"role": "user", "content": [text_block("go")]}, "source": "client"}),
        message_assistant([tool_call_block("call_1", NAME, {})], "m"),
        tool_result_blocks("call_1", blocks, is_error=False, structured={"n": 1}),
    ]
    messages = []
    for raw in events:
        event = decode_known(raw.encode())
        assert event is not None
        message = fold(event)
        assert message is not None
        messages.append(message)
    return messages


def request(text_only: bool = False, documents: bool = False) -> list[Message]:
    return ModelRequest(config=None, transcript=transcript(), tools=[]).transcript_for(  # type: ignore[arg-type]
        text_only, documents
    )


def placeholders(text: str, *, pdf: bool) -> None:
    for expected in (AUDIO, NOTE, ZIPPED, LINK):
        assert expected in text
    assert (PDF_UNSEEN in text) is pdf
    # No bytes a wire cannot carry reach it inside the text.
    assert WAV not in text
    assert ZIP not in text


def test_the_folded_result_names_what_no_wire_carries_and_keeps_images_and_pdfs_apart() -> None:
    result = transcript()[-1].result
    assert result is not None
    assert result.text.splitlines()[0] == "fetched"
    placeholders(result.text, pdf=False)
    assert result.images == (("image/png", PIXEL),)
    assert result.documents == (("file:///r.pdf", PDF),)


def test_anthropic_gets_the_image_and_the_pdf_as_blocks_and_the_rest_as_text() -> None:
    turns = anthropic_messages(request(documents=True), ALIASES)
    (result,) = turns[-1]["content"]
    text, image, document = result["content"]
    placeholders(text["text"], pdf=False)
    assert image["source"]["data"] == PIXEL
    assert document == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
        "title": "file:///r.pdf",
    }


def test_openai_responses_gets_the_image_and_the_pdf_as_input_items_and_the_rest_as_text() -> None:
    output = to_input(request(documents=True), ALIASES)[-1]["output"]
    text, image, document = output
    placeholders(text["text"], pdf=False)
    assert image == {"type": "input_image", "image_url": f"data:image/png;base64,{PIXEL}"}
    assert document == {"type": "input_file", "filename": "r.pdf", "file_data": f"data:application/pdf;base64,{PDF}"}


def test_openai_chat_gets_text_in_the_tool_message_the_image_after_it_and_the_pdf_named() -> None:
    messages = chat_messages(request(), ALIASES, None)
    tool, images = messages[-2:]
    assert tool["role"] == "tool"
    placeholders(tool["content"], pdf=True)
    assert PDF not in tool["content"]
    assert images["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}}


def test_gemini_gets_the_image_in_the_function_response_and_the_rest_as_text() -> None:
    contents = to_contents(request(), ALIASES)
    (part,) = contents[-1].parts or []
    response = part.function_response
    assert response is not None
    assert response.response is not None
    placeholders(response.response["output"], pdf=True)
    assert [p.inline_data.mime_type for p in response.parts or [] if p.inline_data] == ["image/png"]


def test_a_text_only_provider_gets_every_block_as_text() -> None:
    (result,) = anthropic_messages(request(text_only=True, documents=True), ALIASES)[-1]["content"]
    assert isinstance(result["content"], str)
    placeholders(result["content"], pdf=True)
    assert "[image/png, 1 KB]" in result["content"]
    assert PIXEL not in result["content"]
    assert PDF not in result["content"]


class _Sink:
    def text(self, piece: str) -> None:
        return None

    def reasoning(self, piece: str) -> None:
        return None

    def tool_input(self, index: int, call_id: str, name: str, piece: str) -> None:
        return None

    def restart(self) -> None:
        return None


async def test_the_scripted_model_answers_with_the_placeholders() -> None:
    turn = await ScriptedModel().turn(ModelRequest(config=None, transcript=transcript(), tools=[]), _Sink())  # type: ignore[arg-type]
    (block,) = turn.content
    text: Any = block["data"]["text"]
    assert text.startswith(f"{NAME}: fetched")
    placeholders(text, pdf=True)

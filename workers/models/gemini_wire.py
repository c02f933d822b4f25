"""The conversation as Gemini `Content`s, thought signatures back on the parts they came with."""

from __future__ import annotations

import base64
import binascii

from google.genai import types

from common.events.catalogue import TextBlock, ThinkingBlock, ToolCallBlock
from workers.models.aliases import Aliases
from workers.models.base import Message, ToolOutcome

# The prefix of a call id this adapter made for a call the model sent without one: never sent back (the
# API matches such calls and their responses by name and order).
MADE_ID = "gemini_call_"


def signature_text(raw: bytes | None) -> str | None:
    """A thought signature as the turn keeps it: its bytes in base64, as the wire had them."""
    return base64.b64encode(raw).decode("ascii") if raw else None


def _signature_bytes(text: object) -> bytes | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        return None


def _sent_id(call_id: str) -> str | None:
    return None if call_id.startswith(MADE_ID) else call_id


def _model_parts(message: Message, aliases: Aliases) -> list[types.Part]:
    """An assistant turn's blocks as model parts. A thinking block with no text but a signature holds
    the signature of the text or call block after it (see gemini.py); with none after it, it goes back as
    the empty text part it came on."""
    parts: list[types.Part] = []
    pending: bytes | None = None

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            parts.append(types.Part(text="", thought_signature=pending))
            pending = None

    for block in message.content:
        if isinstance(block, ThinkingBlock) and not block.data.redacted:
            signature = _signature_bytes(block.data.signature)
            flush()
            if block.data.thinking:
                parts.append(types.Part(text=block.data.thinking, thought=True, thought_signature=signature))
            else:
                pending = signature
        elif isinstance(block, TextBlock) and block.data.text:
            parts.append(types.Part(text=block.data.text, thought_signature=pending))
            pending = None
        elif isinstance(block, ToolCallBlock):
            call = block.data
            function = types.FunctionCall(id=_sent_id(call.id), name=aliases.outward(call.name), args=call.arguments)
            parts.append(types.Part(function_call=function, thought_signature=pending))
            pending = None
    flush()
    return parts


def _response_part(result: ToolOutcome, name: str) -> types.Part:
    text, images = result.text, result.images
    # The images go in the function response's own parts (multimodal function responses), so the model
    # sees them as what the call returned; an inline_data part beside the response would read as the
    # user's.
    inline = [
        types.FunctionResponsePart(
            inline_data=types.FunctionResponseBlob(mime_type=media_type, data=base64.b64decode(data))
        )
        for media_type, data in images
    ]
    response = types.FunctionResponse(
        id=_sent_id(result.call_id),
        name=name,
        response={"error": text} if result.is_error else {"output": text},
        parts=inline or None,
    )
    return types.Part(function_response=response)


def to_contents(transcript: list[Message], aliases: Aliases) -> list[types.Content]:
    """The conversation as Gemini contents: roles alternate (user, model), tool results ride in user
    contents as function responses."""
    contents: list[types.Content] = []
    # A response names its call's function: the calls' names by id, as the model saw them.
    names: dict[str, str] = {}

    def add(role: str, parts: list[types.Part]) -> None:
        if not parts:
            return
        last = contents[-1] if contents else None
        if last is not None and last.role == role and last.parts is not None:
            last.parts.extend(parts)
        else:
            contents.append(types.Content(role=role, parts=parts))

    for message in transcript:
        if message.role == "user" and message.text:
            add("user", [types.Part(text=message.text)])
        elif message.role == "assistant":
            for block in message.content:
                if isinstance(block, ToolCallBlock):
                    names[block.data.id] = aliases.outward(block.data.name)
            add("model", _model_parts(message, aliases))
        elif message.role == "tool" and message.result is not None:
            result = message.result
            add("user", [_response_part(result, names.get(result.call_id, "unknown"))])
    return contents

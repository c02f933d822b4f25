"""A tool result's rich blocks (audio, embedded resources, resource links: MCP's content types beside text
and images) in the event form, their bounds, and the text that names one where it cannot go as it is.

Every path that writes a tool result checks against the same bounds (a client's result route, an MCP
server a grant reaches, the `switchboard tools mcp` bridge), and every reader that cannot take a block
(the Subako view, a model's wire, a door) is given the same words for it.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from functools import lru_cache

import msgspec

from common.events.build import Block, image_text
from common.events.catalogue import (
    AudioBlock,
    ImageBlock,
    MessageBlock,
    ResourceBlock,
    ResourceLinkBlock,
    ResultBlock,
    TextBlock,
    TextData,
    ToolResult,
)
from common.events.read import decode, encode

# A result's `structured` object (MCP's structuredContent), as JSON.
MAX_STRUCTURED_BYTES = 65_536
MAX_URI_CHARS = 2_048
MAX_NAME_CHARS = 256
MAX_DESCRIPTION_CHARS = 2_000
MAX_MEDIA_TYPE_CHARS = 127
# A media type as RFC 6838 writes one (`type/subtype`), no parameters.
MEDIA_TYPE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,62}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,62}$"
AUDIO_TYPE_PATTERN = r"^audio/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,62}$"
# A URI with a scheme and no whitespace or control characters (RFC 3986's scheme; the rest is the
# tool's business, as MCP leaves it).
URI_PATTERN = r"^[A-Za-z][A-Za-z0-9+.-]{0,31}:[^\s\x00-\x1f\x7f]+$"
# Schemes a console or door would run or inline when it shows the link: never taken.
REFUSED_SCHEMES = frozenset({"javascript", "vbscript", "data"})
# The two as one pattern, for a document (JSON Schema's regexes have no flag for case, so each letter
# names both of its cases).
URI_DOCUMENT_PATTERN = (
    "^(?!(?:"
    + "|".join("".join(f"[{c.upper()}{c}]" for c in scheme) for scheme in sorted(REFUSED_SCHEMES))
    + "):)"
    + URI_PATTERN[1:]
)

_URI = re.compile(URI_PATTERN)
_MEDIA_TYPE = re.compile(MEDIA_TYPE_PATTERN)
_AUDIO_TYPE = re.compile(AUDIO_TYPE_PATTERN)
RICH = (AudioBlock, ResourceBlock, ResourceLinkBlock)


def uri_problem(uri: str) -> str | None:
    """Why `uri` is not taken (None: it is)."""
    if len(uri) > MAX_URI_CHARS:
        return f"longer than {MAX_URI_CHARS:,} characters"
    if not _URI.match(uri):
        return "not a URI with a scheme (no spaces or control characters)"
    if uri.split(":", 1)[0].lower() in REFUSED_SCHEMES:
        return f"the {uri.split(':', 1)[0].lower()}: scheme is not taken"
    return None


def media_type_ok(media_type: str, *, audio: bool = False) -> bool:
    return bool((_AUDIO_TYPE if audio else _MEDIA_TYPE).match(media_type))


def decoded_size(data: str) -> int | None:
    """The bytes of standard, padded base64 (None: it is not)."""
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None


def audio_block(media_type: str, data: str) -> Block:
    return {"type": "audio", "data": {"media_type": media_type, "data": data}}


def resource_block(uri: str, media_type: str | None, *, text: str | None = None, blob: str | None = None) -> Block:
    data: dict[str, str] = {"uri": uri}
    if media_type is not None:
        data["media_type"] = media_type
    if text is not None:
        data["text"] = text
    if blob is not None:
        data["blob"] = blob
    return {"type": "resource", "data": data}


def resource_link_block(
    uri: str, name: str | None = None, description: str | None = None, media_type: str | None = None
) -> Block:
    data = {"uri": uri, "name": name, "description": description, "media_type": media_type}
    return {"type": "resource_link", "data": {k: v for k, v in data.items() if v is not None}}


def _kib(base64_chars: int) -> str:
    return f"{max(1, round(base64_chars * 3 / 4 / 1024))} KiB"


def describe(block: AudioBlock | ResourceBlock | ResourceLinkBlock, *, unseen: str = "") -> str:
    """The words for a rich block where only text goes: `[audio: audio/wav, 12 KiB]`; `unseen` is added
    where the block's bytes are left out (`not shown to this model`). An embedded text resource keeps its
    text after the line naming it; a link names its target."""
    tail = f", {unseen}" if unseen else ""
    if isinstance(block, AudioBlock):
        return f"[audio: {block.data.media_type}, {_kib(len(block.data.data))}{tail}]"
    if isinstance(block, ResourceBlock):
        data = block.data
        kind = data.media_type if isinstance(data.media_type, str) else None
        if isinstance(data.text, str):
            return f"[resource: {data.uri}{f', {kind}' if kind else ''}]\n{data.text}"
        size = _kib(len(data.blob)) if isinstance(data.blob, str) else "0 KiB"
        return f"[resource: {data.uri}, {kind or 'application/octet-stream'}, {size}{tail}]"
    link = block.data
    named = f"{link.name} " if isinstance(link.name, str) else ""
    kind = f", {link.media_type}" if isinstance(link.media_type, str) else ""
    about = f": {link.description}" if isinstance(link.description, str) else ""
    return f"[resource link: {named}<{link.uri}>{kind}{about}]"


# What goes to a model's wire as a document beside a call's output (the wires that take one take PDFs).
DOCUMENT_TYPE = "application/pdf"
UNSEEN = "not shown to this model"


def document_text(uri: str, data: str) -> str:
    """The placeholder of a PDF a model's wire does not take."""
    return f"[resource: {uri}, {DOCUMENT_TYPE}, {_kib(len(data))}, {UNSEEN}]"


def result_text(content: Sequence[ResultBlock | MessageBlock], *, unseen: str = "") -> str:
    """A result's blocks as one text: text blocks as they are, each other block as the words naming it
    (an image as `[image/png, 48 KB]`), one to a line."""
    parts = []
    for block in content:
        if isinstance(block, TextBlock):
            parts.append(block.data.text)
        elif isinstance(block, ImageBlock):
            parts.append(image_text(block.data.media_type, block.data.data))
        elif isinstance(block, RICH):
            parts.append(describe(block, unseen=unseen))
    return "\n".join(parts)


# Made once per event and view, not once per reader (as build.without_images was): every stream of a session
# gets the same bytes from the hub.
@lru_cache(maxsize=16)
def as_text(data: bytes, images: bool, rich: bool) -> bytes:
    """The stored tool result with its image blocks (`images`) and its rich blocks (`rich`) each replaced by
    a text block naming it: the view the Subako SDK can read. Any other event is returned as it is."""
    event = decode(data)
    if not isinstance(event, ToolResult):
        return data
    content: list[ResultBlock] = []
    for block in event.content:
        if images and isinstance(block, ImageBlock):
            content.append(TextBlock(TextData(image_text(block.data.media_type, block.data.data))))
        elif rich and isinstance(block, RICH):
            content.append(TextBlock(TextData(describe(block))))
        else:
            content.append(block)
    body = encode(msgspec.structs.replace(event, content=content, seq=0, created_at=""))
    # The log's own prefix (`{"seq":N,"created_at":"...",`) goes back in front, as the log spliced it.
    return data[: data.index(b'"type"')] + body[1:].encode()

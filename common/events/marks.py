"""Byte marks that pick events out of a stream without decoding them, derived from the catalogue at import.

Every reader asks of every event whether to show it, so the question is answered on the bytes. They are
reliable because every body is written in the catalogue's order (common/events/generate checks the builders,
tests/broker/test_event_bodies.py what the scripts store): `{"type":"<type>",<fields in declared order>}`, to
which the log splices `{"seq":N,"created_at":"...",` in front. So a type, or a type with the value of its
first field, is fixed bytes within a known distance of the start, and a quote inside a JSON string is
escaped, so no string's content can forge a mark.
"""

from __future__ import annotations

from functools import cache

import msgspec

from common.events.catalogue import (
    EVENTS,
    AudioBlock,
    Custom,
    Event,
    ImageBlock,
    MessageDelta,
    Record,
    ResourceBlock,
    ResourceLinkBlock,
    ThinkingDelta,
    ToolResult,
    type_name,
)


def _json(value: object) -> bytes:
    return msgspec.json.encode(value)


def _wire_name(cls: type[msgspec.Struct], field: str) -> str:
    return cls.__struct_encode_fields__[cls.__struct_fields__.index(field)]


# A stored event starts with its seq; a live frame (a delta) with its type.
LOGGED_PREFIX = b'{"' + _wire_name(Event, "seq").encode() + b'":'
# The longest prefix the log splices in front of a body: a seq of 19 digits, an RFC 3339 time of 27
# characters (lib/core.lua sb_iso).
_HEAD = len(LOGGED_PREFIX) + 19 + len(b',"created_at":"') + 27 + len(b'",')


@cache
def type_mark(cls: type[Record]) -> bytes:
    """The bytes that say an event (or a block) is of type `cls`: `"type":"tool_result"`."""
    return b'"type":' + _json(type_name(cls))


def first_field_mark(cls: type[Event], field: str, value: object) -> bytes:
    """The bytes of an event of type `cls` whose first field `field` has `value`:
    `"type":"custom","kind":"timing"`. Only the first declared field follows the type at a fixed place, so
    naming another is an error, raised at import where a mark is made."""
    own = [name for name in cls.__struct_fields__ if name not in Event.__struct_fields__]
    if own[:1] != [field]:
        raise ValueError(f"{cls.__name__}.{field} is not the first declared field ({own[:1]}): no fixed mark")
    return type_mark(cls) + b',"' + _wire_name(cls, field).encode() + b'":' + _json(value)


def in_head(data: bytes, mark: bytes) -> bool:
    """Whether a stored or live event starts with `mark` where a type (and its first field) stands."""
    return mark in data[: _HEAD + len(mark)]


def of_type(data: bytes, cls: type[Event]) -> bool:
    """Whether a stored or live event is of type `cls` (api/mcp/outcome.py matches results by it)."""
    return in_head(data, type_mark(cls))


def is_logged(data: bytes) -> bool:
    """A logged event (it carries a seq), as opposed to a live extra such as a text delta."""
    return data.startswith(LOGGED_PREFIX)


def event_seq(data: bytes) -> int:
    """The seq of a stored event, read from the prefix every stored event starts with (`{"seq":N,`)."""
    start = len(LOGGED_PREFIX)
    return int(data[start : data.index(b",", start)])


# The matchers below run for every event and every reader: their marks and windows are made once.
_TIMING = first_field_mark(Custom, "kind", "timing")
_TIMING_END = _HEAD + len(_TIMING)


def is_timing(data: bytes) -> bool:
    """A run or step timing event: logged, but shown only to readers that ask (`?include=timing`)."""
    return _TIMING in data[:_TIMING_END]


def _logged_marks(word: str) -> tuple[tuple[bytes, ...], int]:
    """The marks of every logged type shown only with `?include=<word>`, and the window that holds any."""
    marks = tuple(type_mark(cls) for cls in EVENTS if cls.shown.logged and cls.shown.include == word)
    return marks, _HEAD + max(map(len, marks))


_PROGRESS, _PROGRESS_END = _logged_marks("progress")
_EXTENSIONS, _EXTENSIONS_END = _logged_marks("extensions")


def _any_mark(head: bytes, marks: tuple[bytes, ...]) -> bool:
    # A loop, not any() over a generator: this runs for every event and reader, and costs a third as much.
    for mark in marks:  # noqa: SIM110
        if mark in head:
            return True
    return False


def is_progress(data: bytes) -> bool:
    """Progress on a call (a client's, or an MCP server's): logged, but shown only to readers that ask
    (`?include=progress`)."""
    return _any_mark(data[:_PROGRESS_END], _PROGRESS)


def is_extension(data: bytes) -> bool:
    """A logged event of a type the Subako SDK does not know and no other word names (a call waiting for
    its client): shown only to readers that ask (`?include=extensions`)."""
    return _any_mark(data[:_EXTENSIONS_END], _EXTENSIONS)


_TOOL_RESULT = type_mark(ToolResult)
_TOOL_RESULT_END = _HEAD + len(_TOOL_RESULT)
_IMAGE = type_mark(ImageBlock)


def has_images(data: bytes) -> bool:
    """A stored event carrying image blocks (a client's result). Only a tool result's bytes are searched;
    they hold `"type":"image"` only as JSON structure."""
    return _TOOL_RESULT in data[:_TOOL_RESULT_END] and _IMAGE in data


_RICH = tuple(type_mark(cls) for cls in (AudioBlock, ResourceBlock, ResourceLinkBlock))


def has_rich_blocks(data: bytes) -> bool:
    """A stored tool result carrying audio, resource or resource link blocks (an extension of the Subako
    wire: shown as they are only to readers that ask, `?include=extensions`)."""
    return _TOOL_RESULT in data[:_TOOL_RESULT_END] and any(mark in data for mark in _RICH)


def _include(cls: type[Event]) -> str:
    word = cls.shown.include
    if word is None:
        raise ValueError(f"{cls.__name__} is shown to every reader: no word of ?include= names it")
    return word


_DELTAS = _include(MessageDelta)
_THINKING = _include(ThinkingDelta)
_THINKING_DELTA = b"{" + type_mark(ThinkingDelta)


def extra_shown(item: bytes, include: frozenset[str]) -> bool:
    """Whether a live extra (a delta) goes to a reader: one that asked for `deltas`, and for a
    `thinking_delta` (what the model reasons, as it streams) one that asked for `thinking` too."""
    return _DELTAS in include and (_THINKING in include or not item.startswith(_THINKING_DELTA))

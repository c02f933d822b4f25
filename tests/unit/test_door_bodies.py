"""The front doors read a body only as far as they use it (api/doors/bodies.py): every bound is a 400
naming the field and the limit, every field a door reads is checked, and what it does not read is not."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeAlias

import msgspec
import pytest

from api.doors import ag_ui_input, ai_sdk
from api.doors.ag_ui_input import MAX_CONTEXT, MAX_TAIL, MAX_TOOL_CALLS
from api.doors.answers import MAX_ANSWERS
from api.doors.bodies import MAX_MESSAGES, MAX_PARTS, Bounded, bounded, decode
from api.schemas.clients import MAX_TOOLS
from broker.errors import InvalidRequest

USER = {"id": "u1", "role": "user", "content": "hi"}
UI_USER = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}


def _run_input(*messages: Any, **extra: Any) -> bytes:
    return json.dumps({"threadId": "t", "runId": "r", "messages": list(messages), **extra}).encode()


def _chat(*messages: Any, **extra: Any) -> bytes:
    return json.dumps({"id": "c", "messages": list(messages), **extra}).encode()


def _assistant(*calls: str) -> dict[str, Any]:
    tool_calls = [{"id": c, "type": "function", "function": {"name": "pick", "arguments": "{}"}} for c in calls]
    return {"id": "run.0", "role": "assistant", "toolCalls": tool_calls}


def _tool(call_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": f"t-{call_id}", "role": "tool", "toolCallId": call_id, "content": "ok", **extra}


def _refusal(read: Any, body: bytes) -> str:
    with pytest.raises(InvalidRequest) as refused:
        read(body)
    return refused.value.message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "body: invalid JSON at line 1"),
        (json.dumps({"runId": "r", "messages": []}).encode(), "threadId: required"),
        (_run_input(USER, runId=5), "runId: Expected `str`, got `int`"),
        (json.dumps({"threadId": "t", "runId": "r", "messages": {}}).encode(), "messages: Expected `array`"),
        (_run_input(*[USER] * (MAX_MESSAGES + 1)), f"messages: more than {MAX_MESSAGES:,} items; the limit is 4,096"),
        (_run_input(*[USER] * (MAX_TAIL + 1)), f"more than {MAX_TAIL} messages after the newest assistant message"),
        (
            _run_input(_assistant("c"), *[_tool(f"c{n}") for n in range(MAX_ANSWERS + 1)]),
            f"more than {MAX_ANSWERS} tool results after the newest assistant message; the limit is {MAX_ANSWERS}",
        ),
        (
            _run_input(_assistant(*[f"c{n}" for n in range(MAX_TOOL_CALLS + 1)])),
            "messages.0.toolCalls: more than 1,024",
        ),
        (
            _run_input({"id": "u", "role": "user", "content": [{"type": "text", "text": "x"}] * (MAX_PARTS + 1)}),
            f"messages.0.content: more than {MAX_PARTS:,} items",
        ),
        (_run_input(USER, context=[{"description": "d", "value": "v"}] * (MAX_CONTEXT + 1)), "context: more than 256"),
        (
            _run_input(USER, resume=[{"interruptId": "i", "status": "resolved"}] * (MAX_ANSWERS + 1)),
            "resume: more than",
        ),
        (_run_input(USER, tools=[{"name": "t", "description": "d"}] * (MAX_TOOLS + 1)), "tools: more than 64 items"),
        (_run_input(USER, _tool("c", toolCallId=None)), "messages.1.toolCallId: required for a message of role 'tool'"),
        (_run_input({"role": "user", "content": "hi"}), "messages.0.id: required"),
        (_run_input({"id": "u", "content": "hi"}), "messages.0.role: required"),
        (_run_input(USER, {"id": "x", "role": "tool", "toolCallId": 7, "content": "x"}), "messages.1.toolCallId"),
        (_run_input(USER, tools=[{"name": "t"}]), "tools.0.description: required"),
        (_run_input(USER, resume=[{"interruptId": "i", "status": "maybe"}]), "resume.0.status"),
    ],
)
def test_ag_ui_refusals_name_the_field_and_the_limit(body: bytes, message: str) -> None:
    assert message in _refusal(ag_ui_input.read, body)


def test_ag_ui_reads_only_the_conversations_end() -> None:
    # Before the newest assistant message anything goes: the door never reads it.
    older = [{"role": "tool"}, 17, {"id": "x", "role": "unknown", "content": {"a": [1, 2]}}]
    run = ag_ui_input.read(_run_input(*older, _assistant("c1", "c2"), _tool("c1"), USER, state={"big": [0] * 1000}))
    assert (run.thread_id, run.run_id) == ("t", "r")
    turn = run.turn
    assert (turn.message_id, turn.text) == ("u1", "hi")
    assert [call_id for call_id, _ in turn.results] == ["c1"]
    assert turn.known == {"c1": "pick", "c2": "pick"}
    assert turn.have == frozenset({"c1"})
    assert turn.seen == ("run", 0)


def test_ag_ui_reads_parts_only_where_it_uses_them() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    skipped = {"id": "s", "role": "user", "content": [{"no": "parts"}] * 10}
    run = ag_ui_input.read(_run_input(skipped, {"id": "u", "role": "user", "content": parts}))
    assert run.turn.text == "a\nb"
    image = {"type": "image", "source": {"type": "url", "value": "http://x/y.png"}}
    refused = _refusal(ag_ui_input.read, _run_input({"id": "u", "role": "user", "content": [image]}))
    assert refused == "messages.0.content.0: only text parts are taken as input"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"id": "c", "messages": [', "body: invalid JSON at line 1"),
        (b"[1, 2]", "body: Expected `object`, got `array`"),
        (json.dumps({"messages": []}).encode(), "id: required"),
        (json.dumps({"id": "c" * 257, "messages": []}).encode(), "id: Expected `str` of length <= 256"),
        (_chat(*[UI_USER] * (MAX_MESSAGES + 1)), f"messages: more than {MAX_MESSAGES:,} items"),
        (
            _chat(UI_USER, {"id": "a", "role": "assistant", "parts": [{"type": "step-start"}] * (MAX_PARTS + 1)}),
            f"messages.1.parts: more than {MAX_PARTS:,} items; the limit is {MAX_PARTS:,}",
        ),
        (_chat(UI_USER, tools=[{"name": "t"}] * (MAX_TOOLS + 1)), "tools: more than 64 items"),
        (_chat(UI_USER, tools=[{"name": "t", "extra": 1}]), "tools.0.extra: not a field it takes"),
        (_chat({"id": "u", "role": "user", "parts": [{"type": "text", "text": 5}]}), "messages.0.parts.0.text"),
    ],
)
def test_ai_sdk_refusals_name_the_field_and_the_limit(body: bytes, message: str) -> None:
    assert message in _refusal(ai_sdk.read, body)


def test_ai_sdk_reads_only_the_newest_message() -> None:
    older = [{"parts": 17}, {"id": 5}]
    turn, continues = ai_sdk.read(_chat(*older, UI_USER, transport={"anything": [1, 2, 3]}))
    assert (turn.message_id, turn.text, continues) == ("u1", "hi", None)


def test_a_bounded_list_keeps_every_item_it_holds_explicit_nulls_included() -> None:
    kind = bounded(4)
    assert [bytes(item) for item in msgspec.json.decode(b"[null, 1, {}]", type=kind).items()] == [b"null", b"1", b"{}"]
    assert msgspec.json.decode(b"[]", type=kind).items() == []
    assert len(msgspec.json.decode(b"[1, 2, 3, 4]", type=kind).items()) == 4
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(b"[1, 2, 3, 4, 5]", type=kind)


if TYPE_CHECKING:
    _Two: TypeAlias = Bounded
else:
    _Two = bounded(2)


class _Twins(msgspec.Struct, rename="camel"):
    """Two lists of one bound (no door has such a pair yet)."""

    first_list: _Two
    second_list: _Two | None = None


@pytest.mark.parametrize("field", ["firstList", "secondList"])
def test_a_list_past_its_bound_is_named_as_itself_when_another_has_the_same_bound(field: str) -> None:
    body = json.dumps({"firstList": [1], "secondList": [2], field: [1, 2, 3]}).encode()
    with pytest.raises(InvalidRequest) as refused:
        decode(body, _Twins, "messages.3")
    assert refused.value.message == f"messages.3.{field}: more than 2 items; the limit is 2"

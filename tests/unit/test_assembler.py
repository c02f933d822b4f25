"""The one assembler every model adapter feeds (workers/models/assembler.py): parts by key or in a run,
calls by key or whole, what it streams, and the step's bounds counted on what it keeps."""

from __future__ import annotations

from typing import Any

import pytest

from workers.models.aliases import Aliases
from workers.models.assembler import Assembler
from workers.models.base import StreamLimits, Usage
from workers.models.bounds import StreamBoundPassed, Tally

LONG = "client__" + "x" * 80


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def text(self, piece: str) -> None:
        self.seen.append(("text", piece))

    def reasoning(self, piece: str) -> None:
        self.seen.append(("reasoning", piece))

    def tool_input(self, index: int, call_id: str, name: str, piece: str) -> None:
        self.seen.append(("tool_input", index, call_id, name, piece))

    def restart(self) -> None:
        self.seen.append(("restart",))


def assembler(limits: StreamLimits | None = None, **options: Any) -> tuple[Assembler, Recorder]:
    sink = Recorder()
    return Assembler(Tally(limits or StreamLimits()), Aliases([LONG]), sink, **options), sink


def test_keyed_parts_join_their_pieces_in_the_order_they_opened_and_stream_as_they_come() -> None:
    built, sink = assembler()
    alias = Aliases([LONG]).outward(LONG)
    built.reasoning("let me ", 0, signature="")
    built.text("", 1)
    built.call(2, call_id="toolu_1", name=alias)
    built.reasoning("think", 0)
    built.reasoning("", 0, signature="c2ln")
    built.text("Hello", 1)
    built.call(2, arguments='{"a"')
    built.call(2, arguments=": 1}")
    built.model("m-1")
    built.usage(Usage(input_tokens=3))
    built.usage(None)
    turn = built.turn()
    assert turn.content == [
        {"type": "thinking", "data": {"thinking": "let me think", "redacted": False, "signature": "c2ln"}},
        {"type": "text", "data": {"text": "Hello"}},
        {"type": "tool_call", "data": {"id": "toolu_1", "name": LONG, "arguments": {"a": 1}}},
    ]
    assert [(c.call_id, c.name, c.arguments, c.invalid) for c in turn.calls] == [("toolu_1", LONG, {"a": 1}, "")]
    assert (turn.model, turn.usage) == ("m-1", Usage(input_tokens=3))
    assert sink.seen == [
        ("reasoning", "let me "),
        ("reasoning", "think"),
        ("text", "Hello"),
        ("tool_input", 0, "toolu_1", LONG, '{"a"'),
        ("tool_input", 0, "toolu_1", LONG, ": 1}"),
    ]


def test_grouped_blocks_are_reasoning_then_text_then_calls_whatever_came_first() -> None:
    built, _ = assembler(grouped=True)
    built.call(0, name="t")
    built.text("answer", "content")
    built.reasoning("why", "reasoning")
    built.text(" more", "content")
    assert [block["type"] for block in built.turn().content] == ["thinking", "text", "tool_call"]


def test_unkeyed_pieces_continue_a_run_of_their_kind_and_a_signature_starts_a_block() -> None:
    # Gemini's parts: a thought, more of it, a signed thought, text, a signed text part, more text.
    built, _ = assembler()
    built.reasoning("a")
    built.reasoning("b")
    built.reasoning("c", signature="s1")
    built.reasoning("d")
    built.text("x")
    built.reasoning("", signature="s2")
    built.text("y")
    built.text("z")
    built.reasoning("")  # an empty thought with no signature: no block of its own
    built.text("w")
    assert [
        (b["type"], b["data"].get("thinking", b["data"].get("text")), b["data"].get("signature"))
        for b in built.turn().content
    ] == [
        ("thinking", "ab", None),
        ("thinking", "cd", "s1"),
        ("text", "x", None),
        ("thinking", "", "s2"),
        ("text", "yz", None),
        ("text", "w", None),
    ]


def test_a_keyed_thinking_block_is_kept_however_empty_and_an_empty_text_is_not() -> None:
    built, _ = assembler()
    built.reasoning("", 0)
    built.text("", 1)
    built.redacted("opaque", 2)
    assert built.turn().content == [
        {"type": "thinking", "data": {"thinking": "", "redacted": False, "signature": None}},
        {"type": "thinking", "data": {"thinking": "opaque", "redacted": True, "signature": None}},
    ]


def test_calls_made_ids_arguments_given_whole_or_opened_with_and_pieces_of_another_kind_ignored() -> None:
    built, sink = assembler()
    built.call("a", name="first")
    built.opened_with("a", {"given": True})
    built.call("b", name="second")
    built.opened_with("b", {"given": True})
    built.call("b", arguments='{"streamed": true}')
    built.whole_call("gemini_call_1", "third", {"x": [1]})
    built.call("c", arguments="not json")
    built.text("ignored", "a")
    turn = built.turn()
    assert [(c.name, c.arguments) for c in turn.calls] == [
        ("first", {"given": True}),
        ("second", {"streamed": True}),
        ("third", {"x": [1]}),
        ("", {}),
    ]
    assert turn.calls[0].call_id.startswith("call_")
    assert turn.calls[2].call_id == "gemini_call_1"
    assert turn.calls[3].invalid.startswith("they are not valid JSON")
    assert not built.has_text
    assert built.calls == 4
    assert [entry[4] for entry in sink.seen if entry[0] == "tool_input"] == [
        '{"streamed": true}',
        '{"x":[1]}',
        "not json",
    ]


def test_a_name_that_comes_late_is_taken_once() -> None:
    built, _ = assembler()
    built.call(0, call_id="c1")
    built.call(0, name="late", arguments="{}")
    built.call(0, name="repeated")
    assert [(c.call_id, c.name) for c in built.turn().calls] == [("c1", "late")]


def test_what_it_does_not_keep_it_still_counts_and_streams() -> None:
    built, sink = assembler(StreamLimits(text_bytes=8), keep=False)
    built.text("1234")
    built.call("item", call_id="c", name="t")
    assert built.knows("item")
    assert not built.knows("other")
    assert built.turn().content == [{"type": "tool_call", "data": {"id": "c", "name": "t", "arguments": {}}}]
    with pytest.raises(StreamBoundPassed, match="SWITCHBOARD_MODEL_MAX_TEXT_BYTES"):
        built.reasoning("56789")
    assert sink.seen == [("text", "1234")]


def test_every_bound_holds_on_what_it_keeps() -> None:
    # A signature counts as text; a call counts among the calls when it opens, its name as its arguments.
    built, _ = assembler(StreamLimits(text_bytes=8))
    built.reasoning("1234", signature="5678")
    with pytest.raises(StreamBoundPassed, match="SWITCHBOARD_MODEL_MAX_TEXT_BYTES"):
        built.redacted("9", 1)
    built, _ = assembler(StreamLimits(calls=2))
    built.call(0)
    built.whole_call("id", "t", {})
    with pytest.raises(StreamBoundPassed, match="SWITCHBOARD_MODEL_MAX_CALLS"):
        built.call(2)
    built, sink = assembler(StreamLimits(argument_bytes=8))
    built.call(0, name="name", arguments="1234")
    with pytest.raises(StreamBoundPassed, match="SWITCHBOARD_MODEL_MAX_ARGUMENT_BYTES"):
        built.call(0, arguments="5")
    assert sink.seen == [("tool_input", 0, sink.seen[0][2], "name", "1234")]
    built, _ = assembler(StreamLimits(argument_bytes=8))
    built.call(0, name="t")
    with pytest.raises(StreamBoundPassed, match="SWITCHBOARD_MODEL_MAX_ARGUMENT_BYTES"):
        built.opened_with(0, {"long": 1})

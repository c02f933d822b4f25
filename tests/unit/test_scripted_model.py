"""The scripted model's fixed behaviour (docs/agents-and-models.md, The scripted model)."""

from __future__ import annotations

import asyncio

import pytest

from broker.services.runs import PlannedCall
from tests.helpers import SCRIPTED_CONFIG
from workers.config import RunConfig
from workers.models.base import Message, ModelError, ModelRequest, ToolOutcome
from workers.models.scripted import ScriptedModel

CONFIG = RunConfig.of(SCRIPTED_CONFIG)


class Recorded:
    """A DeltaSink that keeps what it is sent: text pieces, and (index, call id, name, piece) of tool input."""

    def __init__(self) -> None:
        self.text_pieces: list[str] = []
        self.tool_pieces: list[tuple[int, str, str, str]] = []
        self.reasoning_pieces: list[str] = []

    def text(self, piece: str) -> None:
        self.text_pieces.append(piece)

    def reasoning(self, piece: str) -> None:
        self.reasoning_pieces.append(piece)

    def tool_input(self, index: int, call_id: str, name: str, piece: str) -> None:
        self.tool_pieces.append((index, call_id, name, piece))

    def restart(self) -> None:
        self.text_pieces.clear()
        self.tool_pieces.clear()
        self.reasoning_pieces.clear()


async def turn(
    *messages: Message, sink: Recorded | None = None
) -> tuple[list[dict[str, object]], list[PlannedCall], str]:
    streamed = sink or Recorded()
    result = await ScriptedModel().turn(ModelRequest(CONFIG, list(messages), []), streamed)
    assert result.model == "scripted"
    return result.content, result.calls, "".join(streamed.text_pieces)


async def test_a_calls_arguments_stream_in_pieces_that_join_to_what_was_written() -> None:
    sink = Recorded()
    raw = '{"row_id": "row-42", "note": "long enough for several pieces"}'
    _, calls, _ = await turn(Message("user", text=f"/call client__web__a {raw}\n/call b"), sink=sink)
    first = [piece for index, _, _, piece in sink.tool_pieces if index == 0]
    assert len(first) > 1
    assert "".join(first) == raw
    assert {(i, c, n) for i, c, n, _ in sink.tool_pieces} == {
        (0, calls[0].call_id, "client__web__a"),
        (1, calls[1].call_id, "b"),
    }
    assert "".join(piece for index, _, _, piece in sink.tool_pieces if index == 1) == "{}"


async def test_call_lines_become_parallel_tool_calls() -> None:
    content, calls, _ = await turn(Message("user", text='/call client__web__a {"x": 1}\nsome text\n/call b'))
    assert [(c.name, c.arguments) for c in calls] == [("client__web__a", {"x": 1}), ("b", {})]
    assert all(c.call_id.startswith("call_") and len(c.call_id) == 37 for c in calls)
    assert [block["type"] for block in content] == ["tool_call", "tool_call"]


async def test_other_input_is_echoed_and_streamed() -> None:
    content, calls, streamed = await turn(Message("user", text="hello\nthere"))
    assert calls == []
    assert content == [{"type": "text", "data": {"text": "You said: hello\nthere"}}]
    assert streamed.strip() == "You said: hello\nthere"


async def test_results_are_answered_one_line_per_call_in_order() -> None:
    a, b = PlannedCall("call_a", "client__web__a", {}), PlannedCall("call_b", "b", {})
    content, calls, _ = await turn(
        Message("user", text="/call client__web__a\n/call b"),
        Message("assistant", calls=[a, b]),
        Message("tool", result=ToolOutcome("call_b", "nope", is_error=True)),
        Message("tool", result=ToolOutcome("call_a", "fine", is_error=False)),
    )
    assert calls == []
    assert content == [{"type": "text", "data": {"text": "client__web__a: fine\nb failed: nope"}}]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("/call", "needs a tool name"),
        ("/sleep soon", "needs a number of seconds"),
        ("/sleep -1", "non-negative"),
        ("/fail the provider is down", "the provider is down"),
    ],
)
async def test_bad_lines_and_fail_end_the_run(line: str, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        await turn(Message("user", text=line))


@pytest.mark.parametrize(("line", "why"), [("/call x [1]", "not a JSON object"), ("/call x {nope", "not valid JSON")])
async def test_arguments_that_are_not_an_object_make_a_call_that_cannot_be_used(line: str, why: str) -> None:
    _, calls, _ = await turn(Message("user", text=line))
    (call,) = calls
    assert (call.name, call.arguments) == ("x", {})
    assert why in call.invalid


async def test_sleep_is_cancellable() -> None:
    task = asyncio.create_task(
        ScriptedModel().turn(ModelRequest(CONFIG, [Message("user", text="/sleep 30")], []), Recorded())
    )
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 1)

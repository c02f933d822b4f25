"""The scripted model's fixed behaviour (CONTRACT section 4)."""

from __future__ import annotations

import asyncio

import pytest

from broker.runs import PlannedCall
from workers.models.base import Message, ModelError, StepCancelled, ToolOutcome
from workers.models.scripted import ScriptedModel


async def never_cancelled() -> None:
    return None


async def turn(*messages: Message) -> tuple[list[dict[str, object]], list[PlannedCall]]:
    result = await ScriptedModel().turn(list(messages), never_cancelled)
    assert result.model == "scripted"
    return result.content, result.calls


async def test_call_lines_become_parallel_tool_calls() -> None:
    content, calls = await turn(Message("user", text='/call client__web__a {"x": 1}\nsome text\n/call b'))
    assert [(c.name, c.arguments) for c in calls] == [("client__web__a", {"x": 1}), ("b", {})]
    assert all(c.call_id.startswith("call_") and len(c.call_id) == 37 for c in calls)
    assert [block["type"] for block in content] == ["tool_call", "tool_call"]


async def test_other_input_is_echoed() -> None:
    content, calls = await turn(Message("user", text="hello\nthere"))
    assert calls == []
    assert content == [{"type": "text", "data": {"text": "You said: hello\nthere"}}]


async def test_results_are_answered_one_line_per_call_in_order() -> None:
    a, b = PlannedCall("call_a", "client__web__a", {}), PlannedCall("call_b", "b", {})
    content, calls = await turn(
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
        ("/call x [1]", "must be a JSON object"),
        ("/call x {nope", "are not JSON"),
        ("/call", "needs a tool name"),
        ("/sleep soon", "needs a number of seconds"),
        ("/sleep -1", "non-negative"),
        ("/fail the provider is down", "the provider is down"),
    ],
)
async def test_bad_lines_and_fail_end_the_run(line: str, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        await turn(Message("user", text=line))


async def test_sleep_is_cancellable() -> None:
    flag = asyncio.Event()

    async def checkpoint() -> None:
        if flag.is_set():
            raise StepCancelled

    task = asyncio.create_task(ScriptedModel().turn([Message("user", text="/sleep 30")], checkpoint))
    await asyncio.sleep(0.1)
    flag.set()
    with pytest.raises(StepCancelled):
        await asyncio.wait_for(task, 1)

"""The conversation a model step sees, folded from the session's event log."""

from __future__ import annotations

from typing import Any

from broker import Broker
from broker.codec import loads
from broker.runs import PlannedCall
from workers.models.base import Message, ToolOutcome

_PAGE = 500


def _text(content: list[dict[str, Any]]) -> str:
    return "".join(block["data"]["text"] for block in content if block["type"] == "text")


def fold(event: dict[str, Any]) -> Message | None:
    """The message an event adds to the conversation, if any."""
    kind = event["type"]
    if kind == "message_user":
        return Message("user", text=_text(event["message"]["content"]))
    if kind == "message_assistant":
        content = event["message"]["content"]
        calls = [
            PlannedCall(block["data"]["id"], block["data"]["name"], block["data"]["arguments"])
            for block in content
            if block["type"] == "tool_call"
        ]
        return Message("assistant", text=_text(content), content=content, calls=calls)
    if kind == "tool_result":
        outcome = ToolOutcome(event["call_id"], _text(event["content"]), bool(event["is_error"]))
        return Message("tool", result=outcome)
    return None


async def read_transcript(broker: Broker, session_id: str) -> list[Message]:
    messages: list[Message] = []
    after = 0
    while True:
        rows = await broker.log.after(session_id, after, _PAGE)
        for seq, data in rows:
            after = seq
            message = fold(loads(data))
            if message is not None:
                messages.append(message)
        if len(rows) < _PAGE:
            return messages

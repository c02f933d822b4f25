"""The built-in scripted model (docs/agents-and-models.md, The scripted model): fixed behaviour, no network."""

from __future__ import annotations

import asyncio
import math

from broker.services.providers import SCRIPTED_MODEL
from broker.services.runs import PlannedCall
from common.codec import new_call_id
from common.events.build import Block, text_block, tool_call_block
from workers.arguments import parse_arguments
from workers.models.base import DeltaSink, Message, ModelError, ModelRequest, ToolOutcome, Turn

# The arguments of a `/call` stream as a model writes them: in pieces of about this many characters.
_ARGUMENT_PIECE = 16


def _parse_call(line: str, index: int, deltas: DeltaSink) -> PlannedCall:
    _, _, rest = line.partition(" ")
    name, _, raw = rest.strip().partition(" ")
    if not name:
        raise ModelError("scripted model: `/call` needs a tool name, as in `/call client__web__lookup {}`")
    raw = raw.strip()
    call_id = new_call_id()
    for start in range(0, len(raw or "{}"), _ARGUMENT_PIECE):
        deltas.tool_input(index, call_id, name, (raw or "{}")[start : start + _ARGUMENT_PIECE])
    # Arguments that are not a JSON object make a call with an error result, as a provider's would.
    arguments, invalid = parse_arguments(raw) if raw else ({}, "")
    return PlannedCall(call_id, name, arguments, invalid)


def _parse_sleep(line: str) -> float:
    _, _, raw = line.partition(" ")
    try:
        seconds = float(raw)
    except ValueError:
        raise ModelError(f"scripted model: `/sleep` needs a number of seconds, not {raw.strip()!r}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ModelError("scripted model: `/sleep` needs a non-negative number of seconds")
    return seconds


def _answer_results(transcript: list[Message]) -> str:
    """One line per call of the latest assistant message, in order, from its results."""
    results: dict[str, ToolOutcome] = {}
    for message in reversed(transcript):
        if message.role == "tool" and message.result is not None:
            results.setdefault(message.result.call_id, message.result)
        elif message.role == "assistant" and message.calls:
            lines = []
            for call in message.calls:
                result = results.get(call.call_id)
                if result is None:
                    lines.append(f"{call.name} failed: no result was recorded")
                elif result.is_error:
                    lines.append(f"{call.name} failed: {result.text}")
                else:
                    lines.append(f"{call.name}: {result.text}")
            return "\n".join(lines)
    return ""


def _stream(text: str, deltas: DeltaSink) -> list[Block]:
    # Word by word, as a real model's text arrives, so `?include=deltas` has something to show.
    words = text.split(" ")
    for number, word in enumerate(words):
        deltas.text(word + (" " if number < len(words) - 1 else ""))
    return [text_block(text)]


class ScriptedModel:
    async def aclose(self) -> None:
        return None

    async def turn(self, request: ModelRequest, deltas: DeltaSink) -> Turn:
        # A result's PDFs as their placeholder, as the wires that take no documents get them.
        transcript = request.transcript_for(text_only=False)
        if transcript and transcript[-1].role == "tool":
            return Turn(_stream(_answer_results(transcript), deltas), [], SCRIPTED_MODEL)
        text = next((m.text for m in reversed(transcript) if m.role == "user"), "")
        calls: list[PlannedCall] = []
        for raw_line in text.splitlines():
            line = raw_line.strip()
            if line.startswith("/call ") or line == "/call":
                calls.append(_parse_call(line, len(calls), deltas))
            elif line.startswith("/sleep ") or line == "/sleep":
                # Cancellable: a cancel ends the step by cancelling this task.
                await asyncio.sleep(_parse_sleep(line))
            elif line.startswith("/fail ") or line == "/fail":
                raise ModelError(line.partition(" ")[2].strip() or "the scripted model was told to fail")
        if calls:
            return Turn([tool_call_block(c.call_id, c.name, c.arguments) for c in calls], calls, SCRIPTED_MODEL)
        return Turn(_stream(f"You said: {text}", deltas), [], SCRIPTED_MODEL)

"""`switchboard models try`: one short request to a stored model provider, with one tool, printed as it
streams: the answer, the tool call and the token counts, or the provider's own error. It reaches the
provider the way a worker does (the same adapter, the same address check, the deployment's keys for the
platform providers), so what works here works in a run."""

from __future__ import annotations

import asyncio
import re
import sys
from typing import TextIO

from broker import Broker
from workers.config import RunConfig
from workers.models.base import Message, ModelError, ModelRequest, StreamLimits, ToolSpec, Turn, Usage
from workers.models.registry import ModelRegistry
from workers.models.retry import with_retries
from workers.settings import WorkerSettings

PROMPT = "What time is it in Tokyo? Use the get_time tool, then say what you will do with its answer."
TOOL = ToolSpec(
    name="get_time",
    description="The current local time in a time zone.",
    parameters={
        "type": "object",
        "properties": {"timezone": {"type": "string", "description": "An IANA time zone, such as Asia/Tokyo"}},
        "required": ["timezone"],
    },
)


# Control characters but the line break and tab: a provider's text reaches a terminal, where an escape
# sequence could set its title, write its clipboard or hide lines.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(text: str) -> str:
    """`text` with each control character shown as its escape (`\x1b`), not sent to the terminal."""
    return _CONTROL.sub(lambda found: repr(found.group())[1:-1], text)


class _Printer:
    """Prints what the model streams as it comes, each kind under its own heading."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._kind = ""

    def _write(self, kind: str, piece: str) -> None:
        if kind != self._kind:
            self._out.write(("\n" if self._kind else "") + f"{kind}: ")
            self._kind = kind
        self._out.write(safe(piece))
        self._out.flush()

    def text(self, piece: str) -> None:
        self._write("answer", piece)

    def reasoning(self, piece: str) -> None:
        self._write("reasoning", piece)

    def tool_input(self, index: int, call_id: str, name: str, piece: str) -> None:
        self._write(f"tool call {index} ({safe(name)})", piece)

    def restart(self) -> None:
        self._write("retrying", "the attempt failed; again\n")
        self._kind = ""

    def end(self) -> None:
        if self._kind:
            self._out.write("\n")


def usage_line(usage: Usage | None) -> str:
    """The token counts as one line (`tokens: input 12 (cached 0), output 30 (reasoning 8)`)."""
    if usage is None or not usage.fields():
        return "tokens: the provider sent no counts"
    parts = [
        f"input {usage.input_tokens if usage.input_tokens is not None else '?'}",
        f"output {usage.output_tokens if usage.output_tokens is not None else '?'}",
    ]
    if usage.cached_input_tokens is not None:
        parts[0] += f" (cached {usage.cached_input_tokens})"
    if usage.reasoning_tokens is not None:
        parts[1] += f" (reasoning {usage.reasoning_tokens})"
    return "tokens: " + ", ".join(parts)


def _summary(turn: Turn, out: TextIO) -> None:
    for call in turn.calls:
        problem = f" (unusable: {call.invalid})" if call.invalid else ""
        out.write(safe(f"tool call: {call.name} {call.arguments}{problem}") + "\n")
    if not turn.calls:
        out.write("tool call: none (the model answered without the tool)\n")
    out.write(f"model: {safe(turn.model or '?')}\n{usage_line(turn.usage)}\n")


async def try_model(
    settings: WorkerSettings, url: str, provider_id: str, model: str, max_tokens: int, out: TextIO | None = None
) -> int:
    """Send the one request and print it (to `out`, standard output by default); 0 when the provider
    answered, 1 with its error otherwise."""
    out = out or sys.stdout
    broker = await Broker.connect(settings, url, role="switchboard-models-try")
    registry = ModelRegistry(broker)
    printer = _Printer(out)
    try:
        provider_format, client = await registry.client_for(provider_id)
        config = RunConfig(format=provider_format, model=model, max_tokens=max_tokens)
        request = ModelRequest(config, [Message(role="user", text=PROMPT)], [TOOL], StreamLimits.of(settings))
        # As long as a worker gives a step: a server that trickles bytes does not keep the terminal.
        async with asyncio.timeout(settings.step_timeout_s):
            turn = await with_retries(
                lambda: client.turn(request, printer),
                printer,
                attempts=settings.model_attempts,
                backoff_s=settings.model_backoff_s,
                budget_s=settings.model_retry_budget_s,
            )
    except (ModelError, TimeoutError) as error:
        printer.end()
        reason = str(error) if isinstance(error, ModelError) else f"no answer within {settings.step_timeout_s:g} s"
        out.write(f"error: {safe(reason)}\n")
        return 1
    finally:
        await registry.aclose()
        await broker.close()
    printer.end()
    _summary(turn, out)
    return 0

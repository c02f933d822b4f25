"""Arguments checked against a tool's schema without holding up the event loop, under a budget.

A check starts on the loop with a small slice of the budget when the arguments are small (most checks
end there, in microseconds: no process hop on the hot path); one that needs more starts again in a child
process (`broker.schema.child`) with the whole budget, so a schema built to be slow spends the child's
time, not the loop's. The child is started when first needed and killed when an answer is later than
the budget's time allows (its next check gets a new one).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from jsonschema.protocols import Validator

from broker.codec import dumps, loads
from broker.schema.budget import Budgeted, OverBudget
from broker.schema.frames import HEADER, frame

# What a check may spend on the loop, and the largest arguments (JSON text) checked there at all: a step
# costs a few microseconds on arguments this small, so the loop is held well under a millisecond.
INLINE_STEPS = 200
INLINE_TEXT = 8_192
MAX_COMPILED = 1_024
# An answer later than the budget's time by this much means the child is stuck in one step: it is killed.
_GRACE_S = 1.0
# A child not ready this long after it was started is taken for stuck (TimeoutError, as a late answer).
_START_S = 30.0
# Keywords whose stock implementation does work the meter does not see; checked only in the child.
_CHILD_ONLY = ('"unevaluatedItems"', '"unevaluatedProperties"')
# The checks of one model step's calls may keep the child busy this many times one check's time in all:
# a model (or an input for the scripted one) asking for thousands of slow calls takes no more.
STEP_CHECKS = 4
# Answers of the child kept by schema and arguments: a step routed again after a registration changed
# (or a run's repeated calls) does not pay for the same check twice.
_ANSWERS = 256


@dataclass(slots=True)
class Allowance:
    """The child's time the checks of one step's calls may still take, in seconds."""

    seconds: float


class Unchecked(Exception):
    """The arguments could not be checked (the budget ran out first); str() says why, naming the settings."""


@dataclass(frozen=True, slots=True)
class _Compiled:
    validator: Validator
    inline: bool


class ArgumentChecks:
    """One per process (the worker's steps and the API's approvals share the idea, not the object)."""

    def __init__(self, steps: int, seconds: float, grace_s: float = _GRACE_S) -> None:
        self._steps = steps
        self._seconds = seconds
        self._grace_s = grace_s
        self._budgeted = Budgeted()
        self._compiled: OrderedDict[str, _Compiled] = OrderedDict()
        # (schema, arguments) -> the child's problem, or the Unchecked message (a tuple of it).
        self._answers: OrderedDict[tuple[str, str], str | tuple[str]] = OrderedDict()
        self._child: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    @property
    def over_budget(self) -> str:
        return (
            f"checking them against the schema ran past its budget ({self._steps:,} steps or "
            f"{self._seconds:g} s, SWITCHBOARD_SCHEMA_CHECK_STEPS and SWITCHBOARD_SCHEMA_CHECK_TIMEOUT_S)"
        )

    def allowance(self) -> Allowance:
        """What the checks of one step's calls may take of the child's time, all told."""
        return Allowance(self._seconds * STEP_CHECKS)

    async def problem(self, schema: dict[str, Any], arguments: Any, allowance: Allowance | None = None) -> str:
        """'' when the arguments satisfy the schema; else the failing field, what failed, and the rule.
        Unchecked when the check needs more than its budget, or than what is left of `allowance`."""
        text = dumps(schema)
        compiled = self._compile(text, schema)
        arguments_text = dumps(arguments)
        if compiled.inline and len(arguments_text) <= INLINE_TEXT:
            with contextlib.suppress(OverBudget):
                return self._budgeted.problem(compiled.validator, arguments, INLINE_STEPS)
        key = (text, arguments_text)
        answer = self._answers.get(key)
        if answer is None:
            answer = await self._answer(text, arguments, allowance)
            self._answers[key] = answer
            if len(self._answers) > _ANSWERS:
                self._answers.popitem(last=False)
        if isinstance(answer, tuple):
            raise Unchecked(answer[0])
        return answer

    async def _answer(self, text: str, arguments: Any, allowance: Allowance | None) -> str | tuple[str]:
        if allowance is not None and allowance.seconds <= 0:
            return (
                f"the checks of this step's calls used up the time they may take ({self._seconds * STEP_CHECKS:g} s)",
            )
        started = time.monotonic()
        try:
            return await self._in_child(text, arguments)
        except Unchecked as unchecked:
            return (str(unchecked),)
        finally:
            if allowance is not None:
                allowance.seconds -= time.monotonic() - started

    def _compile(self, text: str, schema: dict[str, Any]) -> _Compiled:
        compiled = self._compiled.get(text)
        if compiled is None:
            inline = not any(keyword in text for keyword in _CHILD_ONLY)
            compiled = self._compiled[text] = _Compiled(self._budgeted.compile(schema), inline)
            if len(self._compiled) > MAX_COMPILED:
                self._compiled.popitem(last=False)
        else:
            self._compiled.move_to_end(text)
        return compiled

    async def _in_child(self, text: str, arguments: Any) -> str:
        request = frame({"schema": text, "arguments": arguments})
        async with self._lock:
            try:
                child = await self._started()
                assert child.stdin is not None
                child.stdin.write(request)
                await child.stdin.drain()
                async with asyncio.timeout(self._seconds + self._grace_s):
                    answer = await _read(child)
            except TimeoutError:
                await self._stop()
                raise Unchecked(self.over_budget) from None
            except (asyncio.IncompleteReadError, ConnectionError):
                await self._stop()
                raise Unchecked("the process that checks them stopped before it answered") from None
            except BaseException:
                # Cancelled mid-exchange: what the child would answer next is unknown.
                await self._stop()
                raise
        if answer.get("over_budget"):
            raise Unchecked(self.over_budget)
        return str(answer["problem"])

    async def _started(self) -> asyncio.subprocess.Process:
        if self._child is None or self._child.returncode is not None:
            self._child = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "broker.schema.child",
                str(self._steps),
                str(self._seconds),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            async with asyncio.timeout(_START_S):
                await _read(self._child)
        return self._child

    async def _stop(self) -> None:
        child, self._child = self._child, None
        if child is not None and child.returncode is None:
            child.kill()
            await child.wait()

    async def close(self) -> None:
        """Stop the child, if one was started."""
        async with self._lock:
            await self._stop()


async def _read(child: asyncio.subprocess.Process) -> dict[str, Any]:
    assert child.stdout is not None
    header = await child.stdout.readexactly(HEADER.size)
    answer: dict[str, Any] = loads(await child.stdout.readexactly(HEADER.unpack(header)[0]))
    return answer

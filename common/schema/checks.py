"""Arguments checked against a tool's schema without holding up the event loop, under a budget.

A check starts on the loop with a small slice of the budget when the arguments are small (most checks
end there, in microseconds: no process hop on the hot path); one that needs more starts again in a
checking child (`broker.schema.children`) with the whole budget, so a schema built to be slow spends a
child's time, not the loop's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from jsonschema.protocols import Validator

from common.codec import dumps
from common.schema.budget import Budgeted, OverBudget
from common.schema.children import Child, Children, Gone, Late

# What a check may spend on the loop, and the largest arguments (JSON text) checked there at all: a step
# costs a few microseconds on arguments this small, so the loop is held well under a millisecond.
INLINE_STEPS = 200
INLINE_TEXT = 8_192
# Compiled schemas kept, by count and by the length of their text (a schema may be up to a request body).
MAX_COMPILED = 1_024
MAX_COMPILED_BYTES = 64 * 2**20
# An answer later than the budget's time by this much means the child is stuck in one step: it is killed.
_GRACE_S = 1.0
# Keywords whose stock implementation does work the meter does not see; checked only in a child.
_CHILD_ONLY = ('"unevaluatedItems"', '"unevaluatedProperties"')
# The checks of one model step's calls may keep a child busy this many times one check's time in all:
# a model (or an input for the scripted one) asking for thousands of slow calls takes no more. A check
# waits for a free child at most that long too.
STEP_CHECKS = 4
# The children's answers kept by schema and arguments (their digests), so a step routed again after a
# registration changed, or a run's repeated calls, do not pay for the same check twice. Only what the
# schema and arguments decide is kept (a problem, or the budget ran out), never a want of time.
_ANSWERS = 1_024
_OVER = object()


@dataclass(slots=True)
class Allowance:
    """The children's time the checks of one step's calls may still take, in seconds."""

    seconds: float


class Unchecked(Exception):
    """The arguments could not be checked (the budget ran out first); str() says why, naming the settings."""


@dataclass(frozen=True, slots=True)
class _Compiled:
    validator: Validator
    inline: bool
    size: int


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode(errors="surrogatepass")).digest()


class ArgumentChecks:
    """One per process (the worker's steps and the API's approvals share the idea, not the object)."""

    def __init__(self, steps: int, seconds: float, grace_s: float = _GRACE_S, children: int = 2) -> None:
        self._steps = steps
        self._seconds = seconds
        self._grace_s = grace_s
        self._budgeted = Budgeted()
        self._compiled: OrderedDict[bytes, _Compiled] = OrderedDict()
        self._compiled_bytes = 0
        self._answers: OrderedDict[tuple[bytes, bytes], str | object] = OrderedDict()
        self._children = Children(steps, seconds, children)

    @property
    def over_budget(self) -> str:
        return (
            f"checking them against the schema ran past its budget ({self._steps:,} steps or "
            f"{self._seconds:g} s, SWITCHBOARD_SCHEMA_CHECK_STEPS and SWITCHBOARD_SCHEMA_CHECK_TIMEOUT_S)"
        )

    @property
    def children_running(self) -> int:
        return self._children.running

    def allowance(self) -> Allowance:
        """What the checks of one step's calls may take of the children's time, all told."""
        return Allowance(self._total)

    async def problem(self, schema: dict[str, Any], arguments: Any, allowance: Allowance | None = None) -> str:
        """'' when the arguments satisfy the schema; else the failing field, what failed, and the rule.
        Unchecked when the check needs more than its budget, or than what is left of `allowance`."""
        text = dumps(schema)
        schema_key = _digest(text)
        compiled = self._compile(schema_key, text, schema)
        arguments_text = dumps(arguments)
        if compiled.inline and len(arguments_text) <= INLINE_TEXT:
            # A schema that cannot be applied goes to a child too: saying where takes time in proportion
            # to the schema, not to the slice of the budget the loop gives.
            with contextlib.suppress(OverBudget):
                return self._budgeted.problem(compiled.validator, arguments, INLINE_STEPS, locate=False)
        key = (schema_key, _digest(arguments_text))
        answer = self._answers.get(key)
        if answer is None:
            answer = await self._in_child(text, arguments, allowance)
            self._answers[key] = answer
            if len(self._answers) > _ANSWERS:
                self._answers.popitem(last=False)
        if answer is _OVER:
            raise Unchecked(self.over_budget)
        return str(answer)

    def _compile(self, key: bytes, text: str, schema: dict[str, Any]) -> _Compiled:
        compiled = self._compiled.get(key)
        if compiled is not None:
            self._compiled.move_to_end(key)
            return compiled
        inline = not any(keyword in text for keyword in _CHILD_ONLY)
        compiled = self._compiled[key] = _Compiled(self._budgeted.compile(schema), inline, len(text))
        self._compiled_bytes += compiled.size
        while len(self._compiled) > MAX_COMPILED or self._compiled_bytes > MAX_COMPILED_BYTES:
            self._compiled_bytes -= self._compiled.popitem(last=False)[1].size
        return compiled

    async def _in_child(self, text: str, arguments: Any, allowance: Allowance | None) -> str | object:
        """The child's answer (a problem, or _OVER); Unchecked, and nothing to remember, when time ran
        out for want of a child or of what is left of the step's allowance."""
        if allowance is not None and allowance.seconds <= 0:
            raise Unchecked(f"the checks of this step's calls used up the time they may take ({self._total:g} s)")
        try:
            async with self._children.free(self._total) as child:
                return await self._ask(child, text, arguments, allowance)
        except Late:
            raise Unchecked(f"no checking process came free within {self._total:g} s; try again") from None

    async def _ask(self, child: Child, text: str, arguments: Any, allowance: Allowance | None) -> str | object:
        try:
            await child.ready()
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            await child.stop()
            raise Unchecked("no checking process could be started") from None
        started = time.monotonic()
        try:
            answer = await child.ask(text, arguments, self._seconds + self._grace_s)
        except Late:
            # Stuck in one step past the budget's time: what the schema and arguments decide.
            return _OVER
        except Gone:
            raise Unchecked("the process that checks them stopped before it answered") from None
        finally:
            if allowance is not None:
                allowance.seconds -= time.monotonic() - started
        return _OVER if answer.get("over_budget") else str(answer["problem"])

    @property
    def _total(self) -> float:
        return self._seconds * STEP_CHECKS

    async def close(self) -> None:
        """Stop the children that were started."""
        await self._children.close()

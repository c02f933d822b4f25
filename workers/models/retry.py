"""Transient provider failures are tried again with backoff, inside a budget; the rest end the run."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

from workers.models.base import DeltaSink, ModelError, TransientModelError, Turn

_CAP_S = 8.0


class RetryLater(TransientModelError):
    """A transient failure that says how long to wait (a provider's Retry-After)."""

    def __init__(self, message: str, wait_s: float | None) -> None:
        super().__init__(message)
        self.wait_s = wait_s


async def with_retries(
    attempt: Callable[[], Awaitable[Turn]], deltas: DeltaSink, *, attempts: int, backoff_s: float, budget_s: float
) -> Turn:
    """Call `attempt` until it answers, a failure is not transient, or the attempts or the budget run
    out; then the run fails with the provider's last message."""
    started = time.monotonic()
    for number in range(1, attempts + 1):
        try:
            return await attempt()
        except TransientModelError as error:
            wait = error.wait_s if isinstance(error, RetryLater) and error.wait_s is not None else None
            wait = min(wait if wait is not None else backoff_s * 2 ** (number - 1), _CAP_S)
            wait *= 1 + random.random() * 0.25
            if number == attempts or time.monotonic() - started + wait > budget_s:
                raise ModelError(f"the model provider kept failing ({number} attempts): {error}") from error
            # What the failed attempt streamed is void: readers of deltas start the message again.
            deltas.restart()
            await asyncio.sleep(wait)
    raise ModelError("the model was not called")  # attempts < 1

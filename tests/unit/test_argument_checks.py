"""Where a check runs: small ones on the loop, the rest in a child process that is killed when late."""

from __future__ import annotations

import asyncio
import time

import pytest

from common.schema.checks import INLINE_STEPS, ArgumentChecks, Unchecked
from tests.unit.test_schema_guard import exponential

ROW = {"type": "object", "properties": {"row_id": {"type": "string"}}, "required": ["row_id"]}


async def test_a_small_check_answers_on_the_loop_without_a_child() -> None:
    checks = ArgumentChecks(200_000, 1.0)
    try:
        assert await checks.problem(ROW, {"row_id": "7"}) == ""
        assert "rule: type" in await checks.problem(ROW, {"row_id": 7})
        assert checks.children_running == 0
    finally:
        await checks.close()


async def test_a_large_check_runs_in_the_child_and_answers_the_same() -> None:
    checks = ArgumentChecks(200_000, 5.0)
    rows = {"type": "array", "items": ROW}
    try:
        assert await checks.problem(rows, [{"row_id": str(i)} for i in range(INLINE_STEPS * 2)]) == ""
        problem = await checks.problem(rows, [{"row_id": str(i)} for i in range(300)] + [{"row_id": 1}])
        assert "at $[300].row_id" in problem
        # The two checks went to the two children in turn.
        assert checks.children_running == 2
    finally:
        await checks.close()


async def test_a_check_past_its_steps_is_unchecked_naming_the_settings_and_the_loop_keeps_going() -> None:
    checks = ArgumentChecks(50_000, 5.0)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    ticking = asyncio.create_task(tick())
    try:
        started = time.monotonic()
        with pytest.raises(Unchecked) as unchecked:
            await checks.problem(exponential(18), "x")
        took = time.monotonic() - started
        assert "ran past its budget (50,000 steps" in str(unchecked.value)
        assert "SWITCHBOARD_SCHEMA_CHECK_STEPS" in str(unchecked.value)
        # The loop ran all along (a tick every 5 ms, allowing for a busy machine).
        assert ticks >= took / 0.005 / 4
    finally:
        ticking.cancel()
        await checks.close()


async def test_a_child_stuck_in_one_step_is_killed_and_the_next_check_gets_a_new_one() -> None:
    # One `const` comparison of 400,000 items is a single step: the meter never sees the clock, so only
    # the parent's deadline ends it.
    checks = ArgumentChecks(10**9, 0.01, grace_s=0.05, children=1)
    big = [[i] for i in range(400_000)]
    try:
        await checks.problem(ROW, {"row_id": "x" * 10_000})  # the child is started and ready
        assert checks.children_running == 1
        with pytest.raises(Unchecked) as unchecked:
            await checks.problem({"const": big}, big)
        assert "ran past its budget" in str(unchecked.value)
        assert checks.children_running == 0
        assert await checks.problem(ROW, {"row_id": "y" * 10_000}) == ""
        assert checks.children_running == 1
    finally:
        await checks.close()


async def test_a_want_of_time_is_not_remembered_as_the_answer() -> None:
    checks = ArgumentChecks(200_000, 5.0)
    rows = {"type": "array", "items": ROW}
    arguments = [{"row_id": str(i)} for i in range(INLINE_STEPS * 2)]
    spent = checks.allowance()
    spent.seconds = 0.0
    try:
        with pytest.raises(Unchecked):
            await checks.problem(rows, arguments, spent)
        assert await checks.problem(rows, arguments, checks.allowance()) == ""
    finally:
        await checks.close()


async def test_waiting_for_a_busy_child_is_not_charged_to_the_step() -> None:
    checks = ArgumentChecks(10**9, 2.0, grace_s=0.05, children=1)
    rows = {"type": "array", "items": ROW}
    try:
        await checks.problem(ROW, {"row_id": "x" * 10_000})
        # Another session's stuck check holds the one child for about two seconds: longer than the step's
        # whole allowance, which its own check (well under it, even on a loaded machine) must not lose.
        stuck = asyncio.create_task(checks.problem(exponential(24), {"n": 1}))
        await asyncio.sleep(0.05)
        allowance = checks.allowance()
        allowance.seconds = 1.0
        assert await checks.problem(rows, [{"row_id": str(i)} for i in range(INLINE_STEPS * 2)], allowance) == ""
        assert allowance.seconds > 0
        with pytest.raises(Unchecked):
            await stuck
    finally:
        await checks.close()


async def test_a_step_that_used_up_its_allowance_is_not_checked_further() -> None:
    checks = ArgumentChecks(50_000, 5.0)
    allowance = checks.allowance()
    allowance.seconds = 0.0
    try:
        with pytest.raises(Unchecked) as unchecked:
            await checks.problem(exponential(18), {"n": 1}, allowance)
        assert "used up the time they may take (20 s)" in str(unchecked.value)
        assert checks.children_running == 0
    finally:
        await checks.close()

"""Owed work wakes the worker that keeps its partition: runs go on at once with no poll at all (the rescan,
the only reading not prompted by an alarm, is far off)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from switchboard.settings import Settings
from tests.api_client import Api, Event, of_type, run_over


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # Far longer than the test may take: only the `w` on the partition's alarm can start these steps.
    return settings.model_copy(update={"rescan_interval_s": 60.0})


def at_least(count: int, kind: str) -> Callable[[list[Event]], bool]:
    return lambda events: len(of_type(events, kind)) >= count


async def test_steps_start_on_the_alarm_not_a_poll(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    for turn in range(3):
        await api.send(session, f'/call client__web__highlight_row {{"row_id": "{turn}"}}')
        events = await api.wait_for(session, at_least(turn + 1, "client_tool_dispatched"))
        call_id = of_type(events, "client_tool_dispatched")[turn]["call_id"]
        await api.call(session, web["id"], call_id, "result", text="ok")
        events = await api.wait_for(session, at_least(turn + 1, "run_completed"))
        assert run_over(events)

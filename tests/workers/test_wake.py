"""An enqueued step wakes an idle worker: runs go on at once even when the worker's own poll is far off."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from broker.settings import Settings
from tests.api_client import Api, Event, of_type, run_over


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # Far longer than the test may take: only the wake token can start these jobs in time.
    return settings.model_copy(update={"worker_poll_delay_s": 60.0})


def at_least(count: int, kind: str) -> Callable[[list[Event]], bool]:
    return lambda events: len(of_type(events, kind)) >= count


async def test_steps_start_on_the_wake_token_not_the_poll(api: Api) -> None:
    session = await api.session()
    web = await api.register(session)
    for turn in range(3):
        await api.send(session, f'/call client__web__highlight_row {{"row_id": "{turn}"}}')
        events = await api.wait_for(session, at_least(turn + 1, "client_tool_dispatched"))
        call_id = of_type(events, "client_tool_dispatched")[turn]["call_id"]
        await api.call(session, web["id"], call_id, "result", text="ok")
        events = await api.wait_for(session, at_least(turn + 1, "run_completed"))
        assert run_over(events)

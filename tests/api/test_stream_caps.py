"""Open event streams are capped per session and per credential on each API process (429 past the cap)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from api.stream_caps import StreamCaps
from broker.errors import TooManyRequests
from switchboard.settings import Settings
from tests.api_client import Session, running_api


@contextlib.asynccontextmanager
async def opened(client: httpx.AsyncClient, session: Session) -> AsyncIterator[httpx.Response]:
    async with client.stream("GET", f"/v1/sessions/{session.id}/events/stream") as response:
        yield response


async def test_streams_past_the_caps_are_refused_until_one_closes(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    update: dict[str, object] = {"max_streams_per_session": 2, "max_streams_per_credential": 3}
    async with running_api(settings, redis_url, api_key, update) as api:
        first, second, third = [await api.session() for _ in range(3)]
        async with api.as_session(first) as tab, contextlib.AsyncExitStack() as held:
            for _ in range(2):
                assert (await held.enter_async_context(opened(tab, first))).status_code == 200
            async with opened(tab, first) as refused:
                assert refused.status_code == 429
                assert refused.headers["retry-after"] == "5"
                body = (await refused.aread()).decode()
                assert "SWITCHBOARD_MAX_STREAMS_PER_SESSION" in body
            # The API key is another credential: its streams count against its own cap.
            for session in (second, third, second):
                assert (await held.enter_async_context(opened(api.key, session))).status_code == 200
            async with opened(api.key, third) as refused:
                assert refused.status_code == 429
                assert "SWITCHBOARD_MAX_STREAMS_PER_CREDENTIAL" in (await refused.aread()).decode()
        # All closed: room again.
        async with api.as_session(first) as tab, opened(tab, first) as again:
            assert again.status_code == 200


def test_closing_twice_counts_out_once_and_a_refusal_counts_nothing() -> None:
    caps = StreamCaps(per_session=1, per_credential=0)
    close = caps.open("s", "key")
    with pytest.raises(TooManyRequests):
        caps.open("s", "other")
    close()
    close()
    assert caps.held("s") == 0
    caps.open("s", "key")
    assert caps.held("s") == 1

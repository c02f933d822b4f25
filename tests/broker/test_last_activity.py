"""A session's retention reads when its newest event was appended as the number the log wrote it with (meta
`event_at`, kept with the seq), not by parsing `created_at` back; a session stored before that field is
never purged early."""

from __future__ import annotations

from datetime import datetime

import pytest

from common.codec import loads, now_ms
from switchboard.settings import Settings
from tests.helpers import make_session
from tests.stack import opened_broker

pytestmark = pytest.mark.both_redis

RETENTION = {"session_retention_s": 60.0}


def _ms(value: bytes | str | None) -> int:
    assert value is not None
    return int(value)


async def test_retention_reads_the_time_the_newest_event_was_appended(settings: Settings, redis_url: str) -> None:
    async with opened_broker(settings.model_copy(update=RETENTION), redis_url) as broker:
        session_id = await make_session(broker)
        meta = broker.core.keys.session(session_id).meta
        at = _ms(await broker.core.redis.hget(meta, "event_at"))
        [(_, newest)] = await broker.log.after(session_id, 0, 10)
        created = datetime.fromisoformat(loads(newest)["created_at"].replace("Z", "+00:00"))
        # The same instant as the event's `created_at`, in ms.
        assert at == int(created.timestamp() * 1_000_000) // 1000
        assert abs(now_ms() - at) < 10_000
        assert await broker.sessions.retain(session_id) == "kept"
        await broker.core.redis.hset(meta, "event_at", at - 61_000)
        assert await broker.sessions.retain(session_id) == "purged"


async def test_a_session_stored_before_the_field_is_taken_as_active_now(settings: Settings, redis_url: str) -> None:
    async with opened_broker(settings.model_copy(update=RETENTION), redis_url) as broker:
        session_id = await make_session(broker)
        meta = broker.core.keys.session(session_id).meta
        await broker.core.client_for(meta).hdel(meta, "event_at")
        before = now_ms()
        assert await broker.sessions.retain(session_id) == "kept"
        # Recorded, so it is purged once it has been idle a whole retention from now, not kept for ever.
        assert _ms(await broker.core.redis.hget(meta, "event_at")) >= before - 5_000
        assert await broker.sessions.retain(session_id) == "kept"

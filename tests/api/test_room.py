"""A large write to a session with no room for it is refused before it is read (api/room.py), with the
answer its own route gives, and never in place of an answer a retry is owed."""

from __future__ import annotations

from typing import Any

from switchboard.settings import Settings
from tests.api_client import Api, Session, running_api

CAP = 1_000_000
SETTING = "SWITCHBOARD_MAX_SESSION_BYTES"


def registration(name: str, size: int) -> dict[str, Any]:
    tool = {"name": "big", "parameters": {"type": "object", "description": "x" * size}}
    return {"name": name, "lifetime": {"type": "never"}, "tools": [tool]}


async def register(api: Api, session: Session, body: dict[str, Any], key: str | None = None) -> Any:
    headers = {"Idempotency-Key": key} if key else {}
    async with api.as_session(session) as client:
        return await client.post(f"/v1/sessions/{session.id}/clients", json=body, headers=headers)


async def test_a_full_session_refuses_a_large_write_unread_and_a_retry_still_gets_its_answer(
    settings: Settings, redis_url: str, api_key: str
) -> None:
    async with running_api(settings, redis_url, api_key, {"max_session_bytes": CAP}, worker=False) as api:
        session = await api.session()
        first = registration("first", 300_000)
        made = await register(api, session, first, key="first-try")
        assert made.status_code == 201, made.text
        # Fill it to within less than half of the next body.
        assert (await register(api, session, registration("filler", 130_000))).status_code == 201
        refused = await register(api, session, registration("second", 300_000))
        assert refused.status_code == 409, refused.text
        assert SETTING in refused.json()["error"]["message"]
        metrics = (await api.key.get("/metrics")).text
        assert "/v1/sessions/{session_id}/... (no room)" in metrics
        # The first registration's retry is owed its answer, room or not.
        again = await register(api, session, first, key="first-try")
        assert again.status_code == 201, again.text
        assert again.json()["id"] == made.json()["id"]

"""Schedules over HTTP: create, list, delete with an API key or the session's own token; an `at` a moment
ahead fires once as the session's input and leaves the listing; every bad body is a 400 naming its field."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from api.schemas.sessions import MAX_INPUT_CHARS
from broker.services.schedules import MAX_SCHEDULES
from tests.api_client import Api, Event, Session

pytestmark = pytest.mark.both_redis

WEEKDAYS = {"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin", "text": "Good morning"}


def path(session: Session, rest: str = "") -> str:
    return f"/v1/sessions/{session.id}/schedules{rest}"


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def scheduled(events: list[Event]) -> list[Event]:
    return [e for e in events if e["type"] == "message_user" and e.get("trigger") == "schedule"]


async def test_create_list_and_delete_with_an_api_key(api: Api) -> None:
    session = await api.session()
    created = await api.key.post(path(session), json=WEEKDAYS)
    assert created.status_code == 201, created.text
    body = created.json()
    assert set(body) == {"id", "cron", "timezone", "text", "next_fire_at", "created_at"}
    assert (body["cron"], body["timezone"], body["text"]) == ("0 9 * * 1-5", "Europe/Berlin", "Good morning")
    first = datetime.fromisoformat(body["next_fire_at"])
    local = first.astimezone(ZoneInfo("Europe/Berlin"))
    assert (local.hour, local.minute) == (9, 0)
    assert local.weekday() < 5
    assert first > datetime.now(UTC)

    listed = await api.key.get(path(session))
    assert listed.status_code == 200
    assert listed.json() == {"items": [body], "next_cursor": None}

    gone = await api.key.delete(path(session, f"/{body['id']}"))
    assert gone.status_code == 204
    assert (await api.key.get(path(session))).json() == {"items": [], "next_cursor": None}
    again = await api.key.delete(path(session, f"/{body['id']}"))
    assert again.status_code == 404
    assert again.json()["error"]["code"] == "not_found"
    assert (await api.key.delete(path(session, "/not-a-uuid"))).status_code == 404


async def test_an_at_schedule_fires_once_as_the_sessions_input_and_ends(api: Api) -> None:
    session = await api.session()
    at = datetime.now(UTC) + timedelta(seconds=1.5)
    async with api.as_session(session) as client:
        created = await client.post(path(session), json={"at": iso(at), "text": "it is time"})
        assert created.status_code == 201, created.text
        body = created.json()
        assert set(body) == {"id", "at", "timezone", "text", "next_fire_at", "created_at"}
        assert body["timezone"] == "UTC"
        assert body["at"] == body["next_fire_at"]
        assert [s["id"] for s in (await client.get(path(session))).json()["items"]] == [body["id"]]
    events = await api.wait_for(session, lambda es: any(e["type"] == "run_completed" for e in es), timeout=10)
    (fired,) = scheduled(events)
    assert fired["source"] == "external"
    assert fired["schedule_id"] == body["id"]
    assert fired["message"]["content"][0]["data"]["text"] == "it is time"
    late = datetime.fromisoformat(fired["created_at"]) - datetime.fromisoformat(body["next_fire_at"])
    assert timedelta(0) <= late < timedelta(seconds=2), late
    assert (await api.key.get(path(session))).json()["items"] == []
    # Input posted by a request carries neither extension field.
    await api.send(session, "by hand")
    events = await api.wait_for(session, lambda es: len([e for e in es if e["type"] == "run_completed"]) == 2)
    by_hand = [e for e in events if e["type"] == "message_user"][-1]
    assert "trigger" not in by_hand
    assert "schedule_id" not in by_hand


def _at(seconds: float) -> str:
    return iso(datetime.now(UTC) + timedelta(seconds=seconds))


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("both", {"cron": "* * * * *", "at": "2099-01-01T00:00:00Z", "text": "x"}, "cron, at"),
    ("neither", {"text": "x"}, "cron, at"),
    ("neither with a zone", {"timezone": "UTC", "text": "x"}, "cron, at"),
    ("at in the past", {"at": "2001-01-01T00:00:00Z", "text": "x"}, "at: 2001-01-01"),
    ("at with no offset", {"at": "2099-01-01T00:00:00", "text": "x"}, "at"),
    ("at not a time", {"at": "tomorrow", "text": "x"}, "at"),
    ("bad zone", {"cron": "0 9 * * *", "timezone": "Mars/Olympus", "text": "x"}, "timezone: 'Mars/Olympus'"),
    ("zone a path", {"cron": "0 9 * * *", "timezone": "../../etc/passwd", "text": "x"}, "timezone: '../../etc/passwd'"),
    ("zone too long", {"cron": "0 9 * * *", "timezone": "E" * 65, "text": "x"}, "timezone"),
    ("bad cron", {"cron": "61 * * * *", "text": "x"}, "cron: '61 * * * *'"),
    ("cron in seconds", {"cron": "* * * * * *", "text": "x"}, "cron: '* * * * * *' has 6 fields"),
    ("cron by name", {"cron": "@daily", "text": "x"}, "cron: '@daily'"),
    ("cron never", {"cron": "0 0 30 2 *", "text": "x"}, "cron: '0 0 30 2 *'"),
    ("cron too long", {"cron": "1 " * 80, "text": "x"}, "cron"),
    ("cron not text", {"cron": 5, "text": "x"}, "cron"),
    ("no text", {"cron": "0 9 * * *"}, "text"),
    ("text too long", {"cron": "0 9 * * *", "text": "x" * (MAX_INPUT_CHARS + 1)}, "text"),
    ("unknown field", {"cron": "0 9 * * *", "text": "x", "every": "day"}, "every"),
]


@pytest.mark.parametrize(("case", "body", "named"), BAD, ids=[case for case, _, _ in BAD])
async def test_bad_bodies_are_refused_naming_the_field_and_nothing_is_kept(
    api: Api, case: str, body: dict[str, Any], named: str
) -> None:
    session = await api.session()
    answer = await api.key.post(path(session), json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "invalid_request"
    assert named in answer.json()["error"]["message"], answer.text
    assert (await api.key.get(path(session))).json()["items"] == []


async def test_a_session_holds_at_most_20_schedules(api: Api) -> None:
    session = await api.session()
    for i in range(MAX_SCHEDULES):
        answer = await api.key.post(path(session), json={"at": _at(3600 + i), "text": f"n{i}"})
        assert answer.status_code == 201, answer.text
    refused = await api.key.post(path(session), json=WEEKDAYS)
    assert refused.status_code == 400
    assert f"{MAX_SCHEDULES} schedules, the limit" in refused.json()["error"]["message"]
    items = (await api.key.get(path(session))).json()["items"]
    assert [s["text"] for s in items] == [f"n{i}" for i in range(MAX_SCHEDULES)]
    await api.key.delete(path(session, f"/{items[0]['id']}"))
    assert (await api.key.post(path(session), json=WEEKDAYS)).status_code == 201


async def test_another_sessions_token_reaches_none_of_its_schedules(api: Api) -> None:
    mine, theirs = await api.session(), await api.session()
    created = (await api.key.post(path(theirs), json=WEEKDAYS)).json()
    async with api.as_session(mine) as client:
        answers: list[httpx.Response] = [
            await client.post(path(theirs), json=WEEKDAYS),
            await client.get(path(theirs)),
            await client.delete(path(theirs, f"/{created['id']}")),
            # Its own session does not hold the other's schedule either.
            await client.delete(path(mine, f"/{created['id']}")),
        ]
    assert [a.status_code for a in answers] == [404, 404, 404, 404]
    assert all(WEEKDAYS["text"] not in a.text for a in answers)
    assert [s["id"] for s in (await api.key.get(path(theirs))).json()["items"]] == [created["id"]]


async def test_a_repeated_idempotency_key_adds_one_schedule(api: Api) -> None:
    session = await api.session()
    headers = {"Idempotency-Key": f"k-{time.time()}"}
    first = await api.key.post(path(session), json=WEEKDAYS, headers=headers)
    second = await api.key.post(path(session), json=WEEKDAYS, headers=headers)
    assert first.status_code == 201
    assert second.status_code == 201
    assert first.json() == second.json()
    assert len((await api.key.get(path(session))).json()["items"]) == 1


async def test_deleting_the_session_ends_its_schedules(api: Api) -> None:
    session = await api.session()
    await api.key.post(path(session), json={"at": _at(1.0), "text": "never seen"})
    assert (await api.key.delete(f"/v1/sessions/{session.id}")).status_code == 204
    assert (await api.key.get(path(session))).status_code == 404

"""A session's storage is bounded (SWITCHBOARD_MAX_SESSION_BYTES): the three floods one session token
could send (register/leave pairs with big tool lists, results of the largest size, queued inputs of
200 KB) stop at the cap, with nothing half written, Redis grows by about the cap and no more, and another
session's round trip stays within twice its idle figure while the flood goes on.

Each flood runs on a redis-server of its own, so its used_memory is the flood's alone. The cap here is
8 MiB (the default is 64 MiB: the figures scale by 8, the round trips not at all)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import signal
import statistics
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from broker.transport import aio
from switchboard.settings import Settings
from tests.api_client import Api, Session, running_api
from tests.stack import started_redis

CAP = 8 * 1024 * 1024
# Capped, another session's round trip is measured against its idle figure, so nothing else may run
# meanwhile (solo); uncapped, the test measures only its own Redis's memory and runs beside the others.
CAPS = [pytest.param(CAP, marks=pytest.mark.solo), 0]
MiB = 1024 * 1024
SETTING = "SWITCHBOARD_MAX_SESSION_BYTES"
# Redis's own overhead over what a session counts (allocator, stream and hash encodings): what the
# flood may add past the cap.
SLACK = 4 * MiB
# Round trips per window; idle and flooded windows alternate WINDOWS times.
ROUND_TRIPS = 4
WINDOWS = 3
# Well above a round trip on a loaded CI machine (about 15 ms idle here), so a slow machine does not
# fail the test; the ratio is printed either way.
FLOOR_S = 0.5


async def used_memory(redis: Redis) -> int:
    """Redis's used_memory once the buffers of the requests just served are let go (about a second: a
    7 MB request's query buffer is counted until the server's cron frees it)."""
    await asyncio.sleep(1.5)
    return int((await redis.info("memory"))["used_memory"])


async def session_keys(redis: Redis, prefix: str, session: Session) -> set[bytes]:
    """The keys a session owns (a test may scan: this is not a request path)."""
    return {key async for key in redis.scan_iter(match=f"{prefix}:*:s:{session.id}:*", count=1000)}


def big_tools(pad: int = 9_000) -> list[dict[str, Any]]:
    """64 tools of about 13 KB each (845 KB in all), within the 1 MiB body limit."""
    return [
        {
            "name": f"tool_{i}",
            "description": "d" * 4096,
            "parameters": {"type": "object", "description": "p" * pad},
        }
        for i in range(64)
    ]


def refused_for_storage(response: httpx.Response) -> bool:
    if response.status_code != 409:
        return False
    error = response.json()["error"]
    assert error["code"] == "conflict"
    assert SETTING in error["message"], error
    # The session's use and the limit are in the message.
    assert str(CAP) in error["message"], error
    return True


@contextlib.asynccontextmanager
async def own_stack(
    tmp_path: Path, settings: Settings, api_key: str, cap: int, **update: object
) -> AsyncIterator[tuple[Api, Redis]]:
    with started_redis(tmp_path / f"redis-{cap}") as url:
        redis = Redis.from_url(url)
        try:
            extra: dict[str, object] = {"max_session_bytes": cap, "rate_limit_per_s": 0, **update}
            async with running_api(settings, url, api_key, extra) as api:
                yield api, redis
        finally:
            await redis.aclose()


class RoundTrips:
    """Another session's round trip: input posted until its run_completed is streamed back."""

    def __init__(self, api: Api, session: Session) -> None:
        self._api, self._session = api, session

    async def measure(self, count: int) -> list[float]:
        times = []
        async with self._api.stream(self._session, after_seq=await self._head()) as frames:
            for i in range(count):
                started = time.perf_counter()
                await self._api.send(self._session, f"ping {i}")
                while (await frames.event(timeout=20))["type"] != "run_completed":
                    pass
                times.append(time.perf_counter() - started)
        return times

    async def _head(self) -> int:
        events = await self._api.events(self._session)
        return int(events[-1]["seq"]) if events else 0


@dataclass(frozen=True)
class Flood:
    """One request an attacker sends again and again, with the session's token."""

    session: Session
    method: str
    path: str
    body: bytes


async def under_flood(api: Api, flood: Flood, tmp_path: Path) -> tuple[float, float]:
    """The other session's median round trip idle and while `flood` is sent from a process of its own.

    Idle and flooded windows alternate (the sender stopped with SIGSTOP, then let go), so a load that comes
    and goes on the machine (another test, CI's neighbours) weighs on both figures alike."""
    other = RoundTrips(api, await api.session())
    await other.measure(2)  # warm: the worker's first step of an agent reads its config
    body = tmp_path / "flood.json"
    body.write_bytes(flood.body)
    sender = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.flood", api.stack.url, flood.session.token, flood.method, flood.path, str(body)
    )
    idle: list[float] = []
    busy: list[float] = []
    try:
        await asyncio.sleep(0.5)
        for _ in range(WINDOWS):
            sender.send_signal(signal.SIGSTOP)
            # A request cut off mid-body holds nothing but its connection; the API waits on its read.
            await asyncio.sleep(0.2)
            idle += await other.measure(ROUND_TRIPS)
            sender.send_signal(signal.SIGCONT)
            await asyncio.sleep(0.3)
            busy += await other.measure(ROUND_TRIPS)
            assert sender.returncode is None, "the flood stopped: it was answered other than 404 or 409"
    finally:
        with contextlib.suppress(ProcessLookupError):
            sender.kill()
        await sender.wait()
    return statistics.median(idle), statistics.median(busy)


def report(name: str, cap: int, stopped: tuple[str, int], grown: int, counted: int, idle: float, busy: float) -> None:
    figures = {
        stopped[0]: stopped[1],
        "redis_grown_mb": round(grown / MiB, 1),
        "counted_mb": round(counted / MiB, 1),
        "round_trip_idle_ms": round(idle * 1000, 1),
        "round_trip_flood_ms": round(busy * 1000, 1),
        "ratio": round(busy / idle, 2) if cap else None,
    }
    shown = ", ".join(f"{key}={value}" for key, value in figures.items())
    # The figures the issue asks for, shown with `pytest -s`.
    print(f"\n[storage] {name} cap={cap}: {shown}", file=sys.stderr)  # noqa: T201


def check_round_trip(idle: float, busy: float) -> None:
    assert busy <= max(2 * idle, FLOOR_S), (idle, busy)


@pytest.mark.parametrize("cap", CAPS)
async def test_register_leave_pairs_with_big_tool_lists_stop_at_the_cap(
    settings: Settings, api_key: str, tmp_path: Path, cap: int
) -> None:
    tools = big_tools()
    async with own_stack(tmp_path, settings, api_key, cap) as (api, redis):
        session = await api.session()
        await asyncio.sleep(0.2)
        before = await used_memory(redis)
        pairs, refused = 0, None
        # Uncapped, 20 pairs (twice the cap's worth) show what the cap prevents.
        for _ in range(100 if cap else 20):
            async with api.as_session(session) as client:
                body = {"name": "big", "lifetime": {"type": "never"}, "tools": tools}
                keys_before = await session_keys(redis, settings.key_prefix, session)
                answer = await client.post(f"/v1/sessions/{session.id}/clients", json=body)
                if answer.status_code != 201:
                    assert refused_for_storage(answer), answer.text
                    refused = answer
                    # Nothing of the refused registration was written: no key, no event.
                    assert await session_keys(redis, settings.key_prefix, session) == keys_before
                    break
                client_id = answer.json()["id"]
                assert (await client.delete(f"/v1/sessions/{session.id}/clients/{client_id}")).status_code == 204
                pairs += 1
        # What a departed registration keeps: the fields a late request reads, for a while; no tools.
        s = api.stack.broker.core.keys.session(session.id)
        left = {k.decode() for k in aio.members(await redis.hkeys(s.client(client_id)))}
        assert not {"tools", "tool_names"} & left
        assert {"state", "name"} <= left
        assert 0 < await redis.pttl(s.client(client_id)) <= settings.idempotency_ttl_ms
        assert not await redis.exists(s.client_calls(client_id))
        grown = await used_memory(redis) - before
        counted = int(await redis.hget(s.meta, "bytes") or 0)
        if cap:
            assert refused is not None
            assert pairs < 100
            assert counted <= cap
            assert grown <= cap + SLACK, grown
            # The session is still readable and deletable at the cap.
            assert (await api.key.get(f"/v1/sessions/{session.id}/events", params={"limit": 5})).status_code == 200

            body = {"name": "big", "lifetime": {"type": "never"}, "tools": tools}
            flood = Flood(session, "POST", f"/v1/sessions/{session.id}/clients", json.dumps(body).encode())
            idle, busy = await under_flood(api, flood, tmp_path)
            check_round_trip(idle, busy)
            assert (await api.key.delete(f"/v1/sessions/{session.id}")).status_code == 204
        else:
            idle = busy = float("nan")
        report("register/leave", cap, ("pairs", pairs), grown, counted, idle, busy)


def biggest_result() -> dict[str, Any]:
    """A result of the largest size a client may send: 5 MiB of image (7 MB as base64) and the most text."""
    image = base64.b64encode(b"\x89PNG" + b"\0" * (5 * MiB - 4)).decode()
    return {
        "content": [
            {"type": "text", "text": "t" * 65_536},
            {"type": "image", "media_type": "image/png", "data": image},
        ]
    }


@pytest.mark.parametrize("cap", CAPS)
async def test_results_of_the_largest_size_stop_at_the_cap(
    settings: Settings, api_key: str, tmp_path: Path, cap: int
) -> None:
    result = biggest_result()
    async with own_stack(tmp_path, settings, api_key, cap, result_timeout_s=30.0, ack_timeout_s=30.0) as (api, redis):
        session = await api.session()
        web = await api.register(session, ttl=None)
        await asyncio.sleep(0.2)
        before = await used_memory(redis)
        answered, refused = 0, None
        async with api.stream(session) as frames:
            # Uncapped, 3 results (twice the cap's worth).
            for _ in range(30 if cap else 3):
                await api.send(session, "/call client__web__highlight_row {}")
                while (event := await frames.event(timeout=20))["type"] != "client_tool_dispatched":
                    pass
                call_id = event["call_id"]
                keys_before = await session_keys(redis, settings.key_prefix, session)
                answer = await api.call(session, web["id"], call_id, "result", **result)
                if answer.status_code != 204:
                    assert refused_for_storage(answer), answer.text
                    refused = answer
                    assert await session_keys(redis, settings.key_prefix, session) == keys_before
                    # The call is still owed: the client may answer it once there is room (or it times out).
                    s = api.stack.broker.core.keys.session(session.id)
                    assert await redis.hexists(s.owed, call_id)
                    break
                while (await frames.event(timeout=20))["type"] != "run_completed":
                    pass
                answered += 1
        grown = await used_memory(redis) - before
        s = api.stack.broker.core.keys.session(session.id)
        counted = int(await redis.hget(s.meta, "bytes") or 0)
        if cap:
            assert refused is not None
            assert grown <= cap + SLACK, grown
            # A large result is checked for room before it is validated, and only for its own session's
            # token: another session's learns nothing (404, as for any of this session's routes).
            stranger = await api.session()
            path = f"/v1/sessions/{session.id}/clients/{web['id']}/calls/{call_id}/result"
            async with api.as_session(stranger) as client:
                assert (await client.post(path, json=result)).status_code == 404
            # The client's refusal ends nothing: cancelling the run still works, and so does deleting.
            async with api.as_session(session) as client:
                assert (await client.post(f"/v1/sessions/{session.id}/cancel")).status_code == 200

            path = f"/v1/sessions/{session.id}/clients/{web['id']}/calls/{call_id}/result"
            flood = Flood(session, "POST", path, json.dumps(result).encode())
            idle, busy = await under_flood(api, flood, tmp_path)
            check_round_trip(idle, busy)
        else:
            idle = busy = float("nan")
        report("largest results", cap, ("answered", answered), grown, counted, idle, busy)


@pytest.mark.parametrize("cap", CAPS)
async def test_queued_inputs_of_200_kb_stop_at_the_cap(
    settings: Settings, api_key: str, tmp_path: Path, cap: int
) -> None:
    text = "q" * 200_000
    async with own_stack(tmp_path, settings, api_key, cap) as (api, redis):
        session = await api.session(message_concurrency="queue")
        await api.send(session, "/sleep 30")  # the active run the inputs queue behind
        await asyncio.sleep(0.2)
        before = await used_memory(redis)
        queued, refused = 0, None
        async with api.as_session(session) as client:
            # Uncapped, 80 inputs (twice the cap's worth).
            for _ in range(400 if cap else 80):
                keys_before = await session_keys(redis, settings.key_prefix, session)
                answer = await client.post(f"/v1/sessions/{session.id}/events", json={"type": "input", "text": text})
                if answer.status_code != 200:
                    assert refused_for_storage(answer), answer.text
                    refused = answer
                    assert await session_keys(redis, settings.key_prefix, session) == keys_before
                    break
                queued += 1
        grown = await used_memory(redis) - before
        s = api.stack.broker.core.keys.session(session.id)
        counted = int(await redis.hget(s.meta, "bytes") or 0)
        if cap:
            assert refused is not None
            assert queued < 400
            assert grown <= cap + SLACK, grown

            body = json.dumps({"type": "input", "text": text}).encode()
            flood = Flood(session, "POST", f"/v1/sessions/{session.id}/events", body)
            idle, busy = await under_flood(api, flood, tmp_path)
            check_round_trip(idle, busy)
        else:
            idle = busy = float("nan")
        # Cancelling the waiting runs frees what their input held, and ends the sleeping run, which the
        # worker would otherwise wait out (its step timeout, 15 s) when the stack stops.
        async with api.as_session(session) as client:
            assert (await client.post(f"/v1/sessions/{session.id}/cancel")).status_code == 200
        report("queued inputs", cap, ("queued", queued), grown, counted, idle, busy)

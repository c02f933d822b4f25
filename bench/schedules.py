"""Schedules due at once: `count` `at` schedules (20 to a session, the most a session holds) all due at
the same instant, the harshest case of a minute's worth (`0 9 * * *` for every user fires at 09:00:00).
Each firing posts its text as the session's input; its lateness is the `message_user` event's time minus
the due time. Target: p99 under 1 s at 10,000 schedules. No baseline: nothing else in the deployment
posts input on a timer."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any

from bench.harness import Cluster, Figure, Size, cluster, created_at_s, figure, scripted_agent, summary
from bench.http import RawHttp

PER_SESSION = 20
# Requests in flight while the schedules are made.
_AT_ONCE = 100


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).isoformat().replace("+00:00", "Z")


async def _log(http: RawHttp, session_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    query = "?order=asc&limit=200"
    while True:
        status, content = await http.request("GET", f"/v1/sessions/{session_id}/events{query}")
        if status != 200:
            raise RuntimeError(f"reading the log of {session_id}: {status} {content[:200]!r}")
        page = json.loads(content)
        found += page["items"]
        if page["next_cursor"] is None:
            return found
        query = f"?order=asc&limit=200&after_seq={page['next_cursor']}"


async def _measure(running: Cluster, count: int) -> tuple[list[float], float]:
    """Each firing's lateness (ms), and how many schedules were made a second."""
    limit = asyncio.Semaphore(_AT_ONCE)
    http = RawHttp(running.url, running.key)

    async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        async with limit:
            status, content = await http.request("POST", path, body)
        if status != 201:
            raise RuntimeError(f"POST {path}: {status} {content[:200]!r}")
        answer: dict[str, Any] = json.loads(content)
        return answer

    try:
        async with running.client() as admin:
            agent_id = await scripted_agent(admin)
        started = time.monotonic()
        sessions = [
            s["id"]
            for s in await asyncio.gather(
                *(post("/v1/sessions", {"agent_id": agent_id}) for _ in range(-(-count // PER_SESSION)))
            )
        ]
        # Each schedule is due once every one is made: as long again as the sessions took a piece, twice over.
        per_post_s = (time.monotonic() - started) / len(sessions)
        due_s = round(time.time() + 3 + 2 * per_post_s * count)
        started = time.monotonic()
        await asyncio.gather(
            *(
                post(f"/v1/sessions/{sessions[n // PER_SESSION]}/schedules", {"at": _iso(due_s), "text": f"tick {n}"})
                for n in range(count)
            )
        )
        rate = count / (time.monotonic() - started)
        if time.time() >= due_s:
            raise RuntimeError(f"making {count} schedules took past their due time")
        await asyncio.sleep(due_s - time.time() + 3 + count / 5000)

        async def fired(session_id: str) -> list[float]:
            async with limit:
                log = await _log(http, session_id)
            return [
                (created_at_s(e) - due_s) * 1000
                for e in log
                if e["type"] == "message_user" and e.get("trigger") == "schedule"
            ]

        late = [ms for found in await asyncio.gather(*(fired(s) for s in sessions)) for ms in found]
    finally:
        http.close()
    if len(late) != count:
        raise RuntimeError(f"{len(late)} of {count} schedules fired within the wait")
    return late, rate


def run(size: Size) -> list[Figure]:
    count = size.pick(smoke=200, quick=10_000, full=10_000)
    with cluster() as running:
        late, rate = asyncio.run(_measure(running, count))
    found = summary(late)
    shape = f"{count:,} schedules due at one instant, {PER_SESSION} a session"
    return [
        figure("schedules", "firing lateness p50", found["p50"], "ms", note=shape),
        figure("schedules", "firing lateness p99", found["p99"], "ms", target="value < 1000", note=shape),
        figure("schedules", "firing lateness max", found["max"], "ms"),
        figure("schedules", "schedules made a second", rate, "/s", note="POST .../schedules, 100 in flight"),
    ]

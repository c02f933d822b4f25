"""Schedules due in the same minute, two ways, each on a fresh deployment: `count` `at` schedules, one a
session, their due times spread evenly over `window_s` (a minute; a few seconds at smoke size); then
`count` cron schedules due at the same instant (`M H * * *`, one minute of the day, as a deployment's
"every user at 9:00" is; at smoke size `at` schedules at one instant, which need not wait for a whole
minute), the figures named "same instant". Each firing posts its text as its session's
input and starts a run, which the worker then runs as any other; its lateness is the `message_user`
event's time minus its due time. (One a session: input that steers a session's active run joins its log
only when the run's next step begins, which would time the steps, not the firing.) Target: p99 under 1 s
with 10,000 due in one minute, on one worker, both ways. No baseline: nothing else in the deployment
posts input on a timer."""

from __future__ import annotations

import asyncio
import json
import math
import time
from datetime import UTC, datetime
from typing import Any

from bench.harness import Cluster, Figure, Size, cluster, created_at_s, figure, scripted_agent, summary
from bench.http import RawHttp

PER_SESSION = 1
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


def _cron_due(earliest_s: float) -> tuple[str, float]:
    """A cron expression due once a day, at the first minute that starts at or after `earliest_s`, and
    that minute (epoch s)."""
    minute = datetime.fromtimestamp(math.ceil(earliest_s / 60) * 60, tz=UTC)
    return f"{minute.minute} {minute.hour} * * *", minute.timestamp()


async def _measure(running: Cluster, count: int, window_s: float, *, cron: bool) -> tuple[list[float], float]:
    """Each firing's lateness (ms), and how many schedules were made a second. `window_s` 0: all due at
    one instant: cron schedules (the first whole minute once every one is made) or, without `cron`, `at`
    schedules (the smoke run's, which would otherwise wait up to a minute for the next whole one)."""
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
        first_s: float = round(time.time() + 3 + 2 * per_post_s * count)
        if window_s or not cron:
            due = {f"tick {n}": first_s + window_s * n / count for n in range(count)}
            bodies = [{"at": _iso(due[f"tick {n}"]), "text": f"tick {n}"} for n in range(count)]
            # Late firings are looked for a few seconds after the last due time (more for one instant: room
            # to measure a p99 many times the target).
            settle_s = 5.0 if window_s else 5.0 + count / 500
        else:
            expression, first_s = _cron_due(first_s)
            due = {f"tick {n}": first_s for n in range(count)}
            bodies = [{"cron": expression, "text": f"tick {n}"} for n in range(count)]
            # Room to measure a p99 many times the target: code that fired 500 a second is still measured.
            settle_s = 5.0 + count / 500
        started = time.monotonic()
        await asyncio.gather(
            *(post(f"/v1/sessions/{sessions[n // PER_SESSION]}/schedules", bodies[n]) for n in range(count))
        )
        rate = count / (time.monotonic() - started)
        if time.time() >= first_s:
            raise RuntimeError(f"making {count} schedules took past their due time")

        async def fired(session_id: str) -> list[float]:
            async with limit:
                log = await _log(http, session_id)
            return [
                (created_at_s(e) - due[e["message"]["content"][0]["data"]["text"]]) * 1000
                for e in log
                if e["type"] == "message_user" and e.get("trigger") == "schedule"
            ]

        # The logs are read from the target's second after the last due time (reading sooner would load the
        # deployment while firings are still on time), then again for the sessions not fired yet, until
        # `settle_s` past it: waiting the whole of it every time was most of a smoke run.
        last_s = first_s + window_s
        await asyncio.sleep(last_s + 1.0 - time.time())
        firings: dict[str, list[float]] = {}
        waiting = sessions
        while True:
            firings |= zip(waiting, await asyncio.gather(*(fired(s) for s in waiting)), strict=True)
            waiting = [s for s in waiting if len(firings[s]) < PER_SESSION]
            if not waiting or time.time() >= last_s + settle_s:
                break
            await asyncio.sleep(0.5)
        late = [ms for one in firings.values() for ms in one]
    finally:
        http.close()
    if len(late) != count:
        raise RuntimeError(f"{len(late)} of {count} schedules fired within the wait")
    return late, rate


def _figures(late: list[float], rate: float, shape: str, label: str) -> list[Figure]:
    found = summary(late)
    return [
        figure("schedules", f"firing lateness p50{label}", found["p50"], "ms", note=shape),
        figure("schedules", f"firing lateness p99{label}", found["p99"], "ms", target="value < 1000", note=shape),
        figure("schedules", f"firing lateness max{label}", found["max"], "ms"),
        figure("schedules", f"schedules made a second{label}", rate, "/s", note="POST .../schedules, 100 in flight"),
    ]


def measure(count: int, window_s: float, *, cron: bool = True) -> tuple[list[float], float]:
    """One deployment's firings: `_measure` on a fresh cluster."""
    with cluster() as running:
        return asyncio.run(_measure(running, count, window_s, cron=cron))


def run(size: Size) -> list[Figure]:
    count, window_s = size.pick(smoke=(200, 2.0), quick=(10_000, 60.0), full=(10_000, 60.0))
    late, rate = measure(count, window_s)
    spread = _figures(late, rate, f"{count:,} schedules due over {window_s:g} s, one a session", "")
    cron = size.pick(smoke=False, quick=True, full=True)
    late, rate = measure(count, 0.0, cron=cron)
    shape = f"{count:,} {'cron' if cron else 'at'} schedules due at one instant, one a session"
    return spread + _figures(late, rate, shape, " (same instant)")

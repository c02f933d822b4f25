"""A worker pool: several members serving the calls of one client registration, each call to one member.

    SWITCHBOARD_API_KEY=$(cat .switchboard/dev-api-key) .venv/bin/python examples/pool.py --members 3 --calls 12

It makes a session of the agent called "scripted" (made if there is none), registers one client, starts
`--members` pool members, and posts input that makes the scripted model call the client's tool `--calls`
times at once. Each member opens the registration's call stream,
`GET /v1/sessions/{sid}/clients/{cid}/calls/stream?prefetch=1`, and is handed calls no other member gets;
it acks each with the `Switchboard-Pool-Member` header its stream answered with (the member that acks owns
the call), does the work and posts the result. A call a member was handed but never acked (it died, or is
stuck) goes to another member after `SWITCHBOARD_POOL_CLAIM_S`. It prints which member answered which
call and exits 0 once the run completed with every call answered, else 1.

The members here are tasks of one process, each with a connection of its own: a member is a connection,
so the same `member()` runs just as well in processes or on machines of their own, given the session id,
a session token and the client id. `switchboard tools serve --processes N` is such a pool, for Python
functions. Needs httpx2, whose `sse()` reads the event stream (the switchboard install has it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections import defaultdict
from typing import Any

import httpx2

AGENT_NAME = "scripted"
SCRIPTED_MODEL = {"format": "openai_responses", "model": "scripted", "max_tokens": 1000, "context_window": 8000}
MEMBER_HEADER = "Switchboard-Pool-Member"
TOOL = {
    "name": "resize",
    "description": "Resize one image of the batch",
    "parameters": {"type": "object", "properties": {"image": {"type": "integer"}}, "required": ["image"]},
}
RUN_ENDS = ("run_completed", "run_failed", "run_cancelled")
WAIT_S = 60.0


class Failed(Exception):
    """A step the server refused, or the run's bad end; said for a person."""


def checked(answer: httpx2.Response, what: str) -> Any:
    if answer.is_error:
        raise Failed(f"{what}: {answer.status_code} {answer.text}")
    return answer.json() if answer.content else None


async def scripted_agent(admin: httpx2.AsyncClient) -> str:
    """The newest agent called AGENT_NAME, made with the scripted model if there is none."""
    params: dict[str, Any] = {"limit": 200}
    while True:
        page = checked(await admin.get("/v1/agents", params=params), "listing agents")
        for agent in page["items"]:
            if agent["name"] == AGENT_NAME:
                return str(agent["id"])
        if page["next_cursor"] is None:
            break
        params["after"] = page["next_cursor"]
    providers = checked(await admin.get("/v1/model-providers"), "listing model providers")["items"]
    scripted = next(p["id"] for p in providers if p["display_name"] == "Scripted")
    agent = checked(await admin.post("/v1/agents", json={"name": AGENT_NAME}), "creating the agent")
    version = {"model_provider_id": scripted, "model": SCRIPTED_MODEL}
    checked(await admin.post(f"/v1/agents/{agent['id']}/versions", json=version), "publishing its version")
    return str(agent["id"])


async def member(
    url: str, session_id: str, token: str, client_id: str, index: int, ready: asyncio.Event, answered: list[str]
) -> None:
    """One member of the pool: serve the calls handed to it, one at a time, until the registration ends."""
    path = f"/v1/sessions/{session_id}/clients/{client_id}"
    headers = {"Authorization": f"Bearer {token}"}
    # prefetch=1: handed no more than it can start, so the other calls go to free members.
    async with (
        httpx2.AsyncClient(base_url=url, headers=headers, timeout=httpx2.Timeout(10, read=None)) as http,
        http.sse(f"{path}/calls/stream", params={"prefetch": 1}, max_event_size=None) as source,
    ):
        stream = source.response
        if stream.status_code != 200:
            raise Failed(f"opening the call stream: {stream.status_code} {(await stream.aread()).decode()}")
        name = stream.headers[MEMBER_HEADER]
        ready.set()
        async for frame in source:  # each server-sent event (comments and retry hints are not events)
            if not frame.data:
                continue
            event = json.loads(frame.data)
            if event["type"] != "client_tool_dispatched":
                continue  # client_tool_failed: a call that ended while a member held it
            call = f"{path}/calls/{event['call_id']}"
            acked = await http.post(f"{call}/ack", headers={MEMBER_HEADER: name})
            if acked.status_code != 200:
                continue  # handed to another member meanwhile, or already settled: not ours
            await asyncio.sleep(0.2)  # the work
            text = f"image {event['arguments']['image']} resized by member {index}"
            checked(await http.post(f"{call}/result", json={"text": text}), f"answering {event['call_id']}")
            answered.append(event["call_id"])


async def wait_for_end(http: httpx2.AsyncClient, session_id: str, run_id: str) -> list[dict[str, Any]]:
    """The session's whole log once the run has ended."""
    async with asyncio.timeout(WAIT_S):
        while True:
            events: list[dict[str, Any]] = []
            params: dict[str, Any] = {"order": "asc", "limit": 200}
            while True:
                page = checked(await http.get(f"/v1/sessions/{session_id}/events", params=params), "reading events")
                events += page["items"]
                if page["next_cursor"] is None:
                    break
                params["after_seq"] = page["next_cursor"]
            if any(e["type"] in RUN_ENDS and e["run_id"] == run_id for e in events):
                return events
            await asyncio.sleep(0.1)


async def started(tasks: list[asyncio.Task[None]], ready: list[asyncio.Event]) -> None:
    """Return once every member's stream is open; raise what stopped a member that could not open one."""
    all_ready = asyncio.create_task(asyncio.wait([asyncio.create_task(e.wait()) for e in ready]))
    done, _ = await asyncio.wait([all_ready, *tasks], timeout=10, return_when=asyncio.FIRST_COMPLETED)
    all_ready.cancel()
    for task in tasks:
        if task in done:
            await task
    if all_ready not in done:
        raise Failed("the members' call streams did not open within 10 s")


async def main(url: str, key: str, members: int, calls: int) -> int:
    async with httpx2.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=10) as admin:
        agent_id = await scripted_agent(admin)
        session = checked(await admin.post("/v1/sessions", json={"agent_id": agent_id}), "creating the session")
    sid, token = session["id"], session["session_token"]
    print(f"session: {sid}")  # noqa: T201
    async with httpx2.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
        body = {"name": "pool", "lifetime": {"type": "never"}, "tools": [TOOL]}
        client = checked(await http.post(f"/v1/sessions/{sid}/clients", json=body), "registering the client")
        answered: dict[int, list[str]] = defaultdict(list)
        ready = [asyncio.Event() for _ in range(members)]
        tasks = [
            asyncio.create_task(member(url, sid, token, client["id"], i, ready[i], answered[i])) for i in range(members)
        ]
        try:
            await started(tasks, ready)
            lines = "\n".join(f'/call client__{client["name"]}__resize {{"image": {n}}}' for n in range(calls))
            posted = await http.post(f"/v1/sessions/{sid}/events", json={"type": "input", "text": lines})
            sent = checked(posted, "posting the input")
            events = await wait_for_end(http, sid, sent["run_id"])
        finally:
            # Leaving ends the members' streams; a call still owed would fail at once with client_gone.
            await http.delete(f"/v1/sessions/{sid}/clients/{client['id']}")
            _, running = await asyncio.wait(tasks, timeout=5)
            for task in running:
                task.cancel()
            for outcome in await asyncio.gather(*tasks, return_exceptions=True):
                if isinstance(outcome, Exception):
                    sys.stderr.write(f"pool: a member stopped: {outcome}\n")
    for index in range(members):
        print(f"member {index}: {len(answered[index])} calls")  # noqa: T201
    results = [e for e in events if e["type"] == "tool_result"]
    ok = [r for r in results if not r["is_error"]]
    end = next(e["type"] for e in events if e["type"] in RUN_ENDS)
    print(f"run: {end}, {len(ok)} of {calls} calls answered")  # noqa: T201
    return 0 if end == "run_completed" and len(ok) == calls else 1


def count(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 64:
        raise argparse.ArgumentTypeError(f"{text} is not between 1 and 64")
    return value


def run() -> int:
    parser = argparse.ArgumentParser(description="A pool of members serving one registration's calls.")
    parser.add_argument("--members", type=count, default=3, help="pool members (1 to 64; default 3)")
    parser.add_argument("--calls", type=count, default=12, help="calls the model makes at once (1 to 64)")
    args = parser.parse_args()
    url = os.environ.get("SWITCHBOARD_URL", "http://127.0.0.1:8000").rstrip("/")
    key = os.environ.get("SWITCHBOARD_API_KEY", "")
    if not key:
        sys.stderr.write("pool: set SWITCHBOARD_API_KEY to the key `switchboard up` printed\n")
        return 1
    try:
        return asyncio.run(main(url, key, args.members, args.calls))
    except Failed as error:
        sys.stderr.write(f"pool: {error}\n")
    except httpx2.TransportError as error:
        sys.stderr.write(f"pool: cannot reach {url} ({error!r}); is `switchboard up` running?\n")
    except TimeoutError:
        sys.stderr.write(f"pool: the run did not end within {WAIT_S:g} s; is a worker running?\n")
    return 1


if __name__ == "__main__":
    sys.exit(run())

"""A thin HTTP client over a running stack: the calls the API tests repeat."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import SecretStr

from common.addresses import Resolver
from switchboard.settings import Settings
from tests.helpers import HIGHLIGHT, SCRIPTED_CONFIG
from tests.sse import Frames
from tests.stack import Stack, running_stack

Event = dict[str, Any]
ENDS = ("run_completed", "run_failed", "run_cancelled")


@dataclass(frozen=True)
class Session:
    id: str
    token: str
    agent_id: str


class Api:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.key = stack.client()

    async def aclose(self) -> None:
        await self.key.aclose()

    def as_session(self, session: Session) -> httpx.AsyncClient:
        return self.stack.client(session.token)

    @contextlib.asynccontextmanager
    async def stream(
        self,
        session: Session,
        *,
        after_seq: int | str | None = None,
        headers: dict[str, str] | None = None,
        include: str | None = None,
    ) -> AsyncIterator[Frames]:
        """The session's event stream, as its token opens it."""
        params = {} if after_seq is None else {"after_seq": str(after_seq)}
        if include is not None:
            params["include"] = include
        path = f"/v1/sessions/{session.id}/events/stream"
        async with self.as_session(session) as client, client.stream("GET", path, params=params, headers=headers) as s:
            assert s.status_code == 200, await s.aread()
            assert s.headers["content-type"].startswith("text/event-stream")
            yield Frames(s)

    async def scripted_provider_id(self) -> str:
        providers = (await self.key.get("/v1/model-providers")).json()["items"]
        return str(next(p["id"] for p in providers if p["display_name"] == "Scripted"))

    async def agent(self, name: str = "agent", **config: Any) -> str:
        """A scripted agent with one published version; `config` adds to its config (extensions)."""
        agent = await self.key.post("/v1/agents", json={"name": name})
        assert agent.status_code == 201, agent.text
        version = {"model_provider_id": await self.scripted_provider_id(), **SCRIPTED_CONFIG, **config}
        published = await self.key.post(f"/v1/agents/{agent.json()['id']}/versions", json=version)
        assert published.status_code == 201, published.text
        return str(agent.json()["id"])

    async def session(self, agent_id: str | None = None, **config: Any) -> Session:
        agent_id = agent_id or await self.agent(**config)
        created = await self.key.post("/v1/sessions", json={"agent_id": agent_id})
        assert created.status_code == 201, created.text
        body = created.json()
        return Session(body["id"], body["session_token"], agent_id)

    async def register(
        self, session: Session, name: str = "web", ttl: int | None = 60, tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        lifetime = {"type": "never"} if ttl is None else {"type": "ttl", "data": {"seconds": ttl}}
        body = {"name": name, "lifetime": lifetime, "tools": [HIGHLIGHT] if tools is None else tools}
        async with self.as_session(session) as client:
            answer = await client.post(f"/v1/sessions/{session.id}/clients", json=body)
        assert answer.status_code == 201, answer.text
        registered: dict[str, Any] = answer.json()
        return registered

    async def send(self, session: Session, text: str, **extra: Any) -> dict[str, Any]:
        async with self.as_session(session) as client:
            body = {"type": "input", "text": text, **extra}
            answer = await client.post(f"/v1/sessions/{session.id}/events", json=body)
        assert answer.status_code == 200, answer.text
        sent: dict[str, Any] = answer.json()
        return sent

    async def call(self, session: Session, client_id: str, call_id: str, verb: str, **body: Any) -> httpx.Response:
        path = f"/v1/sessions/{session.id}/clients/{client_id}/calls/{call_id}/{verb}"
        async with self.as_session(session) as client:
            return await client.post(path, json=body) if body else await client.post(path)

    async def events(self, session: Session) -> list[Event]:
        path = f"/v1/sessions/{session.id}/events"
        return await whole_log(lambda params: self.key.get(path, params=params))

    async def wait_for(self, session: Session, done: Callable[[list[Event]], bool], timeout: float = 5) -> list[Event]:
        """Poll the log until `done` holds; the log at that moment."""
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout
        while True:
            events = await self.events(session)
            if done(events):
                return events
            if loop.time() > until:
                raise AssertionError(f"timed out; log: {[e['type'] for e in events]}")
            await asyncio.sleep(0.02)


async def whole_log(get_page: Callable[[dict[str, Any]], Awaitable[httpx.Response]]) -> list[Event]:
    """A session's whole event log, oldest first, a page at a time: `get_page(params)` GETs its events."""
    items: list[Event] = []
    params: dict[str, Any] = {"order": "asc", "limit": 200}
    while True:
        response = await get_page(params)
        assert response.status_code == 200, response.text
        page = response.json()
        items += page["items"]
        if page["next_cursor"] is None:
            return items
        params["after_seq"] = page["next_cursor"]


def types(events: list[Event]) -> list[str]:
    return [e["type"] for e in events]


def run_over(events: list[Event]) -> bool:
    return any(e["type"] in ENDS for e in events)


def of_type(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e["type"] == kind]


@contextlib.asynccontextmanager
async def running_api(
    settings: Settings,
    redis_url: str,
    api_key: str,
    update: dict[str, object],
    *,
    worker: bool = True,
    resolver: Resolver | None = None,
) -> AsyncIterator[Api]:
    """A stack of its own, with `update` applied to the test settings, and a client of it (provider
    host names resolved by `resolver`: see running_stack)."""
    configured = settings.model_copy(update={"bootstrap_api_key": SecretStr(api_key), **update})
    async with running_stack(configured, redis_url, worker=worker, resolver=resolver) as running:
        client = Api(running)
        try:
            yield client
        finally:
            await client.aclose()


def check_every_run_ended_once(events: list[Event]) -> None:
    opened = {e["run_id"] for e in events if e["type"] == "run_queued"}
    ended = Counter(e["run_id"] for e in events if e["type"] in ENDS)
    assert set(ended) == opened
    assert set(ended.values()) == {1}
    dispatched = Counter(e["call_id"] for e in events if e["type"] == "client_tool_dispatched")
    assert set(dispatched.values()) <= {1}
    results = Counter(e["call_id"] for e in events if e["type"] == "tool_result")
    assert set(results.values()) <= {1}
    calls = {e["call_id"] for e in events if e["type"] == "tool_call"}
    # Every call the model made has exactly one result: none is lost, none repeated.
    assert set(results) == calls
    assert all(e["type"] != "run_failed" for e in events), [e for e in events if e["type"] == "run_failed"]

"""Small builders shared by the tests."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families

from broker import Broker
from broker.services.credentials import operator_actor
from broker.services.providers import SCRIPTED_MODEL, SCRIPTED_PROVIDER_ID
from broker.services.runs import Committed, PlannedCall
from common.codec import loads, uuid7
from common.events.build import message_assistant, tool_call_block
from workers.catalog import Catalog
from workers.config import RunConfig
from workers.tools.builtins import BUILTINS

T = TypeVar("T")

SCRIPTED_MODEL_CONFIG = {
    "format": "openai_responses",
    "model": SCRIPTED_MODEL,
    "max_tokens": 1024,
    "context_window": 8192,
}
SCRIPTED_CONFIG: dict[str, Any] = {"model": SCRIPTED_MODEL_CONFIG}

HIGHLIGHT = {
    "name": "highlight_row",
    "description": "Highlight a row in the table the user is looking at.",
    # `row_id` is optional so the flow tests can call it bare; a wrong type still fails the schema check.
    "parameters": {"type": "object", "properties": {"row_id": {"type": "string"}}},
}


async def make_session(broker: Broker, config: dict[str, Any] | None = None, policy: str = "steer") -> str:
    """A session on a scripted agent, made through the broker directly."""
    agent = await broker.agents.create("test agent", uuid7())
    version = await broker.agents.publish(agent.id, uuid7(), config or SCRIPTED_CONFIG, SCRIPTED_PROVIDER_ID)
    session_id = uuid7()
    await broker.sessions.create(
        session_id,
        agent_id=agent.id,
        version_id=version.id,
        display_name="",
        created_by=operator_actor(broker.workspace_id),
        token=broker.sessions.new_token(session_id),
        policy=policy,
    )
    return session_id


async def start_run(broker: Broker, session_id: str, text: str = "go", run_id: str | None = None) -> str:
    """Submit input and begin the run's first step, as a worker would."""
    run = run_id or uuid7()
    submitted = await broker.runs.submit(session_id, run, uuid7(), text, "client")
    assert submitted.outcome == "new_run"
    # Begin it as the worker that took its work entry would, so the entry is done with.
    (entry,) = [e for e, member in await work_entries(broker, session_id) if member == f"s|{session_id}|{run}|0|0"]
    assert await broker.runs.begin(session_id, run, 0, 0, 25, entry) == "run"
    return run


async def commit(
    broker: Broker, session_id: str, run_id: str, calls: list[PlannedCall], config: dict[str, Any] | None = None
) -> Committed:
    """Commit step 0 with these calls, routed as a worker routes them."""
    catalog = Catalog.build(
        await broker.runs.offered(session_id), BUILTINS, RunConfig.of(config or SCRIPTED_CONFIG), broker.arguments
    )
    message = message_assistant([tool_call_block(c.call_id, c.name, c.arguments) for c in calls], SCRIPTED_MODEL)
    routed = [(c, await catalog.route(c)) for c in calls]
    return await broker.runs.commit(session_id, run_id, 0, 0, message, routed, "")


def visible(event: dict[str, Any]) -> bool:
    """What a default listing shows: everything but timing events."""
    return not (event["type"] == "custom" and event.get("kind") == "timing")


async def log_events(broker: Broker, session_id: str) -> list[dict[str, Any]]:
    return [e for e in (loads(data) for _, data in await broker.log.after(session_id, 0, 10_000)) if visible(e)]


async def types(broker: Broker, session_id: str) -> list[str]:
    return [event["type"] for event in await log_events(broker, session_id)]


async def work_entries(broker: Broker, session_id: str) -> list[tuple[str, str]]:
    """The work entries on the session's partition stream for this session: (entry id, member)."""
    stream = broker.core.keys.session(session_id).partition.work
    entries = [(bytes(i).decode(), bytes(f[b"w"]).decode()) for i, f in await broker.core.redis.xrange(stream)]
    return [(entry, member) for entry, member in entries if member.split("|")[1] == session_id]


async def held_work(broker: Broker, session_id: str) -> list[str]:
    """What holds a worker for the session: work entries not begun, claims, a running step's lease. A
    notable event's notice (`n|`, handed to webhooks) holds no run, so neither it nor its claim counts."""
    partition = broker.core.keys.session(session_id).partition
    held = await owed_work(broker, session_id)
    notices = {entry for entry, member in await work_entries(broker, session_id) if member.startswith("n|")}
    claims = [bytes(c).decode() for c in await broker.core.redis.zrange(partition.claims, 0, -1)]
    held += [claim for claim in claims if claim not in notices]
    if await broker.core.client_for(partition.steps).zscore(partition.steps, session_id) is not None:
        held.append(f"step lease of {session_id}")
    return held


async def owed_work(broker: Broker, session_id: str) -> list[str]:
    """The members of the work entries waiting for this session (none begun yet), notices aside."""
    return [member for _, member in await work_entries(broker, session_id) if not member.startswith("n|")]


def call(name: str, arguments: dict[str, Any] | None = None, call_id: str | None = None) -> PlannedCall:
    return PlannedCall(call_id or f"call_{uuid7().replace('-', '')}", name, arguments or {})


class Exposition:
    """The samples of a Prometheus text exposition: `figures("name", label="value")` reads one."""

    def __init__(self, text: str) -> None:
        self._samples = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def __call__(self, name: str, **labels: str) -> float:
        return self._samples[(name, tuple(sorted(labels.items())))]

    def has(self, name: str, **labels: str) -> bool:
        return (name, tuple(sorted(labels.items()))) in self._samples


async def aw(value: Awaitable[T]) -> T:
    """A redis-py async command as a coroutine (what `asyncio.create_task` takes)."""
    return await value

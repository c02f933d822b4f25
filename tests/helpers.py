"""Small builders shared by the tests."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from broker import Broker
from broker.codec import loads, uuid7
from broker.credentials import operator_actor
from broker.events import message_assistant, tool_call_block
from broker.providers import SCRIPTED_MODEL, SCRIPTED_PROVIDER_ID
from broker.runs import Committed, PlannedCall
from workers.catalog import Catalog
from workers.config import RunConfig
from workers.tools.builtins import BUILTINS

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
    "parameters": {"type": "object", "properties": {"row_id": {"type": "string"}}, "required": ["row_id"]},
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
    outcome, _ = await broker.runs.begin(session_id, run, 0, 0, 25)
    assert outcome == "run"
    return run


async def commit(
    broker: Broker, session_id: str, run_id: str, calls: list[PlannedCall], config: dict[str, Any] | None = None
) -> Committed:
    """Commit step 0 with these calls, routed as a worker routes them."""
    catalog = Catalog.build(await broker.runs.offered(session_id), BUILTINS, RunConfig.of(config or SCRIPTED_CONFIG))
    message = message_assistant([tool_call_block(c.call_id, c.name, c.arguments) for c in calls], SCRIPTED_MODEL)
    routed = [(c, catalog.route(c.name)) for c in calls]
    return await broker.runs.commit(session_id, run_id, 0, 0, message, routed, "")


def visible(event: dict[str, Any]) -> bool:
    """What a default listing shows: everything but timing events."""
    return not (event["type"] == "custom" and event.get("kind") == "timing")


async def log_events(broker: Broker, session_id: str) -> list[dict[str, Any]]:
    return [e for e in (loads(data) for _, data in await broker.log.after(session_id, 0, 10_000)) if visible(e)]


async def types(broker: Broker, session_id: str) -> list[str]:
    return [event["type"] for event in await log_events(broker, session_id)]


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

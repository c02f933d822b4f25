"""Small builders shared by the tests."""

from __future__ import annotations

from typing import Any

from broker import Broker
from broker.codec import loads, uuid7
from broker.credentials import operator_actor
from broker.providers import SCRIPTED_MODEL, SCRIPTED_PROVIDER_ID
from broker.runs import PlannedCall

SCRIPTED_CONFIG = {
    "model": {"format": "openai_responses", "model": SCRIPTED_MODEL, "max_tokens": 1024, "context_window": 8192}
}

HIGHLIGHT = {
    "name": "highlight_row",
    "description": "Highlight a row in the table the user is looking at.",
    "parameters": {"type": "object", "properties": {"row_id": {"type": "string"}}, "required": ["row_id"]},
}


async def make_session(broker: Broker) -> str:
    """A session on a scripted agent, made through the broker directly."""
    agent = await broker.agents.create("test agent", uuid7())
    version = await broker.agents.publish(agent.id, uuid7(), SCRIPTED_CONFIG, SCRIPTED_PROVIDER_ID)
    session_id = uuid7()
    await broker.sessions.create(
        session_id,
        agent_id=agent.id,
        version_id=version.id,
        display_name="",
        created_by=operator_actor(broker.workspace_id),
        token=broker.sessions.new_token(session_id),
    )
    return session_id


async def log_events(broker: Broker, session_id: str) -> list[dict[str, Any]]:
    return [loads(data) for _, data in await broker.log.after(session_id, 0, 10_000)]


async def types(broker: Broker, session_id: str) -> list[str]:
    return [event["type"] for event in await log_events(broker, session_id)]


def call(name: str, arguments: dict[str, Any] | None = None, call_id: str | None = None) -> PlannedCall:
    return PlannedCall(call_id or f"call_{uuid7().replace('-', '')}", name, arguments or {})

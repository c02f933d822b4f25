"""examples/refund_ask.py served as `switchboard tools serve` serves it (its member, in this loop) against
an in-process stack: the tool asks the person to confirm the amount, and the answer posted to the input
request decides what it does."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import sys
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

import pytest

from switchboard.settings import Settings
from switchboard.tool_member import Member, Target
from switchboard.typed_tools import load_tools, typed_tool
from tests.api.test_tool_server_calls import serving as serving_member
from tests.api_client import Api, Event, Session, of_type, running_api, whole_log
from tests.examples.support import EXAMPLES, text_of


def example_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_refund_ask", EXAMPLES / "refund_ask.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_module_loads_as_tools_serve_loads_it_and_the_call_is_not_an_argument(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "refund_ask", raising=False)
    [refund] = load_tools("refund_ask:TOOLS")
    sys.modules.pop("refund_ask", None)
    assert refund.call_parameter == "call"
    assert set(refund.declaration()["parameters"]["properties"]) == {"order_id", "amount"}


@pytest.fixture
async def roomy(settings: Settings, redis_url: str, api_key: str) -> AsyncIterator[Api]:
    """The default deadlines' pace: a person answers, not a test's half second."""
    update: dict[str, object] = {"ack_timeout_s": 10.0, "result_timeout_s": 10.0}
    async with running_api(settings, redis_url, api_key, update) as api:
        yield api


@contextlib.asynccontextmanager
async def serving(api: Api, session: Session, module: ModuleType) -> AsyncIterator[Member]:
    tool = typed_tool(module.refund)
    registered = await api.register(session, name="billing", tools=[tool.declaration()])
    member = Member(Target(api.stack.url, session.id, session.token, registered["id"]), {tool.name: tool}, 2)
    async with serving_member(member):
        yield member


async def extended(api: Api, session: Session) -> list[Event]:
    path = f"/v1/sessions/{session.id}/events"
    return await whole_log(lambda params: api.key.get(path, params={**params, "include": "extensions"}))


async def asked(api: Api, session: Session, count: int) -> Event:
    """The `count`th input request of the session, once it is there."""
    for _ in range(500):
        requests = of_type(await extended(api, session), "input_requested")
        if len(requests) >= count:
            return requests[count - 1]
        await asyncio.sleep(0.02)
    raise AssertionError("the tool never asked")


async def result_of(api: Api, session: Session, count: int) -> Event:
    events = await api.wait_for(session, lambda es: len(of_type(es, "tool_result")) >= count, timeout=15)
    return of_type(events, "tool_result")[count - 1]


async def answer(api: Api, session: Session, request_id: str, body: dict[str, Any]) -> None:
    async with api.as_session(session) as client:
        answered = await client.post(f"/v1/sessions/{session.id}/input-requests/{request_id}", json=body)
    assert answered.status_code == 200, answered.text


async def test_the_refund_waits_for_the_person_and_moves_only_the_amount_they_confirmed(roomy: Api) -> None:
    module = example_module()
    session = await roomy.session()
    async with serving(roomy, session, module):
        await roomy.send(session, f"/call client__billing__refund {json.dumps({'order_id': 'a-1001', 'amount': 40})}")
        request = await asked(roomy, session, 1)
        assert request["message"] == "Refund EUR 40.00 for order A-1001?"
        form = request["schema"]["properties"]
        assert form["amount"]["maximum"] == module.PAID["A-1001"]
        assert form["amount"]["default"] == 40
        # Nothing moves while the person has not answered.
        assert module.REFUNDED == {}
        await answer(
            roomy, session, request["request_id"], {"action": "accept", "content": {"amount": 25, "confirm": True}}
        )
        result = await result_of(roomy, session, 1)
        assert not result["is_error"], result
        assert text_of(result) == "refunded EUR 25.00 for order A-1001"
        assert module.REFUNDED == {"A-1001": 25.0}

        # A declined form refunds nothing, and the model is told so in the result.
        await roomy.send(session, '/call client__billing__refund {"order_id": "A-1002", "amount": 10}')
        request = await asked(roomy, session, 2)
        assert request["message"] == "Refund EUR 10.00 for order A-1002?"
        await answer(roomy, session, request["request_id"], {"action": "decline"})
        result = await result_of(roomy, session, 2)
        assert text_of(result) == "nothing was refunded for A-1002: the person did not confirm it (decline)"
        assert module.REFUNDED == {"A-1001": 25.0}

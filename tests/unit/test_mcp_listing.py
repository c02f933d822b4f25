"""What a grant's server sends, as the worker lets it reach the `mcp` client: a page of its tool list cut
to its bounds while still parsed JSON, and its notifications at a bounded rate."""

from __future__ import annotations

from typing import Any

import mcp.types as mt
import pytest
from mcp.shared.message import SessionMessage

from workers.mcp import guard as guard_module
from workers.mcp import hub
from workers.mcp.exchanges import Exchanges
from workers.mcp.guard import Guard
from workers.mcp.hub import accepted
from workers.mcp.listing import MAX_DESCRIPTION_CHARS, MAX_SCHEMA_CHARS, MAX_TOOLS, bounded, within


def tool(name: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}, **more}


@pytest.mark.parametrize(
    ("value", "limit", "fits"),
    [
        ({"a": "x" * 10}, 100, True),
        ({"a": "x" * 200}, 100, False),
        ([{"b": [1, 2, 3]}] * 50, 10_000, True),
        ([{"b": [1, 2, 3]}] * 5_000, 10_000, False),
        (None, 8, True),
    ],
)
def test_a_size_is_estimated_and_the_walk_stops_past_its_limit(value: Any, limit: int, fits: bool) -> None:
    assert within(value, limit) is fits


def test_a_page_keeps_at_most_256_tools_each_within_its_bounds_and_nothing_else_of_them() -> None:
    huge = {"type": "object", "properties": {f"p{i}": {"description": "x" * 1000} for i in range(300)}}
    tools = [
        tool("big", inputSchema=huge),
        tool("wordy", description="w" * (MAX_DESCRIPTION_CHARS + 100), outputSchema={"type": "object"}),
        tool("hinted", annotations={"title": "t" * 10_000}),
        "not a tool",
        *(tool(f"t{n}") for n in range(400)),
    ]
    page = bounded({"tools": tools, "nextCursor": "c2"}, "server")
    assert page["nextCursor"] == "c2"
    names = [t["name"] for t in page["tools"]]
    # The big schema and the non-tool are left out; the first 256 entries are all that was looked at.
    assert names[:2] == ["wordy", "hinted"]
    assert len(names) == MAX_TOOLS - 2
    wordy, hinted = page["tools"][:2]
    assert len(wordy["description"]) == MAX_DESCRIPTION_CHARS
    assert "outputSchema" not in wordy
    assert "annotations" not in hinted
    assert not within(huge, MAX_SCHEMA_CHARS)
    # What is kept validates as the client will validate it.
    assert mt.ListToolsResult.model_validate(page, by_name=False).tools[0].name == "wordy"


def test_a_page_that_is_not_a_list_of_tools_is_left_to_the_client() -> None:
    assert bounded({"tools": "nope"}, "server") == {"tools": "nope"}


def _notification(method: str) -> SessionMessage:
    return SessionMessage(mt.JSONRPCNotification(jsonrpc="2.0", method=method, params={"level": "info", "data": "x"}))


def test_notifications_pass_at_a_bounded_rate_the_rest_dropped_and_counted() -> None:
    changed: list[bool] = []
    dropped: list[bool] = []
    gate = Guard("server", Exchanges(), lambda: changed.append(True), lambda: dropped.append(True))
    flood = 1_000
    passed = sum(gate.admit(_notification("notifications/message")) is not None for _ in range(flood))
    # Within the burst (and what the bucket refilled meanwhile, a few at most).
    assert guard_module.NOTIFICATION_BURST <= passed < guard_module.NOTIFICATION_BURST + 10
    assert len(dropped) == gate.dropped == flood - passed
    # A list change marks the listing stale at once and goes no further, flood or not.
    assert gate.admit(_notification("notifications/tools/list_changed")) is None
    assert changed == [True]
    # Answers always pass.
    answer = SessionMessage(mt.JSONRPCResponse(jsonrpc="2.0", id=7, result={}))
    assert gate.admit(answer) is answer


def test_the_answer_to_a_listing_is_cut_before_the_client_sees_it() -> None:
    gate = Guard("server", Exchanges(), lambda: None, lambda: None)
    gate.sent(SessionMessage(mt.JSONRPCRequest(jsonrpc="2.0", id=3, method="tools/list")))
    tools = [tool(f"t{n}") for n in range(MAX_TOOLS + 50)]
    # A server may answer id 3 as "3": the client takes it for the same request, and so does the guard.
    admitted = gate.admit(SessionMessage(mt.JSONRPCResponse(jsonrpc="2.0", id="3", result={"tools": tools})))
    assert isinstance(admitted, SessionMessage)
    assert isinstance(admitted.message, mt.JSONRPCResponse)
    assert len(admitted.message.result["tools"]) == MAX_TOOLS
    # Another answer with that id is not a listing any more.
    again = SessionMessage(mt.JSONRPCResponse(jsonrpc="2.0", id=3, result={"tools": tools}))
    assert gate.admit(again) is again


async def test_checking_a_lists_schemas_stops_at_its_cpu_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "pattern": f"^a{i}$"} for i in range(50)}}
    listing = [mt.Tool(name=f"t{n}", input_schema=schema) for n in range(20)]
    assert len(await accepted(listing, "server")) == 20
    # Past the budget the rest are left out: with none, the first is checked and no other.
    monkeypatch.setattr(hub, "ACCEPT_BUDGET_S", 0.0)
    assert [tool.name for tool in await accepted(listing, "server")] == ["t0"]

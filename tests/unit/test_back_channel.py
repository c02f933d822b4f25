"""The way back to an older MCP caller (api/mcp/back_channel.py): what its session id says it answers,
and which replies are ours to take, parsed strictly (the caller writes both)."""

from __future__ import annotations

from typing import Any

import pytest

from api.mcp.back_channel import asks_of, request_id_of, session_id

ALL = frozenset({"elicitation.form", "elicitation.url", "sampling", "roots"})


@pytest.mark.parametrize("asks", [frozenset({"elicitation.form"}), frozenset({"sampling", "roots"}), ALL])
def test_a_session_id_says_what_its_caller_declared(asks: frozenset[str]) -> None:
    issued = session_id(asks)
    assert asks_of(issued) == asks
    # Visible ASCII only, as MCP requires of a session id, and unique.
    assert all(0x21 <= ord(c) <= 0x7E for c in issued)
    assert session_id(asks) != issued


@pytest.mark.parametrize(
    "header",
    [None, "", "abc", "swb1-short-1", "swb1-" + "A" * 22 + "-g", "swb1-" + "A" * 22 + "-ff", "x" * 10_000],
)
def test_any_other_session_id_says_nothing(header: str | None) -> None:
    assert asks_of(header) == frozenset()


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ({"jsonrpc": "2.0", "id": "switchboard-input:01abc-DEF_9", "result": {}}, "01abc-DEF_9"),
        ({"jsonrpc": "2.0", "id": "switchboard-input:r1", "error": {"code": 1, "message": "no"}}, "r1"),
        # A request (it has a method), one of the package's own ids, no result, bad ids.
        ({"jsonrpc": "2.0", "id": "switchboard-input:r1", "method": "ping"}, None),
        ({"jsonrpc": "2.0", "id": 3, "result": {}}, None),
        ({"jsonrpc": "2.0", "id": "switchboard-input:r1"}, None),
        ({"jsonrpc": "2.0", "id": "switchboard-input:", "result": {}}, None),
        ({"jsonrpc": "2.0", "id": "switchboard-input:a/b", "result": {}}, None),
        ({"jsonrpc": "2.0", "id": "switchboard-input:" + "a" * 65, "result": {}}, None),
        ([{"jsonrpc": "2.0", "id": "switchboard-input:r1", "result": {}}], None),
    ],
)
def test_only_replies_to_our_requests_are_taken(reply: Any, expected: str | None) -> None:
    assert request_id_of(reply) == expected

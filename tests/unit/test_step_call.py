"""commit_step.lua reads each tool call of a step as one JSON object by field name; `StepCall` in
broker/services/runs.py writes it. The fields the script reads and the fields the dataclass has are the same."""

from __future__ import annotations

import json
import re
from dataclasses import fields

from broker.scripts.source import script_text
from broker.services.runs import PlannedCall, Route, StepCall


def _read_fields() -> set[str]:
    """The fields commit_step.lua reads from a decoded call (`c.<field>`), comments aside."""
    body = re.sub(r"--[^\n]*", "", script_text("commit_step").body)
    # Each call is decoded once, into the list the loops walk as `c`.
    assert "planned[i] = cjson.decode(raw)" in body
    assert len(re.findall(r"for _, c in ipairs\(planned\) do", body)) == 3
    return set(re.findall(r"\bc\.(\w+)", body))


def test_the_script_reads_exactly_the_fields_step_call_has() -> None:
    assert _read_fields() == {field.name for field in fields(StepCall)}


def test_a_call_leaves_out_what_it_has_none_of() -> None:
    call = PlannedCall("call_1", "search", {"q": "x"})
    server = json.loads(StepCall.of(call, Route("server", "search")).encode())
    assert set(server) == {"call_id", "kind", "tool", "policy", "name", "tool_call", "error", "payload"}
    assert server["payload"] == '{"q":"x"}'
    client = json.loads(
        StepCall.of(
            call,
            Route(
                "client",
                "find",
                policy="require_approval",
                client_name="desk",
                client_id="c1",
                timeout_ms=5000,
                source="",
            ),
        ).encode()
    )
    assert (client["client_name"], client["client_id"], client["timeout_ms"]) == ("desk", "c1", 5000)
    assert not {"heartbeat_ms", "source", "schema"} & set(client)
    assert json.loads(client["approval"])["type"] == "approval_requested"
    # Nothing is ever null: Lua's cjson reads null as a value (cjson.null), not as absent.
    none = json.loads(StepCall.of(call, Route("none", "", error="no such tool")).encode())
    assert None not in none.values()
    assert not {"payload", "client_id", "client_name", "approval"} & set(none)

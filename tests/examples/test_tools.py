"""examples/tools.py: read as `switchboard tools serve` reads it, then served by it to a scripted run."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from switchboard.typed_tools import Call, as_text, load_tools, typed_tool
from tests.e2e.served import Served, scripted_session
from tests.examples.support import ENDS, EXAMPLES, of_type, session_log, text_of, wait_until

TOOLS = EXAMPLES / "tools.py"


def example_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_tools", TOOLS)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_module_loads_as_tools_serve_loads_it_with_a_schema_for_each_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLES)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "tools", raising=False)
    tools = load_tools("tools:TOOLS")
    sys.modules.pop("tools", None)
    names = [t.name for t in tools]
    assert names == [fn.__name__ for fn in example_module().TOOLS]
    assert 2 <= len(names) <= 3
    for tool in tools:
        declared = tool.declaration()
        assert declared["description"]
        assert declared["description"] != tool.name
        assert declared["parameters"]["type"] == "object"
        assert declared["parameters"]["additionalProperties"] is False
    # The Call parameter is the server's to give, not the model's to send.
    [export] = [t for t in tools if t.call_parameter is not None]
    assert export.declaration()["parameters"]["properties"] == {}


async def test_each_tool_answers_and_refuses_bad_arguments_as_an_error_result() -> None:
    module = example_module()
    status, quote = typed_tool(module.order_status), typed_tool(module.shipping_quote)
    known = sorted(module.ORDERS)[0]
    assert await status.run({"order_id": known}) == (as_text(module.order_status(known)), False)
    assert await quote.run({"weight_kg": 2, "country": "DE"}) == (module.shipping_quote(2, "DE"), False)
    bad: list[dict[str, Any]] = [
        {"order_id": 7},  # not a string
        {"order_id": known, "extra": 1},  # a field the schema does not have
        {},  # the required field missing
        {"order_id": "no-such-order"},  # the body refuses it
    ]
    for arguments in bad:
        text, is_error = await status.run(arguments)
        assert is_error, (arguments, text)
    text, is_error = await quote.run({"weight_kg": -1, "country": "DE"})
    assert is_error
    assert "-1" in text
    text, is_error = await quote.run({"weight_kg": 1, "country": "XX"})
    assert is_error
    assert "XX" in text


def test_a_cancelled_export_stops_early() -> None:
    call = Call("call_1")
    call.cancel()
    assert example_module().export_orders(call) == "cancelled"


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_tools_serve_serves_the_module_to_a_scripted_run(served: Served, tmp_path: Path) -> None:
    module = example_module()
    sid, token = asyncio.run(scripted_session(served.url, served.key, "tools example"))
    log = (tmp_path / "serve.log").open("wb")
    command = [sys.executable, "-m", "switchboard", "tools", "serve", "tools:TOOLS", "--url", served.url]
    # As the module's docstring says: from its folder, the token from the environment.
    server = subprocess.Popen(
        [*command, "--session", sid, "--name", "shop"],
        cwd=EXAMPLES,
        env={**os.environ, "SWITCHBOARD_SESSION_TOKEN": token},
        stdout=log,
        stderr=log,
    )
    try:
        wait_until("the registration", lambda: bool(of_type(session_log(served, sid), "client_registered")))
        [registered] = of_type(session_log(served, sid), "client_registered")
        assert [t["name"] for t in registered["tools"]] == [fn.__name__ for fn in module.TOOLS]
        known = sorted(module.ORDERS)[-1]
        lines = [
            f"/call client__shop__order_status {json.dumps({'order_id': known})}",
            '/call client__shop__shipping_quote {"weight_kg": 3, "country": "nowhere"}',
        ]
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=served.url, headers=headers, timeout=10) as http:
            sent = http.post(f"/v1/sessions/{sid}/events", json={"type": "input", "text": "\n".join(lines)})
        assert sent.status_code == 200, sent.text
        wait_until("the run to end", lambda: any(e["type"] in ENDS for e in session_log(served, sid)), 60)
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=30)
        log.close()
    assert code == 0, (tmp_path / "serve.log").read_text()
    events = session_log(served, sid)
    assert of_type(events, "run_completed"), [e["type"] for e in events]
    calls = {c["call_id"]: c["name"] for c in of_type(events, "tool_call")}
    results = {calls[r["call_id"]]: r for r in of_type(events, "tool_result")}
    status = results["client__shop__order_status"]
    assert not status["is_error"], status
    assert json.loads(text_of(status)) == module.order_status(known)
    quote = results["client__shop__shipping_quote"]
    assert quote["is_error"]
    assert "nowhere" in text_of(quote)
    # Stopping the server left its registration.
    assert [e["reason"] for e in of_type(events, "client_left")] == ["departed"]

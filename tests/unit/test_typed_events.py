"""Consumers read typed events (common.events.read), never dicts: no module of the doors, the session MCP
server, delegation, the CLI, the live feed, the worker's transcript, retention or the Python builders loads
an event's JSON itself or reads a field of one with `.get("<field>")`.

An AST scan: every `loads(...)` call and every `.get("<literal>", ...)` call in those modules is listed
below with what it reads, which is never a session event. A new one fails until it is listed with its
reason (or, better, reads a typed event), and an entry that no longer matches a call fails too, so the
lists stay exact.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = (
    *sorted((ROOT / "api" / "doors").glob("*.py")),
    *sorted((ROOT / "api" / "mcp").glob("*.py")),
    *sorted((ROOT / "delegate").rglob("*.py")),
    *sorted((ROOT / "switchboard").rglob("*.py")),
    ROOT / "api" / "sse.py",
    ROOT / "workers" / "transcript.py",
    ROOT / "broker" / "services" / "retention.py",
    ROOT / "common" / "events" / "build.py",
)

_AG_UI_OUT = "an AG-UI event the door writes, dumped by its pydantic model (api/doors/ag_ui_proto.py encodes it)"
_FRONTEND_TOOL = "a tool a frontend declares in its request"
_REGISTRATION_TOOL = "a tool as a registration declared it (broker.services.runs.offered), not an event"
_MCP_IN = "what an MCP caller sent (its capabilities, a request's params)"
_ASGI = "an ASGI message or scope of the MCP request being served"
_KEYED_ANSWER = "the door's own keyed answer (run id, start seq) or its refusal, as it was first given"

# (file, the `.get` call's receiver, the key): what the receiver is.
GETS: dict[tuple[str, str, str], str] = {
    ("api/doors/ag_ui_proto.py", "interrupt", "response_schema"): _AG_UI_OUT,
    ("api/doors/ag_ui_proto.py", "interrupt", "metadata"): _AG_UI_OUT,
    ("api/doors/ag_ui_proto.py", "event", "outcome"): _AG_UI_OUT,
    ("api/doors/ag_ui_proto.py", "event", "result"): _AG_UI_OUT,
    ("api/doors/ag_ui_proto.py", "event", "value"): _AG_UI_OUT,
    ("api/doors/ag_ui_proto.py", "event", "messages"): _AG_UI_OUT,
    ("api/doors/ag_ui_proto.py", "outcome", "interrupts"): _AG_UI_OUT,
    ("api/doors/ag_ui_proto.py", "outcome", "pending_tool_call_ids"): _AG_UI_OUT,
    ("api/doors/ag_ui_proto.py", "message", "content"): _AG_UI_OUT,
    ("api/doors/ag_ui_proto.py", "message", "tool_calls"): _AG_UI_OUT,
    ("api/doors/ag_ui_proto.py", "call", "type"): _AG_UI_OUT,
    ("api/doors/turns.py", "tool", "name"): _FRONTEND_TOOL,
    ("api/doors/turns.py", "tool", "description"): _FRONTEND_TOOL,
    ("api/doors/turns.py", "tool", "parameters"): _FRONTEND_TOOL,
    ("api/doors/turns.py", "answer", "error"): _KEYED_ANSWER,
    ("api/doors/turns.py", "error", "message"): _KEYED_ANSWER,
    ("api/mcp/tools.py", "tool", "annotations"): _REGISTRATION_TOOL,
    ("api/mcp/tools.py", "tool", "description"): _REGISTRATION_TOOL,
    ("api/mcp/tools.py", "tool", "parameters"): _REGISTRATION_TOOL,
    ("api/mcp/tools.py", "tool", "timeout_s"): _REGISTRATION_TOOL,
    ("api/mcp/tools.py", "tool", "heartbeat_s"): _REGISTRATION_TOOL,
    ("api/mcp/tools.py", "tool", "on_leave"): _REGISTRATION_TOOL,
    ("api/mcp/tasks.py", "tool", "task_support"): _REGISTRATION_TOOL,
    ("api/mcp/tools.py", "tool", "task_support"): _REGISTRATION_TOOL,
    ("api/mcp/tools.py", "tool", "asks_first"): _REGISTRATION_TOOL,
    ("api/mcp/sealing.py", "payload", "t"): "a request state this deployment sealed",
    ("api/mcp/task_status.py", "params.notifications.model_extra or {}", "taskIds"): _MCP_IN,
    ("api/mcp/task_status.py", "sent", "status"): "the task status notification this stream last sent",
    ("api/mcp/tasks.py", "declared", "extensions"): _MCP_IN,
    ("api/mcp/tasks.py", "ctx.params or {}", "_meta"): _MCP_IN,
    ("api/mcp/tracing.py", "meta or {}", "traceparent"): _MCP_IN,
    ("api/mcp/inputs.py", "wire", "content"): "an MCP caller's answer to an input request (its inputResponses entry)",
    ("api/mcp/back_channel.py", "reply", "id"): _MCP_IN,
    ("api/mcp/back_channel.py", "sent", "method"): _MCP_IN,
    ("api/mcp/back_channel.py", "sent", "params"): _MCP_IN,
    ("api/mcp/back_channel.py", "params", "capabilities"): _MCP_IN,
    ("api/mcp/back_channel.py", "message", "headers"): _ASGI,
    ("api/mcp/back_channel.py", "message", "more_body"): _ASGI,
    ("api/mcp/back_channel.py", "message", "body"): _ASGI,
    ("api/mcp/back_channel.py", "last", "more_body"): _ASGI,
    ("delegate/chat.py", "outcome", "client_id"): "the input route's answer (run id, outcome, run-scoped client)",
    ("switchboard/session_new.py", "http", "/v1/agents"): "an HTTP GET",
    ("switchboard/tool_member.py", "body", "content"): "the result body a member posts",
    ("switchboard/tool_member.py", "block", "type"): "a block of the result body a member posts",
    ("switchboard/tool_spans.py", "sys.modules", "opentelemetry.trace"): "the process's imported modules",
    ("switchboard/tool_spans.py", "carrier", "traceparent"): "the trace context OpenTelemetry's propagator wrote",
    ("switchboard/up.py", "body", "status"): "the API's /readyz answer",
    ("switchboard/up.py", "body", "instance"): "the API's /readyz answer",
}

# (file, the call as written): what it loads.
LOADS: dict[tuple[str, str], str] = {
    ("api/doors/bodies.py", "json.loads(bytes(raw))"): "a request body msgspec refused, parsed again to say where",
    ("api/doors/turns.py", "loads(body)"): _KEYED_ANSWER,
    ("api/mcp/back_channel.py", "loads(body)"): _MCP_IN,
    ("api/mcp/sealing.py", "json.loads(self._codec.unseal(token))"): "a request state this deployment sealed",
    ("delegate/chat.py", "json.loads(text)"): (
        "the event as chat() hands it to its caller (on_event, ChatResult.events: dicts, its public API); "
        "chat() itself reads the typed record decoded beside it"
    ),
    ("switchboard/tool_serve.py", "json.loads(written)"): "what a pool member wrote on its pipe as it exited",
    ("switchboard/up.py", "json.loads(held)"): "the pid and URL the `up` holding the data directory wrote",
    ("switchboard/up.py", "json.loads(answer.read(4096))"): "the API's /readyz answer",
}


def _calls(path: Path) -> list[ast.Call]:
    return [node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)]


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _gets() -> set[tuple[str, str, str]]:
    found = set()
    for path in SCANNED:
        for call in _calls(path):
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and call.args:
                key = call.args[0]
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    found.add((_name(path), ast.unparse(func.value), key.value))
    return found


def _loads() -> set[tuple[str, str]]:
    found = set()
    for path in SCANNED:
        for call in _calls(path):
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name == "loads":
                found.add((_name(path), ast.unparse(call)))
    return found


def test_the_scan_reaches_every_consumer() -> None:
    names = {_name(path) for path in SCANNED}
    assert {"api/doors/view.py", "api/mcp/tools.py", "delegate/chat.py", "switchboard/tool_member.py"} <= names


def test_no_consumer_reads_a_field_of_an_event_dict() -> None:
    found = _gets()
    assert found - GETS.keys() == set(), "a .get on something new: read a typed event, or list it with why"
    assert GETS.keys() - found == set(), "listed, but no longer there: take it off the list"


def test_no_consumer_loads_an_event_itself() -> None:
    found = _loads()
    assert found - LOADS.keys() == set(), "a loads of something new: decode events with common.events.read"
    assert LOADS.keys() - found == set(), "listed, but no longer there: take it off the list"

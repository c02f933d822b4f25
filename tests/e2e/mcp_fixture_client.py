"""The MCP conformance suite's server fixtures as one ordinary Switchboard client: each fixture tool the
suite calls (read from its scenarios in node_modules/@modelcontextprotocol/conformance) is a client tool,
answered over HTTP by a pool member (`switchboard.tool_member`, what `switchboard tools serve` runs) with a
runner of its own. A tool that needs the caller's input posts an input request for its call, as any
client does, and reads its answer back."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import wave
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2

from switchboard.tool_member import Runner, Target
from switchboard.typed_tools import Call

CLIENT_NAME = "conformance"
# The tools that ask declare a deadline of their own, so a caller that never answers fails the call
# (and its scenario) in seconds, not at the deployment's result deadline.
ASKING_TIMEOUT_S = 3
# protocol_error_job never answers: its call fails at this deadline.
PROTOCOL_ERROR_TIMEOUT_S = 1
# The task support the suite's Tasks scenarios want each of these tools to declare (SEP-2663).
TASK_SUPPORT = {
    "greet": "forbidden",
    "slow_compute": "optional",
    "failing_job": "required",
    "protocol_error_job": "optional",
    "confirm_delete": "optional",
    "multi_input": "optional",
    "test_tool_with_task": "required",
}
# The tools that ask before their work starts: a caller that takes tasks answers them in line first, and
# its answer makes the task (tasks-mrtr-composition); confirm_delete asks at once too, but is a task
# from the start (tasks-mrtr-input).
ASKS_FIRST = {"test_tool_with_task"}
# A 1x1 red PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
NAME_FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
# The suite's json-schema-2020-12 scenario's tool schema, as it gives it.
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


def _wav() -> str:
    """A tenth of a second of silence, as WAV."""
    out = io.BytesIO()
    with wave.open(out, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(8000)
        sound.writeframes(b"\0\0" * 800)
    return base64.b64encode(out.getvalue()).decode()


def _tool(name: str, properties: dict[str, Any] | None = None, *, timeout_s: int | None = None) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties or {}}
    declared: dict[str, Any] = {
        "name": name,
        "description": f"The conformance suite's {name} fixture",
        "parameters": parameters,
    }
    if name in TASK_SUPPORT:
        declared["task_support"] = TASK_SUPPORT[name]
    if name in ASKS_FIRST:
        declared["asks_first"] = True
    return declared | ({"timeout_s": timeout_s} if timeout_s is not None else {})


def declarations() -> list[dict[str, Any]]:
    """Every fixture tool as the registration route takes it."""
    plain = [
        "test_simple_text",
        "test_image_content",
        "test_audio_content",
        "test_embedded_resource",
        "test_multiple_content_types",
        "test_error_handling",
        "test_tool_with_progress",
    ]
    asks = [
        "test_missing_capability",
        "test_input_required_result_elicitation",
        "test_input_required_result_sampling",
        "test_input_required_result_list_roots",
        "test_input_required_result_request_state",
        "test_input_required_result_multiple_inputs",
        "test_input_required_result_multi_round",
        "test_input_required_result_tampered_state",
        "test_input_required_result_capabilities",
        "confirm_delete",
        "multi_input",
        "test_tool_with_task",
    ]
    return [
        *(_tool(name) for name in plain),
        *(_tool(name, timeout_s=ASKING_TIMEOUT_S) for name in asks),
        _tool("greet", {"name": {"type": "string"}}),
        _tool("slow_compute", {"seconds": {"type": "number"}}),
        _tool("failing_job"),
        _tool("protocol_error_job", timeout_s=PROTOCOL_ERROR_TIMEOUT_S),
        _tool("test_trigger_tool_change"),
        _tool(
            "test_custom_headers",
            {"region": {"type": "string", "x-mcp-header": "Region"}, "query": {"type": "string"}},
        ),
        {
            "name": "json_schema_2020_12_tool",
            "description": "Tool with JSON Schema 2020-12 features",
            "parameters": SCHEMA_2020_12,
        },
    ]


class AskRefusedError(Exception):
    """The server refused an input request (the caller cannot be asked that)."""


class Fixtures:
    """The runner of the fixture tools for the registration `target`; `http` posts its input requests."""

    def __init__(self, target: Target, http: httpx2.AsyncClient) -> None:
        self._target = target
        self._http = http
        self._extra_tool = False
        self._tools: dict[str, Callable[[dict[str, Any], Call], Awaitable[tuple[dict[str, Any], bool]]]] = {
            "test_simple_text": self._text("This is a simple text response for testing."),
            "test_image_content": self._content([{"type": "image", "media_type": "image/png", "data": PNG}]),
            "test_audio_content": self._content([{"type": "audio", "media_type": "audio/wav", "data": _wav()}]),
            "test_embedded_resource": self._content([_resource("test://embedded-resource", "text/plain", EMBEDDED)]),
            "test_multiple_content_types": self._content(
                [
                    {"type": "text", "text": "Multiple content types test:"},
                    {"type": "image", "media_type": "image/png", "data": PNG},
                    _resource("test://mixed-content-resource", "application/json", '{"test":"data","value":123}'),
                ]
            ),
            "test_error_handling": self._error,
            "test_tool_with_progress": self._progress,
            "test_missing_capability": self._missing_capability,
            "test_input_required_result_elicitation": self._elicitation,
            "test_input_required_result_sampling": self._sampling,
            "test_input_required_result_list_roots": self._roots,
            "test_input_required_result_request_state": self._request_state,
            "test_input_required_result_multiple_inputs": self._multiple,
            "test_input_required_result_multi_round": self._multi_round,
            "test_input_required_result_tampered_state": self._request_state,
            "test_input_required_result_capabilities": self._capabilities,
            "confirm_delete": self._confirm_delete,
            "multi_input": self._multi_input,
            "test_tool_with_task": self._with_task,
            "greet": self._greet,
            "slow_compute": self._slow_compute,
            "failing_job": self._failing_job,
            "protocol_error_job": self._protocol_error,
            "test_custom_headers": self._text("Headers test completed"),
            "test_trigger_tool_change": self._trigger_tool_change,
            "json_schema_2020_12_tool": self._text("JSON Schema 2020-12 tool called"),
        }

    def runner(self) -> Runner:
        async def run(name: str, arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
            tool = self._tools.get(name)
            if tool is None:
                return _said(f"no fixture tool {name}", True)
            try:
                return await tool(arguments, call)
            except AskRefusedError as refused:
                return _said(str(refused), True)

        return run

    @staticmethod
    def _text(text: str) -> Callable[[dict[str, Any], Call], Awaitable[tuple[dict[str, Any], bool]]]:
        async def answer(_arguments: dict[str, Any], _call: Call) -> tuple[dict[str, Any], bool]:
            return _said(text)

        return answer

    @staticmethod
    def _content(
        blocks: list[dict[str, Any]],
    ) -> Callable[[dict[str, Any], Call], Awaitable[tuple[dict[str, Any], bool]]]:
        async def answer(_arguments: dict[str, Any], _call: Call) -> tuple[dict[str, Any], bool]:
            return {"content": blocks}, False

        return answer

    async def _error(self, _arguments: dict[str, Any], _call: Call) -> tuple[dict[str, Any], bool]:
        return _said("This tool intentionally returns an error for testing", True)

    async def _progress(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        # Each report is sent in the background: spaced, so they reach the caller in order, and the last
        # before the result.
        for fraction in (0.0, 0.5, 1.0):
            call.progress(f"{round(fraction * 100)}/100", fraction)
            await asyncio.sleep(0.1)
        return _said("Progress test completed")

    async def ask(self, call: Call, body: dict[str, Any]) -> dict[str, Any]:
        """Post an input request for `call` and wait for its answer (`action`, `content`)."""
        asked = await self._http.post(f"{self._target.path}/calls/{call.call_id}/input-requests", json=body)
        if asked.status_code != 201:
            raise AskRefusedError(f"the input request was refused ({asked.status_code}): {asked.text}")
        path = f"/v1/sessions/{self._target.session_id}/input-requests/{asked.json()['request_id']}"
        while True:
            read = await self._http.get(path)
            if read.status_code == 200 and read.json()["state"] != "open":
                found: dict[str, Any] = read.json()
                return found
            await asyncio.sleep(0.05)

    async def _form(self, call: Call, key: str, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        answer = await self.ask(call, {"key": key, "message": message, "schema": schema})
        content: dict[str, Any] = answer.get("content") or {}
        return content

    async def _missing_capability(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        answer = await self.ask(call, _sampling_body("capability_probe", "Say anything"))
        return _said(json.dumps(answer.get("content")))

    async def _elicitation(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        content = await self._form(call, "user_name", "What is your name?", NAME_FORM)
        return _said(f"Hello, {content.get('name')}!")

    async def _sampling(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        answer = await self.ask(call, _sampling_body("capital_question", "What is the capital of France?", 100))
        return _said(_sampled_text(answer.get("content")))

    async def _roots(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        answer = await self.ask(call, {"key": "client_roots", "method": "roots/list", "params": {}})
        roots = (answer.get("content") or {}).get("roots") or []
        return _said("roots: " + ", ".join(str(root.get("uri")) for root in roots))

    async def _request_state(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        content = await self._form(call, "confirm", "Please confirm", schema)
        # The caller's request state was checked by the server before this answer reached the tool.
        return _said(f"state-ok: confirmed={content.get('ok')}")

    async def _multiple(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        name, greeting, roots = await asyncio.gather(
            self._form(call, "user_name", "What is your name?", NAME_FORM),
            self.ask(call, _sampling_body("greeting", "Generate a greeting", 50)),
            self.ask(call, {"key": "client_roots", "method": "roots/list", "params": {}}),
        )
        count = len((roots.get("content") or {}).get("roots") or [])
        return _said(f"{_sampled_text(greeting.get('content'))}, {name.get('name')} ({count} roots)")

    async def _multi_round(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        name = await self._form(call, "step1", "Step 1: What is your name?", NAME_FORM)
        color_form = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
        color = await self._form(call, "step2", "Step 2: What is your favorite color?", color_form)
        return _said(f"{name.get('name')} likes {color.get('color')}")

    async def _capabilities(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        # Asked only what the caller can answer: a request it declared no capability for is refused at once.
        # Both asked together: a form the caller cannot answer stays open for the session's other answerers,
        # so asking one after the other would wait on it.
        bodies = (
            {"key": "user_name", "message": "What is your name?", "schema": NAME_FORM},
            _sampling_body("capital_question", "What is the capital of France?", 100),
        )
        asked = await asyncio.gather(*(self.ask(call, body) for body in bodies), return_exceptions=True)
        for outcome in asked:
            if isinstance(outcome, BaseException) and not isinstance(outcome, AskRefusedError):
                raise outcome
        got = [
            str(body["key"])
            for body, outcome in zip(bodies, asked, strict=True)
            if not isinstance(outcome, BaseException)
        ]
        return _said("answered: " + ", ".join(got))

    async def _confirm_delete(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        schema = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
        content = await self._form(call, "confirm_delete", "Delete the file?", schema)
        return _said("deleted" if content.get("confirm") else "kept")

    async def _multi_input(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        # Nothing required: the suite answers both of this tool's keys with the same content.
        color_form = {"type": "object", "properties": {"color": {"type": "string"}}}
        name, color = await asyncio.gather(
            self._form(call, "name", "What is your name?", NAME_FORM),
            self._form(call, "color", "What is your favorite color?", color_form),
        )
        return _said(f"{name.get('name')} likes {color.get('color')}")

    async def _with_task(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        content = await self._form(call, "user_name", "What is your name?", NAME_FORM)
        await asyncio.sleep(0.5)
        return _said(f"Hello, {content.get('name')}! (from a task)")

    async def _trigger_tool_change(self, _arguments: dict[str, Any], _call: Call) -> tuple[dict[str, Any], bool]:
        # A real change of the session's tools: the registration's set, with an extra tool or without it.
        self._extra_tool = not self._extra_tool
        extra = [_tool("test_dynamic_tool")] if self._extra_tool else []
        changed = await self._http.put(f"{self._target.path}/tools", json={"tools": [*declarations(), *extra]})
        return _said(f"tool list changed ({changed.status_code})", changed.status_code != 200)

    async def _greet(self, arguments: dict[str, Any], _call: Call) -> tuple[dict[str, Any], bool]:
        return _said(f"Hello, {arguments.get('name')}!")

    async def _slow_compute(self, arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        seconds = float(arguments.get("seconds") or 0)
        await asyncio.sleep(seconds)
        return _said(f"computed after {seconds:g} s")

    async def _failing_job(self, _arguments: dict[str, Any], _call: Call) -> tuple[dict[str, Any], bool]:
        await asyncio.sleep(1.0)
        return _said("the job failed", True)

    async def _protocol_error(self, _arguments: dict[str, Any], call: Call) -> tuple[dict[str, Any], bool]:
        # A protocol-level failure in Switchboard's terms: no answer within the tool's deadline, so the
        # call fails (result_timeout) rather than carrying a tool error. The member stops this then.
        await asyncio.sleep(PROTOCOL_ERROR_TIMEOUT_S * 10)
        return _said("unreachable", True)


EMBEDDED = "This is an embedded resource content."


def _said(text: str, is_error: bool = False) -> tuple[dict[str, Any], bool]:
    return {"text": text, "is_error": is_error}, is_error


def _resource(uri: str, media_type: str, text: str) -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "media_type": media_type, "text": text}}


def _sampling_body(key: str, text: str, max_tokens: int = 100) -> dict[str, Any]:
    message = {"role": "user", "content": {"type": "text", "text": text}}
    return {"key": key, "method": "sampling/createMessage", "params": {"messages": [message], "maxTokens": max_tokens}}


def _sampled_text(content: Any) -> str:
    if isinstance(content, dict):
        inner = content.get("content")
        if isinstance(inner, dict) and isinstance(inner.get("text"), str):
            return str(inner["text"])
    return json.dumps(content)

"""Client tools from annotated Python functions: a JSON Schema per function (pydantic), arguments
validated against it, sync or async bodies, and a result as text.

`switchboard tools serve MODULE:OBJECT` loads OBJECT and reads it as tools: a function, a list or tuple of
functions, a dict of name to function, or an object with a `tools` attribute holding one of those.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import inspect
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, get_type_hints

import pydantic
from pydantic_core import PydanticSerializationError, to_json

from switchboard.tool_ask import Ask, InputAnswer, form_body, page_body

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolError(Exception):
    """A tool module that cannot be served as it is; the message says what to change."""


class Call:
    """The call a tool is serving. A tool that declares a parameter of this type gets it (the parameter is
    not part of the tool's schema): `cancelled` turns true when the call fails while it runs (cancelled,
    timed out, its run gone; an async tool is cancelled outright as well), `progress()` reports how far it
    is (`client_tool_progress`; it also keeps a tool with `heartbeat_s` alive), and `ask()` asks the person
    (an input request: a form, or `ask_url()` for a page to visit) and returns the answer; a sync tool uses
    `ask_sync()` and `ask_url_sync()`, which block its thread until then. `traceparent` is the call's span
    (W3C trace context) when the deployment traces, else None: a tool that traces its work makes its span a
    child of it (docs/observability.md)."""

    def __init__(
        self,
        call_id: str,
        report: Callable[[str | None, float | None], None] | None = None,
        ask: Ask | None = None,
        traceparent: str | None = None,
    ) -> None:
        self.call_id = call_id
        self.traceparent = traceparent
        self._report = report
        self._ask = ask
        # A sync tool's asks run on the loop that serves the call; they end with the call.
        self._loop = asyncio.get_running_loop() if ask is not None else None
        self._asking: set[concurrent.futures.Future[InputAnswer]] = set()
        self._cancelled = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()
        for asking in list(self._asking):
            asking.cancel()

    def progress(self, message: str | None = None, fraction: float | None = None) -> None:
        """Sent in the background; safe to call from a sync tool's thread."""
        if self._report is not None:
            self._report(message, fraction)

    async def ask(self, message: str, schema: dict[str, Any], *, key: str | None = None) -> InputAnswer:
        """Ask the person to fill in a form (`schema`: MCP's `requestedSchema`, a flat object of string,
        number, integer, boolean and enum properties). The call's result deadline and heartbeat wait
        meanwhile (its tool's `timeout_s` does not). Raises AskRefused when the server refuses it."""
        return await self._asked(form_body(message, schema, key))

    async def ask_url(self, message: str, url: str, *, key: str | None = None) -> InputAnswer:
        """Send the person to a page (URL mode: a sign-in, a secret typed where the tool never sees it);
        the answer is `accept` (with no content), `decline` or `cancel`."""
        return await self._asked(page_body(message, url, key))

    def ask_sync(self, message: str, schema: dict[str, Any], *, key: str | None = None) -> InputAnswer:
        """`ask()` for a sync tool: blocks its thread until the answer."""
        return self._asked_from_thread(form_body(message, schema, key))

    def ask_url_sync(self, message: str, url: str, *, key: str | None = None) -> InputAnswer:
        """`ask_url()` for a sync tool: blocks its thread until the answer."""
        return self._asked_from_thread(page_body(message, url, key))

    async def _asked(self, body: dict[str, Any]) -> InputAnswer:
        if self._ask is None:
            raise RuntimeError("no session serves this call: there is no one to ask")
        return await self._ask(body)

    def _asked_from_thread(self, body: dict[str, Any]) -> InputAnswer:
        if self._loop is None:
            raise RuntimeError("no session serves this call: there is no one to ask")
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # a tool's own thread, as it should be
        else:
            raise TypeError("ask_sync() would block the loop that answers it: an async tool awaits call.ask()")
        asking = asyncio.run_coroutine_threadsafe(self._asked(body), self._loop)
        self._asking.add(asking)
        try:
            if self.cancelled:
                asking.cancel()
            return asking.result()
        except concurrent.futures.CancelledError:
            raise RuntimeError("the call failed while it waited for an answer") from None
        finally:
            self._asking.discard(asking)


@dataclass(frozen=True)
class TypedTool:
    name: str
    description: str
    model: type[pydantic.BaseModel]
    function: Callable[..., Any]
    call_parameter: str | None = None

    def declaration(self) -> dict[str, Any]:
        """The tool as a registration declares it (`name`, `description`, `parameters`)."""
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        return {"name": self.name, "description": self.description, "parameters": schema}

    async def run(self, arguments: Mapping[str, Any], call: Call | None = None) -> tuple[str, bool]:
        """The call's result text and whether it is an error: invalid arguments and a raising body are
        error results, with a message the model can act on. A cancelled async body raises
        CancelledError."""
        try:
            parsed = self.model.model_validate(dict(arguments))
        except pydantic.ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in error.errors())
            return f"invalid arguments for {self.name}: {problems}", True
        values = {field: getattr(parsed, field) for field in type(parsed).model_fields}
        if self.call_parameter is not None:
            values[self.call_parameter] = call or Call("")
        try:
            if inspect.iscoroutinefunction(self.function):
                value = await self.function(**values)
            else:
                value = await asyncio.to_thread(self.function, **values)
        except Exception as error:
            return f"{type(error).__name__}: {error}", True
        try:
            return as_text(value), False
        except ToolError as error:
            return str(error), True


def as_text(value: Any) -> str:
    """A tool's return value as result text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    try:
        return to_json(value).decode()
    except PydanticSerializationError as error:
        raise ToolError(f"the tool returned a value that is not JSON-serialisable: {error}") from None


def typed_tool(function: Callable[..., Any], name: str | None = None) -> TypedTool:
    """A tool from a function whose parameters are all annotated; its docstring is the description."""
    tool_name = name or function.__name__
    if not _NAME.match(tool_name):
        raise ToolError(f"tool name {tool_name!r}: 1 to 64 letters, digits, '_' or '-'")
    hints = get_type_hints(function)
    fields: dict[str, Any] = {}
    call_parameter: str | None = None
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            raise ToolError(f"{tool_name}: parameter {parameter.name} must be a plain named parameter")
        if parameter.name not in hints:
            raise ToolError(f"{tool_name}: parameter {parameter.name} needs a type annotation")
        if hints[parameter.name] is Call:
            call_parameter = parameter.name
            continue
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (hints[parameter.name], default)
    config = pydantic.ConfigDict(extra="forbid")
    model = pydantic.create_model(f"{tool_name}_arguments", __config__=config, **fields)
    description = inspect.cleandoc(function.__doc__ or "").split("\n\n")[0].replace("\n", " ")
    return TypedTool(tool_name, description or tool_name, model, function, call_parameter)


def _functions(target: Any) -> Iterable[tuple[str | None, Callable[..., Any]]]:
    if hasattr(target, "tools") and not callable(target):
        target = target.tools
    if isinstance(target, Mapping):
        return [(str(name), fn) for name, fn in target.items()]
    if isinstance(target, list | tuple):
        return [(None, fn) for fn in target]
    if callable(target):
        return [(None, target)]
    raise ToolError(f"cannot read tools from a {type(target).__name__}: give a function, a list or a dict of them")


def load_tools(spec: str) -> list[TypedTool]:
    """The tools named by `MODULE:OBJECT` (the module importable from the current directory)."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ToolError(f"{spec!r}: expected MODULE:OBJECT, such as myapp.tools:TOOLS")
    # As `python -m` would: modules of the directory the server is started in are importable.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ToolError(f"cannot import {module_name}: {error}") from None
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ToolError(f"{module_name} has no {attribute}")
        target = getattr(target, part)
    tools = [typed_tool(fn, name) for name, fn in _functions(target)]
    names = [tool.name for tool in tools]
    if not tools:
        raise ToolError(f"{spec} holds no tools")
    if len(set(names)) != len(names):
        raise ToolError(f"{spec}: tool names repeat: {sorted(names)}")
    return tools

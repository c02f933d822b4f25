"""A server tool, and the deployment's tools by name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True, slots=True)
class ServerTool:
    """One tool: its arguments are a pydantic model (its JSON Schema is what the model sees); it returns
    text, or anything JSON can hold. A ValueError's text becomes the error result the model reads; any
    other exception is logged, and the result says only that the tool failed."""

    name: str
    description: str
    parameters: type[BaseModel]
    run: Callable[[Any], Awaitable[Any]]
    timeout_s: float = 30.0

    def schema(self) -> dict[str, Any]:
        return self.parameters.model_json_schema()


class Registry(Mapping[str, ServerTool]):
    """The deployment's server tools by name."""

    def __init__(self, tools: Iterable[ServerTool] = ()) -> None:
        self._tools = {tool.name: tool for tool in tools}

    def __getitem__(self, name: str) -> ServerTool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def with_tools(self, extra: Iterable[ServerTool]) -> Registry:
        return Registry([*self._tools.values(), *extra])

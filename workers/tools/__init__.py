"""Server tools: typed Python functions that run inside the worker, offered to the model by name."""

from __future__ import annotations

import importlib

from workers.tools.builtins import BUILTINS
from workers.tools.registry import Registry, ServerTool

__all__ = ["Registry", "ServerTool", "load_registry"]


def load_registry(path: str | None) -> Registry:
    """The built-ins, plus the tools of `module:attribute` (an iterable of ServerTool) when given."""
    if not path:
        return BUILTINS
    module, _, attribute = path.partition(":")
    extra = getattr(importlib.import_module(module), attribute or "TOOLS")
    return BUILTINS.with_tools(extra)

"""A page of a server's tool list as the worker keeps it, cut to its bounds while it is still the parsed
JSON (before the `mcp` client validates a single tool of it): at most `MAX_TOOLS` tools, each schema and
its annotations within their sizes (a tool past them is left out), its description cut, and nothing else
of the tool kept (an `outputSchema` the worker never uses, icons, metadata)."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

MAX_TOOLS = 256
# Characters of one tool's schema as JSON (estimated as it is walked, stopping at the bound); a larger one
# is left out.
MAX_SCHEMA_CHARS = 256 * 1024
MAX_ANNOTATION_CHARS = 4096
# A tool's description as a registration's may be; past it the description is cut.
MAX_DESCRIPTION_CHARS = 4096
_KEPT = ("name", "title", "description", "inputSchema", "annotations")


def within(value: Any, limit: int) -> bool:
    """Whether `value` (parsed JSON) would take at most `limit` characters as JSON, give or take its
    punctuation; stops as soon as it passes, so a large value costs no more than `limit` to refuse."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, dict):
            total += 2
            for key, inner in item.items():
                total += len(key) + 4
                stack.append(inner)
                if total > limit:
                    return False
        elif isinstance(item, list):
            total += 2
            for inner in item:
                total += 1
                stack.append(inner)
                if total > limit:
                    return False
        else:
            total += 8
        if total > limit:
            return False
    return True


def _name(tool: dict[str, Any]) -> str:
    return str(tool.get("name"))[:200]


def _kept(tool: Any, server: str) -> dict[str, Any] | None:
    if not isinstance(tool, dict):
        return None
    schema = tool.get("inputSchema")
    if not within(schema, MAX_SCHEMA_CHARS):
        logger.warning(
            "the MCP tool %r of %s is left out: its inputSchema is larger than %s characters",
            _name(tool), server, f"{MAX_SCHEMA_CHARS:,}",
        )  # fmt: skip
        return None
    kept = {key: tool[key] for key in _KEPT if key in tool}
    if not within(kept.get("annotations"), MAX_ANNOTATION_CHARS):
        del kept["annotations"]
    description = kept.get("description")
    if isinstance(description, str) and len(description) > MAX_DESCRIPTION_CHARS:
        kept["description"] = description[:MAX_DESCRIPTION_CHARS]
    return kept


def bounded(result: dict[str, Any], server: str) -> dict[str, Any]:
    """A `tools/list` result within the bounds above (anything that is not a list of tools is left for
    the client to refuse)."""
    tools = result.get("tools")
    if not isinstance(tools, list):
        return result
    if len(tools) > MAX_TOOLS:
        logger.warning("%s listed %d tools on one page: the first %d are kept", server, len(tools), MAX_TOOLS)
    # The page's other fields (its cursor, a revision's cache hints) are the client's to check.
    return {**result, "tools": [k for tool in tools[:MAX_TOOLS] if (k := _kept(tool, server)) is not None]}

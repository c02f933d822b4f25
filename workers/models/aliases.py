"""Tool names the provider caps get deterministic short aliases, mapped back on the way in."""

from __future__ import annotations

import re
from collections.abc import Iterable

from common.codec import sha256_hex

# OpenAI caps function names at 64; Anthropic at 64 or 128 depending on the model: 64 fits both.
PROVIDER_NAME_LIMIT = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def shorten(name: str, limit: int = PROVIDER_NAME_LIMIT) -> str:
    """The same long name always gets the same alias: a prefix of it, `_`, and ten hex of its hash."""
    if len(name) <= limit and not _UNSAFE.search(name):
        return name
    digest = sha256_hex(name)[:10]
    return _UNSAFE.sub("_", name)[: limit - 11] + "_" + digest


class Aliases:
    def __init__(self, names: Iterable[str], limit: int = PROVIDER_NAME_LIMIT) -> None:
        self._outward = {name: shorten(name, limit) for name in names}
        self._inward = {alias: name for name, alias in self._outward.items()}

    def outward(self, name: str) -> str:
        """The name the provider sees (a call in the history may name a tool no longer offered)."""
        return self._outward.get(name) or shorten(name)

    def inward(self, alias: str) -> str:
        """The real name behind what the model called."""
        return self._inward.get(alias, alias)

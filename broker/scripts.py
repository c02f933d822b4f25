"""The Lua scripts: read from `broker/lua`, includes expanded, registered once and loaded at start."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

from broker.errors import BrokerUnavailable, from_script_status, translate_redis_errors

_INCLUDE = re.compile(r"^--!include (\S+)$", re.MULTILINE)

SCRIPT_NAMES = (
    "ack_call",
    "answer_call",
    "begin_server_call",
    "begin_step",
    "cancel_run",
    "commit_step",
    "create_session",
    "delete_session",
    "dequeue",
    "enqueue_job",
    "expire_call",
    "finish_run",
    "idem_begin",
    "idem_finish",
    "lapse_client",
    "leave_client",
    "mint_token",
    "next_due",
    "ping_client",
    "post_input",
    "publish_version",
    "reclaim_step",
    "register_client",
    "renew_call",
    "renew_step",
    "resolve_approval",
    "server_result",
    "update_tools",
)


def _read(name: str) -> str:
    return resources.files("broker").joinpath("lua", name).read_text(encoding="utf-8")


def source(name: str) -> str:
    """A script's text with every `--!include lib/x.lua` line replaced by that library, once each."""
    seen: set[str] = set()

    def expand(match: re.Match[str]) -> str:
        path = match.group(1)
        if path in seen:
            return ""
        seen.add(path)
        return _INCLUDE.sub(expand, _read(path))

    return _INCLUDE.sub(expand, _read(f"{name}.lua"))


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [_text(item) for item in value]
    return value


@dataclass
class Scripts:
    """Every script registered on one client; `run` translates Redis errors and script refusals."""

    redis: Redis
    _scripts: dict[str, AsyncScript] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in SCRIPT_NAMES:
            self._scripts[name] = self.redis.register_script(source(name))

    async def load(self) -> None:
        """SCRIPT LOAD every script, so a broken one fails readiness rather than its first request."""
        with translate_redis_errors():
            for script in self._scripts.values():
                await self.redis.script_load(script.script)

    async def loaded(self) -> bool:
        with translate_redis_errors():
            present = await self.redis.script_exists(*(s.sha for s in self._scripts.values()))
        return all(present)

    async def raw(self, name: str, keys: list[str], args: Sequence[str | int | bytes]) -> Any:
        """Run a script and return its reply as text, without interpreting it."""
        with translate_redis_errors():
            return _text(await self._scripts[name](keys=keys, args=args))

    async def run(
        self, name: str, keys: list[str], args: Sequence[str | int | bytes], refusals: Mapping[str, str] | None = None
    ) -> list[Any]:
        """Run a script that answers `{status, ...}`; a non-zero status raises its error. Scripts refuse
        with a word (`session`, `client`, ...); `refusals` turns it into the message a person reads."""
        reply = await self.raw(name, keys, args)
        if not isinstance(reply, list) or not reply:
            raise BrokerUnavailable(f"script {name} answered {reply!r}")
        status = int(reply[0])
        if status != 0:
            word = str(reply[1])
            raise from_script_status(status, (refusals or {}).get(word, word))
        return list(reply[1:])

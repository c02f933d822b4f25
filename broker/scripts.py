"""The Lua scripts: read from `broker/lua`, includes expanded, registered once and loaded at start."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from hiredis import pack_command
from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from broker.errors import BrokerUnavailable, from_script_status, translate_redis_errors
from broker.keys import PartitionKeys

_INCLUDE = re.compile(r"^--!include (\S+)$", re.MULTILINE)

SCRIPT_NAMES = (
    "ack_call",
    "answer_call",
    "begin_server_call",
    "begin_step",
    "cancel_run",
    "claim_work",
    "commit_step",
    "create_session",
    "delete_session",
    "dequeue",
    "done_work",
    "expire_call",
    "finish_run",
    "idem_begin",
    "idem_finish",
    "keepers",
    "lapse_client",
    "leave_client",
    "mint_token",
    "ping_client",
    "pool_take",
    "post_input",
    "publish_version",
    "reclaim_step",
    "register_client",
    "renew_call",
    "renew_step",
    "resolve_approval",
    "server_result",
    "sweep",
    "take_work",
    "update_tools",
)


def _read(name: str) -> str:
    return resources.files("broker").joinpath("lua", name).read_text(encoding="utf-8")


# The library of a session's partition: a script that includes it gets the partition's keys last.
_PARTITION_LIBRARY = "lib/partition.lua"


def source(name: str) -> str:
    """A script's text with every `--!include lib/x.lua` line replaced by that library, once each."""
    return _expand(name)[0]


def _expand(name: str) -> tuple[str, set[str]]:
    """A script's text with its includes expanded, and the libraries it includes."""
    seen: set[str] = set()

    def expand(match: re.Match[str]) -> str:
        path = match.group(1)
        if path in seen:
            return ""
        seen.add(path)
        return _INCLUDE.sub(expand, _read(path))

    return _INCLUDE.sub(expand, _read(f"{name}.lua")), seen


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [_text(item) for item in value]
    return value


@dataclass
class Scripts:
    """Every script registered on one client; `run` translates Redis errors and script refusals.

    Every script that includes lib/partition.lua acts within one partition and is handed that partition's
    keys (`PartitionKeys.block`) after its own, so its whole call stays in the partition's slot."""

    redis: Redis
    _scripts: dict[str, AsyncScript] = field(default_factory=dict)
    _partitioned: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        for name in SCRIPT_NAMES:
            text, libraries = _expand(name)
            self._scripts[name] = self.redis.register_script(text)
            if _PARTITION_LIBRARY in libraries:
                self._partitioned.add(name)

    async def load(self) -> None:
        """SCRIPT LOAD every script, so a broken one fails readiness rather than its first request."""
        with translate_redis_errors():
            for script in self._scripts.values():
                await self.redis.script_load(script.script)

    async def loaded(self) -> bool:
        with translate_redis_errors():
            present = await self.redis.script_exists(*(s.sha for s in self._scripts.values()))
        return all(present)

    async def raw(
        self, name: str, keys: list[str], args: Sequence[str | int | bytes], partition: PartitionKeys | None = None
    ) -> Any:
        """Run a script and return its reply as text, without interpreting it. `partition` is required for,
        and only for, the scripts that include lib/partition.lua."""
        script = self._scripts[name]
        if (name in self._partitioned) != (partition is not None):
            raise ValueError(f"script {name}: a partition must be given exactly when it includes lib/partition.lua")
        if partition is not None:
            keys = [*keys, *partition.block]
        with translate_redis_errors():
            try:
                reply = await self._evalsha(script.sha, keys, args)
            except (NoScriptError, RedisConnectionError, RedisTimeoutError):
                # A flushed script cache or a dropped connection: redis-py's own path loads the script
                # again and retries with backoff, so the direct path below never has to.
                reply = await script(keys=keys, args=args)
            return _text(reply)

    async def _evalsha(self, sha: str, keys: list[str], args: Sequence[str | int | bytes]) -> Any:
        # Every operation is one EVALSHA, so redis-py's generic command path (retry wrapper, command
        # lookup, pure-Python RESP packing) was a fifth of the API's CPU on the hot routes. (hiredis's stub
        # types pack_command's argument as a 1-tuple; it takes any length.)
        pool = self.redis.connection_pool
        connection = await pool.get_connection("EVALSHA")
        try:
            command = pack_command(("EVALSHA", sha, len(keys), *keys, *args))  # type: ignore[arg-type]
            await connection.send_packed_command(command, False)
            return await connection.read_response()
        except ResponseError:
            raise
        except BaseException:
            # A command interrupted half-sent or with its reply owed must not hand its connection to
            # the next caller (LeanPool relies on it). read_response disconnects by itself; a send
            # interrupted half-way does not.
            await connection.disconnect()
            raise
        finally:
            await pool.release(connection)

    async def run(
        self,
        name: str,
        keys: list[str],
        args: Sequence[str | int | bytes],
        refusals: Mapping[str, str] | None = None,
        *,
        partition: PartitionKeys | None = None,
    ) -> list[Any]:
        """Run a script that answers `{status, ...}`; a non-zero status raises its error. Scripts refuse
        with a word (`session`, `client`, ...); `refusals` turns it into the message a person reads."""
        reply = await self.raw(name, keys, args, partition)
        if not isinstance(reply, list) or not reply:
            raise BrokerUnavailable(f"script {name} answered {reply!r}")
        status = int(reply[0])
        if status != 0:
            word = str(reply[1])
            raise from_script_status(status, (refusals or {}).get(word, word))
        return list(reply[1:])

"""The Lua scripts: read from `broker/lua`, includes expanded, registered once and loaded at start."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, cast

from hiredis import pack_command
from redis.asyncio import Redis
from redis.exceptions import (
    ClusterError,
    NoScriptError,
    ReadOnlyError,
    ResponseError,
    SlotNotCoveredError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from broker.client import LeanPool
from broker.errors import BrokerUnavailable, from_script_status, translate_redis_errors
from broker.keys import PartitionKeys
from broker.slots import SlotMap

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


def names_by_sha() -> dict[str, str]:
    """Every script's name by its SHA1 (what EVALSHA, SLOWLOG and MONITOR show)."""
    return {_sha(source(name)): name for name in SCRIPT_NAMES}


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()  # noqa: S324 (Redis's id for a script)


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


@dataclass(frozen=True, slots=True)
class _Script:
    text: str
    sha: str


# A script that meets more MOVED / ASK / TRYAGAIN answers than this fails (a slot moving back and forth).
_REDIRECTS = 8


class _NotSent(Exception):
    """Connecting failed: the command was never sent, so sending it elsewhere is safe."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


@dataclass
class Scripts:
    """Every script, loaded once per process; `run` translates Redis errors and script refusals.

    Every script that includes lib/partition.lua acts within one partition and is handed that partition's
    keys (`PartitionKeys.block`) after its own, so its whole call stays in the partition's slot.

    A script is sent once. Only an answer that says it did not run (NOSCRIPT: the server lost its script
    cache; MOVED, ASK, TRYAGAIN on a Cluster) sends it again; a connection lost or timed out after
    sending fails the call, since the script may have run, and running it twice could append an input
    twice or answer a result's retry with 409. Idempotency-Keys make a retry by the client safe instead.
    On a Cluster each script goes to its slot's node on that node's own pool (`broker/slots.py`)."""

    redis: Redis
    slots: SlotMap | None = None
    _scripts: dict[str, _Script] = field(default_factory=dict)
    _partitioned: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        for name in SCRIPT_NAMES:
            text, libraries = _expand(name)
            self._scripts[name] = _Script(text, _sha(text))
            if _PARTITION_LIBRARY in libraries:
                self._partitioned.add(name)

    def _masters(self) -> list[Redis]:
        if self.slots is None:
            return [self.redis]
        return [self.slots.client(address) for address in self.slots.masters()]

    async def load(self) -> None:
        """SCRIPT LOAD every script (on every master of a Cluster), so a broken one fails readiness rather
        than its first request."""
        with translate_redis_errors():
            if self.slots is not None:
                await self.slots.refresh()
            for client in self._masters():
                for script in self._scripts.values():
                    await client.script_load(script.text)

    async def loaded(self) -> bool:
        shas = [script.sha for script in self._scripts.values()]
        with translate_redis_errors():
            for client in self._masters():
                if not all(await client.script_exists(*shas)):
                    return False
        return True

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
        send = self._on_one if self.slots is None else self._on_cluster
        with translate_redis_errors():
            try:
                reply = await send(script.sha, keys, args)
            except NoScriptError:
                # It did not run: the server lost its script cache (a restart, a failover, a new node).
                await self.load()
                reply = await send(script.sha, keys, args)
            return _text(reply)

    async def _on_one(self, sha: str, keys: list[str], args: Sequence[str | int | bytes]) -> Any:
        try:
            return await evalsha(self.redis, sha, keys, args)
        except _NotSent as error:
            raise error.cause from None

    async def _on_cluster(self, sha: str, keys: list[str], args: Sequence[str | int | bytes]) -> Any:
        slots = self.slots
        assert slots is not None
        slot = slots.slot(keys[0])
        asking: str | None = None
        for _ in range(_REDIRECTS):
            address = asking or slots.address(slot)
            if address is None:
                await slots.refresh()
                address = slots.address(slot)
                if address is None:
                    raise SlotNotCoveredError(f"no master serves slot {slot}")
            try:
                return await evalsha(slots.client(address), sha, keys, args, asking=asking is not None)
            except _NotSent as error:
                # The node is down. A replica may have taken over: read the map again; if it still
                # names the dead node, its partitions fail fast until it is back or replaced.
                await slots.refresh()
                if slots.address(slot) == address:
                    raise error.cause from None
                asking = None
            except NoScriptError:
                raise
            except ReadOnlyError:
                # The map names a node that is a replica now (a failed master that came back): the
                # script did not run; read the map again.
                await slots.refresh()
                asking = None
            except ResponseError as error:
                asking = await slots.follow(error)
        raise ClusterError(f"slot {slot} kept moving; gave up after {_REDIRECTS} redirections")

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


async def evalsha(
    redis: Redis, sha: str, keys: list[str], args: Sequence[str | int | bytes], *, asking: bool = False
) -> Any:
    """One EVALSHA on a connection of `redis`'s pool, sent once: a reply lost after the send fails the
    call (`_NotSent` only when nothing was sent)."""
    # Every operation is one EVALSHA, so redis-py's generic command path (retry wrapper, command lookup,
    # pure-Python RESP packing) was a fifth of the API's CPU on the hot routes. (hiredis's stub types
    # pack_command's argument as a 1-tuple; it takes any length.) Connecting is retried by the pool
    # (nothing was sent yet); nothing after that is.
    # Every client is built on a LeanPool (broker/client.py), whose checkout is typed.
    pool = cast(LeanPool, redis.connection_pool)
    try:
        connection = await pool.get_connection()
    except (RedisConnectionError, RedisTimeoutError) as error:
        raise _NotSent(error) from error
    try:
        command = pack_command(("EVALSHA", sha, len(keys), *keys, *args))  # type: ignore[arg-type]
        if asking:
            # ASK names the node importing the slot; ASKING lets the next command run there once.
            await connection.send_packed_command(pack_command(("ASKING",)) + command, False)
            await connection.read_response()
        else:
            await connection.send_packed_command(command, False)
        return await connection.read_response()
    except ResponseError:
        raise
    except BaseException:
        # A command interrupted half-sent or with its reply owed must not hand its connection to the next
        # caller (LeanPool relies on it). read_response disconnects by itself; a send interrupted half-way
        # does not.
        await connection.disconnect()
        raise
    finally:
        await pool.release(connection)

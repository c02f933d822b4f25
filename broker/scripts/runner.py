"""The Lua scripts (broker/scripts/source.py builds their text): loaded at start on every master as one Redis
Functions library (Redis 7.0 and newer; an older server is refused, naming itself); run by name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from hiredis import pack_command
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from broker.errors import BrokerUnavailable, translate_redis_errors
from broker.keys import PartitionKeys
from broker.refusals import Outcome, refusal
from broker.scripts.batching import BATCH_LIMIT, Batcher, batch_layout
from broker.scripts.source import BATCHED, SCRIPT_NAMES, Value, layout, library, script_text
from broker.transport.client import LeanPool
from broker.transport.connect import masters
from broker.transport.slots import NotSent, SlotMap

__all__ = ["SCRIPT_NAMES", "Scripts"]


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [_text(item) for item in value]
    return value


# A script's keys and arguments by the names it declares; a list is a value that takes what is left
# (`--!key name...`).
Keys = Mapping[str, str | Sequence[str]]
Args = Mapping[str, Value | Sequence[Value]]
# Calls of one script (its name) of one partition, each its keys and arguments (Scripts.pipelined).
Group = tuple[str, PartitionKeys, Sequence[tuple[Keys, Args]]]


@dataclass
class Scripts:
    """Every script, loaded once per process; `run` translates Redis errors and scripts' refusals.

    Every script that includes lib/partition.lua acts within one partition and is handed that partition's
    keys (`PartitionKeys.block`) after its own, so its whole call stays in the partition's slot.

    A script is sent once. Only an answer that says it did not run (NOSCRIPT or `Function not found`: the
    server lost its scripts; MOVED, ASK, TRYAGAIN on a Cluster) sends it again; a connection lost or timed out after
    sending fails the call, since the script may have run, and running it twice could append an input
    twice or refuse a result's retry as a conflict. Idempotency-Keys make a retry by the client safe instead.
    On a Cluster each script goes to its slot's node on that node's own pool (`broker/transport/slots.py`). The hot
    routes' scripts go by group commit, per partition (`broker/scripts/batching.py`)."""

    nodes: Redis | SlotMap
    """The one Redis's client, or the Cluster's slot map."""
    max_session_bytes: int = 0
    """SWITCHBOARD_MAX_SESSION_BYTES, handed to every script of a partition as its last argument (0: no
    bound), as the partition's keys are its last keys (lib/core.lua counts and checks it)."""
    _heads: dict[str, tuple[str, str]] = field(default_factory=dict)
    _partitioned: set[str] = field(default_factory=set)
    _batcher: Batcher | None = None
    _loaded: bool = False

    def __post_init__(self) -> None:
        self._partitioned = {name for name in SCRIPT_NAMES if script_text(name).partitioned}
        self._heads = {name: ("FCALL", function) for name, function in library().functions.items()}
        self._batcher = Batcher(self._send, library().functions, library().batch)

    async def load(self) -> None:
        """Load the library on every master, so a broken script fails readiness rather than its first
        request; a server without Functions is refused. Loading the library again is harmless."""
        with translate_redis_errors():
            if isinstance(self.nodes, SlotMap):
                await self.nodes.refresh()
            for client in masters(self.nodes):
                try:
                    await client.function_load(library().text, replace=True)
                except ResponseError as error:
                    if "unknown command" not in str(error).lower():
                        raise
                    raise BrokerUnavailable(await _without_functions(client)) from None
        self._loaded = True

    async def loaded(self) -> bool:
        with translate_redis_errors():
            for client in masters(self.nodes):
                if not await client.function_list(library=library().name):
                    return False
        return self._loaded

    async def raw(self, name: str, keys: Keys, args: Args, partition: PartitionKeys | None = None) -> Any:
        """Run a script and return its reply as text, without interpreting it. `keys` and `args` are given by
        the names the script declares (broker/scripts/source.py). `partition` is required for, and only for, the
        scripts that include lib/partition.lua."""
        if (name in self._partitioned) != (partition is not None):
            raise ValueError(f"script {name}: a partition must be given exactly when it includes lib/partition.lua")
        if not self._loaded:
            await self.load()
        key_list, arg_list = layout(name).positional(keys, args)
        if partition is not None:
            arg_list.append(self.max_session_bytes)
        with translate_redis_errors():
            if self._batcher is not None and partition is not None and name in BATCHED:
                return _text(await self._batcher.run(partition.number, name, key_list, partition.block, arg_list))
            if partition is not None:
                key_list = [*key_list, *partition.block]
            return _text(await self._send(self._heads[name], key_list, arg_list))

    async def run_together(
        self, name: str, calls: Sequence[tuple[Keys, Args]], *, partition: PartitionKeys
    ) -> list[list[Any] | Exception]:
        """Several calls of one BATCHED script, all of `partition`, sent together (`Batcher.together`):
        each call's data, or the error it raised (a refusal included), in order."""
        if name not in BATCHED or name not in self._partitioned:
            raise ValueError(f"script {name}: only a BATCHED script of a partition runs together")
        if not self._loaded:
            await self.load()
        positional = []
        for keys, args in calls:
            key_list, arg_list = layout(name).positional(keys, args)
            positional.append((key_list, [*arg_list, self.max_session_bytes]))
        assert self._batcher is not None
        with translate_redis_errors():
            replies = await self._batcher.together(name, positional, partition.block)
        answers: list[list[Any] | Exception] = []
        for reply in replies:
            try:
                with translate_redis_errors():
                    if isinstance(reply, BaseException):
                        raise reply
                    answers.append(answered(name, _text(reply)))
            except Exception as error:
                answers.append(error)
        return answers

    async def pipelined(self, client: Redis, groups: Sequence[Group]) -> list[list[list[Any] | Exception]]:
        """Groups of calls on one node (`client`, all their partitions its own), sent as one pipeline: one
        round trip for a burst of visits rather than one a call. A group is several calls of one script of
        one partition; a BATCHED script's go as batches, any other's one FCALL each. Each call answers on
        its own (its data, or its error: a refusal, a redirect on a Cluster, a function the server lost,
        none of which ran it); a connection lost fails them all, raising BrokerUnavailable."""
        if not self._loaded:
            await self.load()
        commands: list[tuple[str | int | bytes, ...]] = []
        # Per group, per command: how many calls it carries (0: one call alone).
        shapes: list[list[int]] = []
        for name, partition, calls in groups:
            positional = []
            for keys, args in calls:
                key_list, arg_list = layout(name).positional(keys, args)
                positional.append((key_list, [*arg_list, self.max_session_bytes]))
            shape: list[int] = []
            if name in BATCHED and len(positional) > 1:
                for start in range(0, len(positional), BATCH_LIMIT):
                    chunk = positional[start : start + BATCH_LIMIT]
                    keys_sent, args_sent = batch_layout([(name, k, a) for k, a in chunk], partition.block)
                    commands.append(("FCALL", library().batch, len(keys_sent), *keys_sent, *args_sent))
                    shape.append(len(chunk))
            else:
                for key_list, arg_list in positional:
                    keys_sent = [*key_list, *partition.block]
                    commands.append(("FCALL", self._heads[name][1], len(keys_sent), *keys_sent, *arg_list))
                    shape.append(0)
            shapes.append(shape)
        with translate_redis_errors():
            replies = iter(await send_pipeline(client, commands))
        found: list[list[list[Any] | Exception]] = []
        for (name, _, _), shape in zip(groups, shapes, strict=True):
            answers: list[list[Any] | Exception] = []
            for carried in shape:
                reply = next(replies)
                if isinstance(reply, ResponseError) or not carried:
                    answers += [_answer(name, reply)] * max(carried, 1)
                else:
                    answers += [_answer(name, one) for one in reply]
            found.append(answers)
        return found

    async def _send(self, head: tuple[str, str], keys: list[str], args: Sequence[str | int | bytes]) -> Any:
        command, first_key = (*head, len(keys), *keys, *args), keys[0] if keys else ""
        try:
            return await self._send_command(command, first_key)
        except NoScriptError:
            # It did not run: the server lost its scripts or functions (a restart without persistence, a
            # new node, SCRIPT or FUNCTION FLUSH).
            await self.load()
            return await self._send_command(command, first_key)

    async def _send_command(self, command: tuple[str | int | bytes, ...], first_key: str) -> Any:
        if isinstance(self.nodes, SlotMap):
            return await self.nodes.send(first_key, lambda client, asking: send_once(client, command, asking=asking))
        try:
            return await send_once(self.nodes, command)
        except NotSent as error:
            raise error.cause from None

    async def run(self, name: str, keys: Keys, args: Args, *, partition: PartitionKeys | None = None) -> list[Any]:
        """Run a script and return its data; a refusal raises its error, with the message broker/refusals.py
        writes for its reason."""
        return answered(name, await self.raw(name, keys, args, partition))


def _answer(name: str, reply: Any) -> list[Any] | Exception:
    """A reply of a pipeline or batch, its error (translated) returned rather than raised."""
    try:
        with translate_redis_errors():
            if isinstance(reply, Exception):
                raise reply
            return answered(name, _text(reply))
    except Exception as error:
        return error


def answered(name: str, reply: Any) -> list[Any]:
    """A script's answer `{outcome, ...}`: the data after 'ok', or the refusal raised."""
    if not isinstance(reply, list) or not reply:
        raise BrokerUnavailable(f"script {name} answered {reply!r}")
    if reply[0] == Outcome.OK:
        return list(reply[1:])
    if len(reply) < 2:
        raise BrokerUnavailable(f"script {name} answered {reply!r}")
    raise refusal(str(reply[0]), str(reply[1]), reply[2:])


async def _without_functions(client: Redis) -> str:
    """Why a server that does not know FUNCTION is refused, naming it: Redis before 7.0 (or one with the
    command renamed away), which would run every script with its libraries on every call."""
    info = await client.info("server")
    name, version = (
        ("Valkey", info["valkey_version"]) if "valkey_version" in info else ("Redis", info.get("redis_version"))
    )
    return (
        f"{name} {version} does not run Functions (FUNCTION is an unknown command there): Switchboard needs "
        "Redis 7.0 or newer, or Valkey 8 or newer (Operating, Supported servers)"
    )


async def send_pipeline(redis: Redis, commands: Sequence[tuple[str | int | bytes, ...]]) -> list[Any]:
    """Commands on one connection of `redis`'s pool, sent once together; their replies in order, an error
    reply as its ResponseError (a function not found as NoScriptError). A connection lost fails them all."""
    pool = cast(LeanPool, redis.connection_pool)
    connection = await pool.get_connection()
    replies: list[Any] = []
    try:
        await connection.send_packed_command(b"".join(pack_command(command) for command in commands), False)  # type: ignore[arg-type]
        for _ in commands:
            try:
                replies.append(await connection.read_response())
            except ResponseError as error:
                replies.append(NoScriptError(str(error)) if str(error).startswith("Function not found") else error)
        return replies
    except BaseException:
        # As send_once: a connection with replies owed goes, not back to the next caller.
        await connection.disconnect()
        raise
    finally:
        await pool.release(connection)


async def send_once(redis: Redis, command: tuple[str | int | bytes, ...], *, asking: bool = False) -> Any:
    """One command on a connection of `redis`'s pool, sent once: a reply lost after the send fails the
    call (`NotSent` only when nothing was sent). A function that does not exist answers NoScriptError,
    as a script that does not does."""
    # Every operation is one script call, so redis-py's generic command path (retry wrapper, command lookup,
    # pure-Python RESP packing) was a fifth of the API's CPU on the hot routes. (hiredis's stub types
    # pack_command's argument as a 1-tuple; it takes any length.) Connecting is retried by the pool
    # (nothing was sent yet); nothing after that is.
    # Every client is built on a LeanPool (broker/transport/client.py), whose checkout is typed.
    pool = cast(LeanPool, redis.connection_pool)
    try:
        connection = await pool.get_connection()
    except (RedisConnectionError, RedisTimeoutError) as error:
        raise NotSent(error) from error
    try:
        packed = pack_command(command)  # type: ignore[arg-type]
        if asking:
            # ASK names the node importing the slot; ASKING lets the next command run there once.
            await connection.send_packed_command(pack_command(("ASKING",)) + packed, False)
            await connection.read_response()
        else:
            await connection.send_packed_command(packed, False)
        return await connection.read_response()
    except ResponseError as error:
        if str(error).startswith("Function not found"):
            raise NoScriptError(str(error)) from error
        raise
    except BaseException:
        # A command interrupted half-sent or with its reply owed must not hand its connection to the next
        # caller (LeanPool relies on it). read_response disconnects by itself; a send interrupted half-way
        # does not.
        await connection.disconnect()
        raise
    finally:
        await pool.release(connection)

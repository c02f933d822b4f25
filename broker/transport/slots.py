"""Where each Redis Cluster slot lives, and a pooled client per node: the path every script takes on a
Cluster.

Scripts are nearly all of Switchboard's Redis traffic, so they go straight to the node that owns their
keys' slot, on that node's own bounded pool, as one pre-packed FCALL (as on one Redis). redis-py's
cluster client would also route them, but a connection lost to one node makes it close every node's
connections, failing commands in flight on the healthy ones; here a dead node costs only its own
partitions. The map is read with CLUSTER SLOTS from any node that answers, at start and whenever a node
says MOVED or cannot be reached.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ClusterError,
    MovedError,
    NoScriptError,
    ReadOnlyError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)

from broker.transport.client import create_redis

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A command that meets more MOVED / ASK / TRYAGAIN answers than this fails (a slot moving back and forth).
REDIRECTS = 8


class NotSent(Exception):
    """Connecting failed: the command was never sent, so sending it elsewhere is safe."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def node_url(url: str, host: str, port: int) -> str:
    """`url` pointed at another node: the same scheme, credentials and options, database 0."""
    parts = urlsplit(url)
    credentials, at, _ = parts.netloc.rpartition("@")
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return urlunsplit((parts.scheme, f"{credentials}{at}{where}", "/0", parts.query, ""))


@dataclass
class SlotMap:
    """Slot ranges to node addresses, and a client per node."""

    name: str
    max_connections: int
    url: str = "redis://localhost:6379"
    """The URL the Cluster was reached at: every node is reached the same way (its scheme, so `rediss://`
    is TLS to every node, its credentials and its query's options, such as `ssl_ca_certs`)."""
    _starts: list[int] = field(default_factory=list)
    _ranges: list[tuple[int, int, str]] = field(default_factory=list)
    _clients: dict[str, Redis] = field(default_factory=dict)
    _refreshing: asyncio.Lock = field(default_factory=asyncio.Lock)
    # Nodes that did not answer the last time they were asked: asked last.
    _silent: set[str] = field(default_factory=set)

    @staticmethod
    def slot(key: str) -> int:
        return int(key_slot(key.encode()))

    def address(self, slot: int) -> str | None:
        """`host:port` of the master serving `slot`, as last read; None when no node serves it."""
        at = bisect.bisect_right(self._starts, slot) - 1
        if at < 0:
            return None
        start, end, address = self._ranges[at]
        return address if start <= slot <= end else None

    def masters(self) -> list[str]:
        """Every master that serves a slot, as last read."""
        return list(dict.fromkeys(address for _, _, address in self._ranges))

    def client(self, address: str) -> Redis:
        client = self._clients.get(address)
        if client is None:
            host, _, port = address.rpartition(":")
            # One quick retry: a Cluster node that refuses connections is down or failing over, and the
            # slot map, not the same node again, says where to go (so its partitions fail fast).
            client = create_redis(
                node_url(self.url, host, int(port)), name=self.name, max_connections=self.max_connections, retries=1
            )
            self._clients[address] = client
        return client

    async def send(self, key: str | bytes, command: Callable[[Redis, bool], Awaitable[T]]) -> T:
        """`command(client, asking)` on the master serving `key`'s slot: the one path every command takes on
        a Cluster. Answers that say it did not run there are followed: MOVED (the map is read again), ASK
        (`asking`: the command goes after ASKING, on the node importing the slot), TRYAGAIN (a moment
        later), a replica where the map named a master; so is a node that would not connect (`NotSent`),
        once the map names another. Nothing that may have run is sent again."""
        slot = self.slot(key.decode() if isinstance(key, bytes) else key)
        asking: str | None = None
        for _ in range(REDIRECTS):
            address = asking or self.address(slot)
            if address is None:
                await self.refresh()
                address = self.address(slot)
                if address is None:
                    raise SlotNotCoveredError(f"no master serves slot {slot}")
            try:
                return await command(self.client(address), asking is not None)
            except NotSent as error:
                # The node is down. A replica may have taken over: read the map again; if it still names
                # the dead node, its partitions fail fast until it is back or replaced.
                await self.refresh()
                if self.address(slot) == address:
                    raise error.cause from None
                asking = None
            except NoScriptError:
                raise
            except ReadOnlyError:
                # The map names a node that is a replica now (a failed master that came back): the command
                # did not run; read the map again.
                await self.refresh()
                asking = None
            except ResponseError as error:
                asking = await self.follow(error)
        raise ClusterError(f"slot {slot} kept moving; gave up after {REDIRECTS} redirections")

    async def follow(self, answer: ResponseError) -> str | None:
        """Act on an answer that says a command did not run on the node it was sent to: the node to send
        it to next with ASKING, or None to look its slot up again (the map read again after MOVED, a
        moment's wait after TRYAGAIN). Any other error is raised. (redis-py parses the redirections
        into their own exceptions; MOVED is a kind of ASK there, so it is asked first.)"""
        if isinstance(answer, MovedError):
            await self.refresh([f"{answer.host}:{answer.port}"])
            return None
        if isinstance(answer, AskError):
            return f"{answer.host}:{answer.port}"
        if isinstance(answer, TryAgainError):
            # A slot mid-migration with its keys split between two nodes: they settle within a moment.
            await asyncio.sleep(0.05)
            return None
        raise answer

    async def refresh(self, seeds: Iterable[str] = ()) -> None:
        """Read the slot map again from the first node that answers (`seeds`, then every node known)."""
        async with self._refreshing:
            known = [address for address in self._clients if address not in self._silent]
            for address in dict.fromkeys([*seeds, *known, *self._silent]):
                try:
                    reply = await self.client(address).execute_command("CLUSTER SLOTS")  # type: ignore[no-untyped-call]
                except Exception as error:
                    logger.debug("CLUSTER SLOTS from %s failed: %s", address, error)
                    self._silent.add(address)
                    continue
                self._silent.discard(address)
                self._learn(reply, address)
                return
        logger.warning("no Redis Cluster node answered CLUSTER SLOTS; keeping the old slot map")

    def _learn(self, reply: list[list[object]], asked: str) -> None:
        ranges = []
        for entry in reply:
            start, end, master = int(entry[0]), int(entry[1]), entry[2]  # type: ignore[call-overload]
            host = master[0].decode() if isinstance(master[0], bytes) else str(master[0])  # type: ignore[index]
            # A node that does not know its own address answers '' for it.
            address = f"{host or asked.rpartition(':')[0]}:{int(master[1])}"  # type: ignore[index]
            ranges.append((start, end, address))
        ranges.sort()
        self._ranges = ranges
        self._starts = [start for start, _, _ in ranges]

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()

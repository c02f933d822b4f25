"""The live workers, and which partitions each one keeps.

Every worker calls `beat` every quarter of `SWITCHBOARD_KEEPER_LEASE_S`, which keeps it in the set for
three quarters of a lease (so a worker that dies is out of the set, and seen to be by the others' next
beat, within one lease of its last beat); the answer is the set of live
workers, and each partition belongs to the one of them that rendezvous hashing picks (`owner`): a pure
function of the set, so every worker reaches the same split without talking to the others, and a
worker joining or leaving moves only its own share. A worker that stops beating drops out of the set
within a lease, and the others then keep its partitions. For a moment after a change two workers may
both keep a partition; nothing they do there is unsafe to do twice.
"""

from __future__ import annotations

import hashlib

from broker.core import Core
from broker.keys import KeySpace
from broker.partitions import PARTITIONS
from broker.transport.connect import open_redis


def _weight(worker: str, partition: int) -> bytes:
    return hashlib.blake2b(f"{worker}/{partition}".encode(), digest_size=8).digest()


def owned(workers: list[str], me: str) -> frozenset[int]:
    """The partitions `me` keeps among `workers` (which include `me`)."""
    if me not in workers:
        return frozenset()
    return frozenset(p for p in range(PARTITIONS) if max(workers, key=lambda w: _weight(w, p)) == me)


async def host_healthy(url: str, key_prefix: str, host: str) -> bool:
    """Whether `host`'s worker refreshed its health key within the last lease (`worker --check`): one
    connection of its own, with no scripts loaded, opened and closed."""
    connected = await open_redis(url, name="switchboard-check")
    try:
        return bool(await connected.commands.exists(KeySpace(key_prefix).worker_health(host)))
    finally:
        await connected.aclose()


class Keepers:
    def __init__(self, core: Core) -> None:
        self._core = core

    async def beat(self, worker: str, host: str, lease_s: float) -> tuple[int, list[str]]:
        """Stay in the set for one lease (`lease_s`, the worker's SWITCHBOARD_KEEPER_LEASE_S; and refresh
        `host`'s health key): Redis's time (ms) and the live workers."""
        keys = self._core.keys
        lease_ms = round(lease_s * 1000)
        reply = await self._core.scripts.run(
            "keepers",
            {"keepers": keys.keepers, "health": keys.worker_health(host)},
            {"worker": worker, "stay_ms": lease_ms * 3 // 4, "health_ms": lease_ms},
        )
        return int(reply[0]), [str(member) for member in reply[1:]]

    async def leave(self, worker: str, host: str) -> None:
        """Leave the set at once, so the others keep this worker's partitions without waiting a lease."""
        keys = self._core.keys
        await self._core.scripts.run(
            "keepers",
            {"keepers": keys.keepers, "health": keys.worker_health(host)},
            {"worker": worker, "stay_ms": 0, "health_ms": 0},
        )

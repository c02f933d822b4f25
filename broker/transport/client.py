"""The only place a Redis client is built (`broker/transport/connect.py` picks one Redis or a Cluster)."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


class LeanPool(ConnectionPool):
    """redis-py's pool, without its per-command toll and with a bound that waits rather than fails.

    redis-py takes an asyncio lock and probes the socket with a non-blocking read (a syscall) on every
    checkout, which measured as half of what a hot route costs the API. The probe looks for a connection
    handed back with a reply still unread; redis-py never hands one back: a command interrupted while
    sending or reading (an error, a cancellation) disconnects its connection first, and a disconnected
    connection is connected again here. Checkout is synchronous up to that connect, so two callers are
    never given the same connection.

    At `max_connections` in use, a caller waits for one to come back (redis-py's plain pool raises
    instead), so a burst of thousands of stream opens queues on a handful of connections rather than
    opening one per request: a command holds its connection for one round trip, so a few carry more
    commands than a Python process can issue.

    It keeps its own idle and busy sets (redis-py's are private to its pool) and makes connections with
    the pool's public `make_connection`; everything the pool does with connections goes through the
    methods overridden here."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._waiters: deque[asyncio.Future[None]] = deque()
        self.reset()

    def reset(self) -> None:
        self._idle: list[AbstractConnection] = []
        self._busy: set[AbstractConnection] = set()

    @property
    def idle(self) -> int:
        """Connections checked in, ready to be handed out."""
        return len(self._idle)

    @property
    def busy(self) -> int:
        """Connections handed out and not yet given back."""
        return len(self._busy)

    def can_get_connection(self) -> bool:
        return bool(self._idle) or len(self._busy) < self.max_connections

    async def get_connection(self, command_name: object = None, *keys: object, **options: object) -> AbstractConnection:
        while not self.can_get_connection():
            await self._wait_for_release()
        connection = self._idle.pop() if self._idle else self.make_connection()  # type: ignore[no-untyped-call]
        self._busy.add(connection)
        if not connection.is_connected:
            try:
                await connection.connect()
            except BaseException:
                await self.release(connection)
                raise
        return connection

    async def _wait_for_release(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(POOL_WAIT_S):
                await waiter
        except BaseException as error:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.done() and not waiter.cancelled():
                # Woken, then cancelled before it could check out: the wake goes to the next waiter.
                self._wake_one()
            if isinstance(error, TimeoutError):
                raise RedisConnectionError(f"no Redis connection came free within {POOL_WAIT_S:g} s") from None
            raise

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def release(self, connection: AbstractConnection) -> None:
        # Without an await, so a cancellation cannot land between handing the connection back and waking a
        # waiter (a waiter never woken), nor leave a pipeline holding a connection it gave back. redis-py
        # awaits an event dispatch in between, for streaming re-authentication, which is not used here.
        self._busy.remove(connection)
        self._idle.append(connection)
        self._wake_one()

    async def disconnect(self, inuse_connections: bool = True) -> None:
        connections = [*self._idle, *self._busy] if inuse_connections else list(self._idle)
        done = await asyncio.gather(*(connection.disconnect() for connection in connections), return_exceptions=True)
        failed = next((result for result in done if isinstance(result, BaseException)), None)
        if failed is not None:
            raise failed


# No command waits on Redis by design (nothing blocks: the alarms come by pub/sub, read with their own
# timeouts), so a reply not back within this never comes: a half-open connection, a server gone without
# a reset. The caller fails (its command may have run, as after any lost reply) instead of waiting forever.
SOCKET_TIMEOUT_S = 30.0

# A caller waiting longer than this for a free connection gets BrokerUnavailable (a pool exhausted by
# a bug must fail requests, not hang them).
POOL_WAIT_S = 10.0


def create_redis(url: str, *, name: str = "switchboard", max_connections: int = 16, retries: int = 5) -> Redis:
    """A client with short reconnect retries, so a restarting Redis costs a pause rather than errors. Its
    connections carry `name` (CLIENT SETNAME), so CLIENT LIST shows which role holds which connection."""
    pool = LeanPool.from_url(
        url,
        client_name=name,
        decode_responses=False,
        max_connections=max_connections,
        health_check_interval=15,
        socket_keepalive=True,
        socket_timeout=SOCKET_TIMEOUT_S,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=retries),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
    )
    return Redis.from_pool(pool)

"""The only place a Redis client is built."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


class LeanPool(ConnectionPool):
    """redis-py's pool without its per-command toll: it takes an asyncio lock and probes the socket with a
    non-blocking read (a syscall) on every checkout, which measured as half of what a hot route costs the
    API. The probe looks for a connection handed back with a reply still unread; redis-py never hands one
    back: a command interrupted while sending or reading (an error, a cancellation) disconnects its
    connection first, and a disconnected connection is connected again here. Checkout is synchronous up
    to that connect, so two callers can never be given the same connection."""

    async def get_connection(self, command_name: object = None, *keys: object, **options: object) -> AbstractConnection:
        connection: AbstractConnection = self.get_available_connection()  # type: ignore[no-untyped-call]
        if not connection.is_connected:
            try:
                await connection.connect()  # type: ignore[no-untyped-call]
            except BaseException:
                await self.release(connection)
                raise
        return connection


def create_redis(url: str, *, name: str = "switchboard", max_connections: int = 256) -> Redis:
    """A client with short reconnect retries, so a restarting Redis costs a pause rather than errors. Its
    connections carry `name` (CLIENT SETNAME), so CLIENT LIST shows which role holds which connection."""
    pool = LeanPool.from_url(
        url,
        client_name=name,
        decode_responses=False,
        max_connections=max_connections,
        health_check_interval=15,
        socket_keepalive=True,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=5),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
    )
    return Redis.from_pool(pool)

"""The only place a Redis client is built."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


def create_redis(url: str, *, name: str = "switchboard", max_connections: int = 256) -> Redis:
    """A client with short reconnect retries, so a restarting Redis costs a pause rather than errors. Its
    connections carry `name` (CLIENT SETNAME), so CLIENT LIST shows which role holds which connection."""
    redis: Redis = Redis.from_url(
        url,
        client_name=name,
        decode_responses=False,
        max_connections=max_connections,
        health_check_interval=15,
        socket_keepalive=True,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=5),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
    )
    return redis

"""The only place a Redis client is built."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


def create_redis(url: str, *, max_connections: int = 256) -> Redis:
    """A client with short reconnect retries, so a restarting Redis costs a pause rather than errors."""
    redis: Redis = Redis.from_url(
        url,
        decode_responses=False,
        max_connections=max_connections,
        health_check_interval=15,
        socket_keepalive=True,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=5),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
    )
    return redis

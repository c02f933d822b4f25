"""The error hierarchy as the broker raises it (defined in common/errors.py), and the translation of Redis
errors into it at the broker boundary: nothing above the broker sees a Redis type."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from redis import exceptions as redis_errors

from common.errors import (
    AddressRefused,
    BrokerUnavailable,
    Conflict,
    ErrorCode,
    Forbidden,
    InvalidRequest,
    NotFound,
    RedisUnreachable,
    SessionFull,
    SwitchboardError,
    TooManyRequests,
    Unauthorized,
)

__all__ = [
    "AddressRefused",
    "BrokerUnavailable",
    "Conflict",
    "ErrorCode",
    "Forbidden",
    "InvalidRequest",
    "NotFound",
    "RedisUnreachable",
    "SessionFull",
    "SwitchboardError",
    "TooManyRequests",
    "Unauthorized",
    "translate_redis_errors",
]


@contextmanager
def translate_redis_errors() -> Iterator[None]:
    """Turn redis-py's exceptions into `BrokerUnavailable`, so nothing above the broker sees Redis types."""
    try:
        yield
    except redis_errors.NoScriptError as error:
        raise BrokerUnavailable(f"a broker script was not loaded: {error}") from error
    except (redis_errors.ClusterDownError, redis_errors.TryAgainError) as error:
        raise RedisUnreachable(
            f"the Redis node holding this data is failing over or down ({error}); retry shortly"
        ) from error
    except redis_errors.ResponseError as error:
        raise BrokerUnavailable(f"Redis refused a broker command: {error}") from error
    except (redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.ClusterError) as error:
        raise RedisUnreachable(f"Redis is unreachable ({error}); retry shortly") from error
    except redis_errors.SlotNotCoveredError as error:
        raise RedisUnreachable(f"no Redis node holds this data now ({error}); retry shortly") from error
    except redis_errors.RedisError as error:
        raise BrokerUnavailable(f"Redis failed: {error}") from error
    except redis_errors.RedisClusterException as error:
        raise BrokerUnavailable(f"Redis Cluster failed: {error}") from error

"""The one error hierarchy of Switchboard (the broker translates Redis errors into it at its boundary:
broker/errors.py).

    SwitchboardError                 code            meaning
    ├── InvalidRequest               invalid_request the request breaks a rule; the message names field and limit
    │   └── AddressRefused           invalid_request a model provider's address is not one this deployment allows
    ├── Unauthorized                 unauthorized    no credential, or one that is unknown, revoked or expired
    ├── Forbidden                    forbidden       a credential without the permission, or another workspace
    ├── NotFound                     not_found       nothing there that this credential may see
    ├── Conflict                     conflict        the state does not allow it (a settled call, a reused key)
    │   └── SessionFull              conflict        the session's storage has no room for the write
    ├── TooManyRequests              too_many_requests
    └── BrokerUnavailable            internal        Redis answered with an error (or could not be reached:)
        └── RedisUnreachable         unavailable     the Redis holding this request's data did not answer

The API maps each code to its HTTP status in one table (`api/errors.py`); workers log them.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    INVALID_REQUEST = "invalid_request"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    CONFLICT = "conflict"
    PRECONDITION_FAILED = "precondition_failed"
    CLIENT_OUTDATED = "client_outdated"
    TOO_MANY_REQUESTS = "too_many_requests"
    INTERNAL = "internal"
    UNAVAILABLE = "unavailable"


class SwitchboardError(Exception):
    """Base of every error Switchboard raises on purpose; `message` is written for a person to act on."""

    code: ErrorCode = ErrorCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(SwitchboardError):
    code = ErrorCode.INVALID_REQUEST


class AddressRefused(InvalidRequest):
    """A provider's host resolves to an address this deployment does not let providers use (loopback,
    private, metadata...): refused when a provider is created or moved, a failed run when it is connected to."""


class Unauthorized(SwitchboardError):
    code = ErrorCode.UNAUTHORIZED


class Forbidden(SwitchboardError):
    code = ErrorCode.FORBIDDEN


class NotFound(SwitchboardError):
    code = ErrorCode.NOT_FOUND


class Conflict(SwitchboardError):
    code = ErrorCode.CONFLICT


class SessionFull(Conflict):
    """The session's storage has no room for the write (SWITCHBOARD_MAX_SESSION_BYTES), and nothing of
    it was stored. Unlike the other conflicts it says nothing of the thing written (a call may still be
    owed, an approval undecided): the same write is taken once there is room."""


class TooManyRequests(SwitchboardError):
    code = ErrorCode.TOO_MANY_REQUESTS

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class BrokerUnavailable(SwitchboardError):
    code = ErrorCode.INTERNAL


class RedisUnreachable(BrokerUnavailable):
    """The Redis (or, on a Cluster, the node) holding the data did not answer: down, restarting, or failing
    over. The operation may or may not have happened if the request had been sent; a retry with the same
    Idempotency-Key is safe. Other partitions, on other nodes, carry on."""

    code = ErrorCode.UNAVAILABLE
    retry_after_s = 1

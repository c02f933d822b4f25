"""What a script's answer means: `ok` and its data, or a refusal, whose message is written here once.

A script answers `{outcome, ...}` (lib/core.lua `sb_reply`, `sb_refuse`): `ok` and its data, or a refusal
outcome (an `ErrorCode` word: `not_found`, `conflict`, ...), the reason's name and the values its message
names. The broker raises the refusal's error with the message a person reads; the API alone knows what
HTTP status each outcome is (api/errors.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from broker.errors import (
    BrokerUnavailable,
    Conflict,
    ErrorCode,
    InvalidRequest,
    NotFound,
    SessionFull,
    SwitchboardError,
    TooManyRequests,
    Unauthorized,
)


class Outcome(StrEnum):
    """How an operation that did what was asked ended; a refusal is an `ErrorCode` instead. An
    idempotency receipt keeps one of these (or the refusal's code) with the answer's body."""

    OK = "ok"
    CREATED = "created"
    ACCEPTED = "accepted"
    EMPTY = "empty"
    """Done, with nothing to say back."""


# Each reason a script refuses for, and its message; `{0}`, `{1}`... are the values the script names.
MESSAGES: dict[str, str] = {
    "no_session": "no session {0}",
    "no_client": "no active client {0} in this session (it left, lapsed, or never registered)",
    "no_tool": "no active client {0} in this session serves a tool named {1}",
    "ping_no_client": "no active client {0} in this session (it left, lapsed, or never registered); register again",
    "ping_lapsed": "no active client {0} in this session (it left, lapsed, or never registered); register again",
    "pool_no_client": "no active client {0}",
    "too_many_clients": (
        "this session already has {0} active clients, the limit; one must leave or lapse before another can register"
    ),
    "no_call": "client {0} has no call {1}",
    "no_call_in_session": "no call {0} in this session",
    "no_agent": "no agent {0}",
    "token": "this session token is unknown or expired",
    "key_reused": "this Idempotency-Key was already used with a different request",
    "session_full": (
        "this session stores {0} bytes and this would add about {1}, past SWITCHBOARD_MAX_SESSION_BYTES ({2}"
        " bytes): delete the session (or what it no longer needs) or raise the limit"
    ),
    "call_failed": "call {0} failed: {1}",
    "call_denied": "call {0} was denied",
    "call_awaiting": "call {0} is waiting for approval and was not dispatched yet",
    "call_answered": "call {0} already has a result",
    "call_not_acked": "call {0} is not acknowledged yet: ack it before sending progress",
    "call_taken": "call {0} was handed to another pool member",
    "call_decided": "call {0} was already decided: {1}",
    "call_not_awaiting": "call {0} is not waiting for approval",
    "input_not_yours": "call {0} is not this client's: only the client that acked a call may ask during it",
    "input_not_acked": "call {0} is not acknowledged yet: ack it before asking the person",
    "too_many_inputs": "call {0} already has {1} open input requests, the limit; one must be answered first",
    "input_key_taken": "key {0} is already taken by an input request of call {1}",
    "no_input": "no input request {0} in this session",
    "input_answered": "input request {0} was already answered: {1}",
    "input_ended": "input request {0} ended with its call {1} (it settled, or went back to waiting for its client)",
    "too_many_schedules": "this session already has {0} schedules, the limit; delete one before adding another",
    "no_schedule": "no schedule {0} in this session",
    "drops_input": "a run is active and this agent drops input that arrives during a run",
    "key_in_flight": "a request with this Idempotency-Key is still being answered; send it again in a moment",
    "too_many_webhooks": (
        "this workspace already has {0} webhook endpoints, the limit; delete one before adding another"
    ),
    "no_webhook": "no webhook endpoint {0}",
    "no_mcp_connection": "no MCP connection {0}",
    "mcp_authorization_taken": "a sign-in state was drawn twice; draw another",
    "no_mcp_authorization": "this sign-in link is not one Switchboard made, or it ran out long ago",
    "mcp_authorization_used": "this sign-in link was used already; a sign-in link works once",
    "mcp_authorization_expired": "this sign-in link ran out; the agent asks again when it next needs the server",
    "no_mcp_authorization_in_session": "this session asked for no sign-in {0}",
    "mcp_authorization_ended": "the sign-in {0} ended already ({1})",
    "no_delivery": "no delivery {0} of this webhook endpoint (it never was, or the log was trimmed past it)",
    "delivery_sending": "delivery {0} is being sent now; retry it once this attempt ended",
    # A receipt written by an earlier release, which kept its refusal's message whole.
    "as_written": "{0}",
}

_ERRORS: dict[str, type[SwitchboardError]] = {
    ErrorCode.INVALID_REQUEST: InvalidRequest,
    ErrorCode.UNAUTHORIZED: Unauthorized,
    ErrorCode.NOT_FOUND: NotFound,
    ErrorCode.CONFLICT: Conflict,
}
# Refusals a caller must tell from the others of their outcome: a conflict for want of room is no answer
# about the thing written (a result refused for it leaves its call owed), as a settled call's is.
_BY_REASON: dict[tuple[str, str], type[SwitchboardError]] = {(ErrorCode.CONFLICT, "session_full"): SessionFull}


def message(reason: str, values: Sequence[object]) -> str:
    """The message of a refusal for `reason`, naming `values`."""
    template = MESSAGES.get(reason)
    if template is None:
        raise BrokerUnavailable(f"a script refused for a reason with no message: {reason!r}")
    return template.format(*values)


def refusal(outcome: str, reason: str, values: Sequence[object]) -> SwitchboardError:
    """The error a script's refusal stands for."""
    if outcome == ErrorCode.TOO_MANY_REQUESTS:
        # A bound on what is open at once, not a rate: Retry-After is only when to look again.
        return TooManyRequests(message(reason, values), retry_after_s=1)
    error = _BY_REASON.get((outcome, reason)) or _ERRORS.get(outcome)
    if error is None:
        return BrokerUnavailable(f"a script answered the outcome {outcome!r} ({reason})")
    return error(message(reason, values))

"""W3C trace context ids: `traceparent` read and written, and the ids a run and a call always have."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

# version 00; a future version's header is read as 00 is, as the W3C spec asks, by its first four fields.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
MAX_TRACEPARENT = 256


@dataclass(frozen=True, slots=True)
class SpanRef:
    """A span by its ids: the parent of spans made elsewhere (another process, the caller, the client)."""

    trace_id: int
    span_id: int
    sampled: bool = True

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{'01' if self.sampled else '00'}"

    @classmethod
    def parse(cls, header: str | None) -> SpanRef | None:
        """A `traceparent` header's span; None when absent or not one (a bad header is ignored, as the
        spec says: the request is served, in a trace of its own)."""
        if not header or len(header) > MAX_TRACEPARENT:
            return None
        match = _TRACEPARENT.fullmatch(header.strip())
        if match is None:
            return None
        version, trace, span, flags, rest = match.groups()
        if version == "ff" or (version == "00" and rest) or set(trace) == {"0"} or set(span) == {"0"}:
            return None
        return cls(int(trace, 16), int(span, 16), bool(int(flags, 16) & 1))


def _digest(kind: str, ident: str, size: int) -> int:
    # Derived, not drawn: every process computes the same span id for a run or a call without asking Redis,
    # so a span made in one process can name another process's span as its parent before that one ends.
    value = int.from_bytes(hashlib.sha256(f"{kind}:{ident}".encode()).digest()[:size], "big")
    return value or 1


def run_trace_id(run_id: str) -> int:
    """The trace id of a run that no caller's trace started."""
    return _digest("trace", run_id, 16)


def run_span_id(run_id: str) -> int:
    """The span id of a run's `invoke_agent` span."""
    return _digest("run", run_id, 8)


def call_span_id(run_id: str, call_id: str) -> int:
    """The span id of a call's `execute_tool` span (the parent of the client's own spans); a model's call
    ids are its own, so the run's id is part of it."""
    return _digest("call", f"{run_id}:{call_id}", 8)

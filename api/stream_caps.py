"""How many event streams one session, and one credential, may hold open on this API process: a client
that opens streams and never closes them (or never reads them) is refused with 429 past the cap, rather
than holding a subscription, a socket and its buffers each for ever."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from broker.errors import TooManyRequests

# A refused stream may retry after this long: by then another of the caller's streams may have ended.
RETRY_AFTER_S = 5


class StreamCaps:
    def __init__(self, per_session: int, per_credential: int) -> None:
        self._per_session = per_session
        self._per_credential = per_credential
        self._sessions: Counter[str] = Counter()
        self._credentials: Counter[str] = Counter()

    def open(self, session_id: str, credential: str) -> Callable[[], None]:
        """Count a stream in, or raise TooManyRequests; returns what counts it out (once, however often
        it is called)."""
        if self._per_session and self._sessions[session_id] >= self._per_session:
            raise TooManyRequests(
                f"session {session_id} already has {self._per_session} event streams open on this server, the "
                "limit (SWITCHBOARD_MAX_STREAMS_PER_SESSION); close one first",
                RETRY_AFTER_S,
            )
        if self._per_credential and self._credentials[credential] >= self._per_credential:
            raise TooManyRequests(
                f"this credential already holds {self._per_credential} event streams open on this server, the "
                "limit (SWITCHBOARD_MAX_STREAMS_PER_CREDENTIAL); close one first",
                RETRY_AFTER_S,
            )
        self._sessions[session_id] += 1
        self._credentials[credential] += 1
        closed = False

        def close() -> None:
            nonlocal closed
            if closed:
                return
            closed = True
            for counts, key in ((self._sessions, session_id), (self._credentials, credential)):
                counts[key] -= 1
                if counts[key] <= 0:
                    del counts[key]

        return close

    def held(self, session_id: str) -> int:
        return self._sessions[session_id]

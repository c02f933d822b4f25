"""The wait a server asks for in its Retry-After header: seconds or an HTTP date (RFC 9110), read the one
way for every server a worker calls (model providers, webhook endpoints)."""

from __future__ import annotations

import email.utils
import time

# A wait asked for is honoured up to a day.
LONGEST_S = 86_400.0


def retry_after_s(value: str | None) -> float | None:
    """A Retry-After header's wait in seconds (0 to a day), or None when there is none or it is not one."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = moment.timestamp() - time.time()
    return min(max(seconds, 0.0), LONGEST_S)

"""When a schedule fires: a 5-field cron expression read in an IANA time zone, or one moment.

The calendar is `cronsim`'s (healthchecks.io's, which follows daylight saving: a time skipped in spring
fires at the first minute after the gap, a time repeated in autumn fires once) over `zoneinfo`; nothing
here computes a date.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from zoneinfo import ZoneInfo, available_timezones

from cronsim import CronSim, CronSimError

# Longer than any IANA name and any sensible expression, so a refusal names what was sent whole.
MAX_TIMEZONE_CHARS = 64
MAX_CRON_CHARS = 128
CRON_FIELDS = 5


@cache
def _zones() -> frozenset[str]:
    # Read once: a name is looked up here before zoneinfo opens anything, so what a caller sends never
    # names a file.
    return frozenset(available_timezones())


def time_zone(name: str) -> ZoneInfo:
    """The zone `name` names; ValueError naming it when it is no IANA time zone."""
    if len(name) > MAX_TIMEZONE_CHARS or name not in _zones():
        shown = name if len(name) <= MAX_TIMEZONE_CHARS else name[:MAX_TIMEZONE_CHARS] + "..."
        raise ValueError(f"timezone: {shown!r} is not an IANA time zone (such as 'UTC' or 'Europe/Berlin')")
    return ZoneInfo(name)


def cron_problem(expression: str) -> str | None:
    """Why `expression` is no cron expression a schedule takes (None: it is one). Only the 5-field form
    (minute hour day-of-month month day-of-week): a schedule fires at most once a minute, so the 6-field
    form with seconds and the `@` names are refused with the rest."""
    shown = expression if len(expression) <= MAX_CRON_CHARS else expression[:MAX_CRON_CHARS] + "..."
    if len(expression) > MAX_CRON_CHARS:
        return f"cron: {shown!r} is longer than {MAX_CRON_CHARS} characters"
    fields = expression.split()
    if len(fields) != CRON_FIELDS:
        return (
            f"cron: {shown!r} has {len(fields)} fields; a schedule takes 5 (minute hour day-of-month month "
            "day-of-week), so it fires at most once a minute"
        )
    try:
        CronSim(expression, datetime.now(UTC))
    except CronSimError as error:
        return f"cron: {shown!r} is not a cron expression ({error})"
    return None


def next_fire_ms(expression: str, zone: str, after_ms: int) -> int | None:
    """The first time (ms) after `after_ms` that `expression` matches in `zone`; None when it never does
    again (a date that never comes)."""
    after = datetime.fromtimestamp(after_ms / 1000, tz=time_zone(zone))
    try:
        return round(next(CronSim(expression, after)).timestamp() * 1000)
    except (CronSimError, StopIteration):
        return None

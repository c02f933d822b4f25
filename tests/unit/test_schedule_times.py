"""When a schedule fires next: cronsim's calendar read in a zone, across daylight-saving changes, without
waiting for any of it."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from common.schedules import MAX_CRON_CHARS, cron_problem, next_fire_ms, time_zone

BERLIN = ZoneInfo("Europe/Berlin")


def ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def fires(expression: str, zone: str, start: datetime, count: int) -> list[datetime]:
    out, at = [], ms(start)
    for _ in range(count):
        found = next_fire_ms(expression, zone, at)
        assert found is not None
        out.append(datetime.fromtimestamp(found / 1000, tz=ZoneInfo(zone)))
        at = found
    return out


def test_weekdays_at_nine_in_berlin_skip_the_weekend() -> None:
    friday = datetime(2026, 3, 6, 10, 0, tzinfo=BERLIN)
    got = fires("0 9 * * 1-5", "Europe/Berlin", friday, 2)
    assert got == [datetime(2026, 3, 9, 9, 0, tzinfo=BERLIN), datetime(2026, 3, 10, 9, 0, tzinfo=BERLIN)]


def test_nine_in_berlin_is_eight_utc_in_winter_and_seven_in_summer() -> None:
    # Summer time began on 29 March 2026: the same wall-clock time is an hour earlier in UTC.
    got = fires("0 9 * * *", "Europe/Berlin", datetime(2026, 3, 28, 12, 0, tzinfo=UTC), 2)
    assert [g.astimezone(UTC).hour for g in got] == [7, 7]
    assert [g.day for g in got] == [29, 30]
    before = fires("0 9 * * *", "Europe/Berlin", datetime(2026, 3, 27, 12, 0, tzinfo=UTC), 1)
    assert before[0].astimezone(UTC).hour == 8


def test_a_time_skipped_in_spring_fires_once_just_after_the_gap() -> None:
    # 02:30 does not exist on 29 March 2026 in Berlin (02:00 jumps to 03:00).
    got = fires("30 2 * * *", "Europe/Berlin", datetime(2026, 3, 28, 12, 0, tzinfo=BERLIN), 3)
    assert [(g.day, g.hour, g.minute) for g in got] == [(29, 3, 0), (30, 2, 30), (31, 2, 30)]


def test_a_time_repeated_in_autumn_fires_once() -> None:
    # 02:30 happens twice on 25 October 2026 in Berlin (03:00 falls back to 02:00).
    got = fires("30 2 * * *", "Europe/Berlin", datetime(2026, 10, 24, 12, 0, tzinfo=BERLIN), 3)
    assert [(g.day, g.hour, g.minute) for g in got] == [(25, 2, 30), (26, 2, 30), (27, 2, 30)]
    gaps = [b.timestamp() - a.timestamp() for a, b in itertools.pairwise(got)]
    assert gaps == [25 * 3600, 24 * 3600]


def test_the_next_time_is_strictly_after_the_one_given() -> None:
    nine = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    assert next_fire_ms("0 9 * * *", "UTC", ms(nine)) == ms(datetime(2026, 1, 6, 9, 0, tzinfo=UTC))
    assert next_fire_ms("* * * * *", "UTC", ms(nine) + 1) == ms(nine) + 60_000


def test_a_date_that_never_comes_again_has_no_next_time() -> None:
    assert cron_problem("0 0 30 2 *") is not None


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ("* * * * * *", "6 fields"),
        ("*/30 * * * * *", "6 fields"),
        ("@hourly", "1 fields"),
        ("", "0 fields"),
        ("61 * * * *", "not a cron expression"),
        ("0 25 * * *", "not a cron expression"),
        ("*/0 * * * *", "not a cron expression"),
        ("0 9 * * mon-xyz", "not a cron expression"),
        ("0 " * MAX_CRON_CHARS, f"longer than {MAX_CRON_CHARS}"),
    ],
)
def test_bad_cron_expressions_are_named(expression: str, named: str) -> None:
    problem = cron_problem(expression)
    assert problem is not None
    assert problem.startswith("cron: ")
    assert named in problem


def test_good_cron_expressions_pass() -> None:
    for expression in ("0 9 * * 1-5", "*/5 * * * *", "0 0 1 1 *", "15 10 * * MON", "0 0 L * *"):
        assert cron_problem(expression) is None, expression


@pytest.mark.parametrize("name", ["Mars/Olympus", "../../etc/passwd", "/etc/localtime", "europe/berlin", "x" * 200])
def test_a_name_that_is_no_time_zone_is_refused_by_name_without_reading_a_file(name: str) -> None:
    with pytest.raises(ValueError, match=r"timezone: .* is not an IANA time zone"):
        time_zone(name)


def test_time_zones_are_iana_names() -> None:
    assert time_zone("UTC").key == "UTC"
    assert time_zone("Europe/Berlin") is BERLIN

"""Workers back off by Redis node when it cannot be reached (one dead node's partitions cost one attempt
per interval, and never delay another node's), by partition for any other failure (one bad partition
never holds up its node's others); each failure and recovery is logged once."""

from __future__ import annotations

import logging

import pytest

from broker.errors import BrokerUnavailable, RedisUnreachable
from workers.backoff import Backoff

DOWN = RedisUnreachable("Redis is unreachable (refused); retry shortly")


def test_a_failed_node_waits_longer_each_time_and_the_others_do_not_wait(caplog: pytest.LogCaptureFixture) -> None:
    backoff = Backoff("taking work")
    assert backoff.wait_s("a:1", 7) == 0.0
    with caplog.at_level(logging.WARNING, logger="workers.backoff"):
        first = backoff.failed("a:1", 7, DOWN)
        second = backoff.failed("a:1", 8, DOWN)
    assert (first, second) == (0.5, 1.0)
    # Logged on the first failure only.
    assert [r.getMessage() for r in caplog.records] == [
        f"taking work failed for Redis node a:1 (partition 7: {DOWN}); backing off"
    ]
    # Every partition of the node waits; another node's do not.
    assert 0.5 < backoff.wait_s("a:1", 9) <= 1.0
    assert backoff.wait_s("b:2", 9) == 0.0


def test_a_failure_that_is_not_the_node_backs_off_that_partition_alone() -> None:
    backoff = Backoff("visiting partitions")
    assert backoff.failed("a:1", 7, BrokerUnavailable("Redis refused a broker command: ERR")) == 0.5
    assert 0 < backoff.wait_s("a:1", 7) <= 0.5
    assert backoff.wait_s("a:1", 8) == 0.0


def test_the_wait_is_capped_and_forgotten_once_the_node_answers(caplog: pytest.LogCaptureFixture) -> None:
    backoff = Backoff("visiting partitions")
    delays = [backoff.failed("a:1", 1, DOWN) for _ in range(10)]
    assert max(delays) == 10.0
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="workers.backoff"):
        backoff.succeeded("a:1", 1)
        assert backoff.wait_s("a:1", 1) == 0.0
        backoff.succeeded("a:1", 1)
    # The recovery is said once: the second success had no failures to forget.
    assert [r.getMessage() for r in caplog.records] == ["visiting partitions: Redis node a:1 answers again"]

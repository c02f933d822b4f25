"""Workers back off by Redis node: one dead node's partitions cost one attempt per interval, and never
delay another node's; each node's failure and recovery is logged once."""

from __future__ import annotations

import logging

import pytest

from workers.backoff import Backoff


def test_a_failed_node_waits_longer_each_time_and_the_others_do_not_wait(caplog: pytest.LogCaptureFixture) -> None:
    backoff = Backoff("taking work")
    assert backoff.wait_s("a:1") == 0.0
    with caplog.at_level(logging.WARNING, logger="workers.backoff"):
        first = backoff.failed("a:1", 7, ConnectionError("refused"))
        second = backoff.failed("a:1", 8, ConnectionError("refused"))
    assert (first, second) == (0.5, 1.0)
    # Logged on the first failure only.
    assert [r.getMessage() for r in caplog.records] == [
        "taking work failed on Redis node a:1 (partition 7: refused); backing off"
    ]
    assert 0.5 < backoff.wait_s("a:1") <= 1.0
    assert backoff.wait_s("b:2") == 0.0


def test_the_wait_is_capped_and_forgotten_once_the_node_answers(caplog: pytest.LogCaptureFixture) -> None:
    backoff = Backoff("visiting partitions")
    delays = [backoff.failed("a:1", 1, ConnectionError("refused")) for _ in range(10)]
    assert max(delays) == 10.0
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="workers.backoff"):
        backoff.succeeded("a:1")
        assert backoff.wait_s("a:1") == 0.0
        backoff.succeeded("a:1")
    # The recovery is said once: the second success had no failures to forget.
    assert [r.getMessage() for r in caplog.records] == ["visiting partitions: the Redis node a:1 answers again"]

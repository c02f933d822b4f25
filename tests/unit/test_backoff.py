"""Workers back off by Redis node: one dead node's partitions cost one attempt per interval, and never
delay another node's."""

from __future__ import annotations

from workers.backoff import Backoff


def test_a_failed_node_waits_longer_each_time_and_the_others_do_not_wait() -> None:
    backoff = Backoff()
    assert backoff.wait_s("a:1") == 0.0
    first, logged = backoff.failed("a:1")
    second, logged_again = backoff.failed("a:1")
    assert (first, logged) == (0.5, True)
    assert (second, logged_again) == (1.0, False)
    assert 0.5 < backoff.wait_s("a:1") <= 1.0
    assert backoff.wait_s("b:2") == 0.0


def test_the_wait_is_capped_and_forgotten_once_the_node_answers() -> None:
    backoff = Backoff()
    delays = [backoff.failed("a:1")[0] for _ in range(10)]
    assert max(delays) == 10.0
    assert backoff.succeeded("a:1")
    assert backoff.wait_s("a:1") == 0.0
    assert not backoff.succeeded("a:1")

"""examples/pool.py against API and worker processes: every call answered once, the work spread over the
pool's members."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from tests.e2e.served import Served
from tests.examples.support import EXAMPLES, of_type, session_log, text_of

pytestmark = [pytest.mark.processes, pytest.mark.timeout(120)]

POOL = EXAMPLES / "pool.py"


def pool(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_")}
    command = [sys.executable, str(POOL), *args]
    return subprocess.run(command, env={**base, **env}, capture_output=True, text=True, timeout=90)


def test_the_pool_answers_every_call_once_spread_over_its_members(served: Served) -> None:
    run = pool("--members", "3", "--calls", "12", SWITCHBOARD_URL=served.url, SWITCHBOARD_API_KEY=served.key)
    assert run.returncode == 0, run.stdout + run.stderr
    [sid] = re.findall(r"^session: (\S+)$", run.stdout, re.MULTILINE)
    printed = {int(m): int(n) for m, n in re.findall(r"^member (\d+): (\d+) calls$", run.stdout, re.MULTILINE)}
    assert sorted(printed) == [0, 1, 2]

    events = session_log(served, sid)
    calls = [e["call_id"] for e in of_type(events, "tool_call")]
    dispatched = [e["call_id"] for e in of_type(events, "client_tool_dispatched")]
    results = of_type(events, "tool_result")
    assert len(calls) == 12
    assert sorted(dispatched) == sorted(calls)  # each dispatched once
    assert sorted(r["call_id"] for r in results) == sorted(calls)  # each answered once
    assert not [r for r in results if r["is_error"]]
    assert not of_type(events, "client_tool_failed")
    assert of_type(events, "run_completed")
    # Each result names the member that did the work: the log and the script's counts agree.
    by_member = Counter(int(text_of(r).rsplit(" ", 1)[1]) for r in results)
    assert dict(by_member) == {m: n for m, n in printed.items() if n}
    assert len(by_member) >= 2, by_member
    assert "12 of 12 calls answered" in run.stdout


def test_the_pool_refuses_a_bad_count_and_a_missing_key() -> None:
    for bad in ("0", "65", "many"):
        run = pool("--members", bad, SWITCHBOARD_URL="http://127.0.0.1:9", SWITCHBOARD_API_KEY="swb_ak_x")
        assert run.returncode == 2
        assert "--members" in run.stderr
    run = pool(SWITCHBOARD_URL="http://127.0.0.1:9")
    assert run.returncode == 1
    assert "SWITCHBOARD_API_KEY" in run.stderr


def test_the_pool_with_a_wrong_key_exits_1_saying_what_was_refused(served: Served) -> None:
    run = pool(SWITCHBOARD_URL=served.url, SWITCHBOARD_API_KEY="swb_ak_" + "x" * 40)
    assert run.returncode == 1
    assert "401" in run.stderr
    assert "Traceback" not in run.stderr

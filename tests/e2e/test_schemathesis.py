"""schemathesis against the served OpenAPI document, every check and every phase (examples, coverage,
fuzzing, and stateful through the document's links from create to read routes): no 5xx, every answer
as the document says, every request the document calls valid accepted and every other refused."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.served import api_and_worker

pytestmark = [pytest.mark.processes, pytest.mark.timeout(420)]

CONFIG = Path(__file__).with_name("schemathesis.toml")


def test_every_check_and_phase_passes(redis_url: str, tmp_path: Path) -> None:
    st = Path(sys.executable).parent / "st"
    # Generated requests come fast through one credential, and thousands are refused on purpose: the
    # per-credential rate limit and the failed sign-in lockout would answer most of them with 429.
    with api_and_worker(redis_url, tmp_path / "logs", rate_limit_per_s="0", auth_failure_limit="0") as served:
        command = [str(st), "--config-file", str(CONFIG), "--no-color", "run", f"{served.url}/openapi.json"]
        command += ["--checks", "all", "--phases", "examples,coverage,fuzzing,stateful", "--max-examples", "45"]
        # The two event streams never end by themselves (they are tested by the stream tests).
        command += ["--exclude-path-regex", "/stream$", "-H", f"Authorization: Bearer {served.key}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=380, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:]
    for phase in ("Coverage", "Fuzzing", "Stateful"):
        assert re.search(rf"✅\s+{phase} \(in", output), output[-4000:]
    generated = re.search(r"(\d+) generated, \1 passed", output)
    assert generated is not None, output[-2000:]
    assert int(generated.group(1)) >= 3000, output[-2000:]
    links = re.search(r"API Links:\s+(\d+) covered", output)
    assert links is not None, output[-2000:]
    assert int(links.group(1)) >= 10, output[-2000:]

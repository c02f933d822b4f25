"""schemathesis against the served OpenAPI document: thousands of generated requests on every route,
no 5xx, and every answer's status, content type and body as the document says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.served import api_and_worker

pytestmark = [pytest.mark.processes, pytest.mark.timeout(300)]

CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


def test_generated_requests_find_no_server_error_and_no_answer_off_the_document(redis_url: str, tmp_path: Path) -> None:
    st = Path(sys.executable).parent / "st"
    # Generated requests come fast through one credential: the per-credential limit would answer most.
    with api_and_worker(redis_url, tmp_path / "logs", rate_limit_per_s="0") as served:
        command = [str(st), "run", f"{served.url}/openapi.json", "--checks", CHECKS, "--max-examples", "30"]
        command += ["-H", f"Authorization: Bearer {served.key}", "--no-color"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    generated = re.search(r"(\d+) generated", output)
    assert generated is not None, output[-2000:]
    assert int(generated.group(1)) >= 1000, output[-2000:]

"""The console's line for what a run cost (api/static/transcript.js `tokens`), run in Node."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

TRANSCRIPT = Path(__file__).resolve().parents[2] / "api" / "static" / "transcript.js"


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js (node on PATH), which .ci/run installs")
def test_the_phrase_for_each_shape_of_usage() -> None:
    cases = [
        {"input_tokens": 1234, "output_tokens": 56, "cached_input_tokens": 1000, "reasoning_tokens": 12},
        {"input_tokens": 10, "output_tokens": 2},
        {"output_tokens": 3},
        {},
        None,
        "nonsense",
    ]
    script = (
        f"import {{ tokens }} from {json.dumps(TRANSCRIPT.as_uri())};"
        f"console.log(JSON.stringify({json.dumps(cases)}.map(tokens)));"
    )
    printed = subprocess.run(
        ["node", "--input-type=module", "-e", script], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    assert json.loads(printed) == [
        "1,234 tokens in (1,000 cached), 56 out (12 reasoning)",
        "10 tokens in, 2 out",
        "? tokens in, 3 out",
        "",
        "",
        "",
    ]

"""The real JavaScript clients (the npm packages in package-lock.json, installed by `.ci/run`), run in
Node by the tests: a driver script under tests/js/ takes one JSON plan and prints one JSON line per step."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
NODE = shutil.which("node")


def need_node_packages() -> None:
    """Skip, saying what is missing, where Node or the installed packages are not here."""
    if NODE is None:
        pytest.skip("no node on PATH: the JavaScript client tests need Node 20 or newer")
    if not (ROOT / "node_modules" / "@ag-ui" / "client").is_dir():
        pytest.skip("no node_modules: `npm ci` (run by `.ci/run`) installs the pinned JavaScript clients")


async def drive(script: str, plan: dict[str, Any], timeout_s: float = 60) -> list[dict[str, Any]]:
    """Run tests/js/`script` on `plan`; the JSON lines it printed. Fails with its stderr if it fails."""
    need_node_packages()
    assert NODE is not None
    process = await asyncio.create_subprocess_exec(
        NODE,
        str(ROOT / "tests" / "js" / script),
        json.dumps(plan),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, err.decode(errors="replace")
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]

"""The arq baseline's own virtualenv and the calls into it (see bench/arq_baseline.py for why)."""

from __future__ import annotations

import asyncio
import fcntl
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / "bench" / ".arq-venv"
# The baseline as the bench has always measured it; its redis-py comes from arq's own pin.
REQUIREMENTS = ["arq==0.28.0", "orjson>=3.9"]


def python() -> Path:
    """The virtualenv's interpreter, made and filled on first use (seconds, once per checkout), from the
    package index the project's own installs use. It gets no pip of its own: the bench's pip installs into
    it (`pip --python`, pip 22.3 or newer), which halves the time on a clean clone (CI's every run)."""
    interpreter = VENV / "bin" / "python"
    marker = VENV / "requirements.txt"
    # Scenarios run at once (the suite runs each smoke scenario as a test of its own) would make it twice
    # over each other: one makes it, the others wait and find it made.
    with (VENV.parent / ".arq-venv.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if not interpreter.exists() or not marker.exists() or marker.read_text() != "\n".join(REQUIREMENTS):
            print(f"bench: making {VENV.relative_to(ROOT)} for the arq baseline", file=sys.stderr, flush=True)
            subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(VENV)], check=True)
            pip = [sys.executable, "-m", "pip", "--python", str(interpreter), "install", "--quiet"]
            subprocess.run([*pip, "--disable-pip-version-check", *REQUIREMENTS], check=True)
            marker.write_text("\n".join(REQUIREMENTS))
    return interpreter


async def measure(*args: str) -> tuple[list[float], float]:
    """Run one measurement of bench/arq_baseline.py in the virtualenv: its latencies (ms) and rate (/s)."""
    interpreter = await asyncio.to_thread(python)
    process = await asyncio.create_subprocess_exec(
        str(interpreter), "-m", "bench.arq_baseline", *args, cwd=ROOT, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the arq baseline ({' '.join(args)}) exited {process.returncode}")
    result = json.loads(out)
    return [float(x) for x in result["latencies"]], float(result["rate"])


async def arq_round_trip(url: str, count: int, in_flight: int, poll_delay: float) -> tuple[list[float], float]:
    """The same call built on arq: latencies (ms) and calls per second with `in_flight` callers."""
    return await measure("round_trip", url, str(count), str(in_flight), str(poll_delay))


async def arq_enqueue_to_start(url: str, count: int, poll_delay: float) -> list[float]:
    """How long an arq job waits between enqueue and start (ms), one at a time."""
    waits, _ = await measure("start", url, str(count), str(poll_delay))
    return waits

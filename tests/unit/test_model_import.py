"""A provider SDK, and the `mcp` client, are imported in a thread on first use; a second step asking
meanwhile waits for the whole import rather than reading the half-initialized module."""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from broker import Broker
from workers.models import registry
from workers.models.registry import ModelRegistry
from workers.settings import WorkerSettings


async def test_a_use_during_the_first_import_gets_the_class_once_it_is_defined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"slow_sdk_{secrets.token_hex(4)}"
    # The class is defined only after a pause, as in a large SDK whose import takes seconds.
    (tmp_path / f"{name}.py").write_text("import time\n\ntime.sleep(0.4)\n\n\nclass Model:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(registry._MODEL_CLASSES, "gemini", (name, "Model"))
    models = ModelRegistry(cast("Broker[WorkerSettings]", SimpleNamespace(settings=WorkerSettings())))
    try:
        first = asyncio.create_task(models._model_class("gemini"))
        while name not in sys.modules:
            await asyncio.sleep(0.01)
        second = await models._model_class("gemini")
        assert second is await first
        assert second.__name__ == "Model"
    finally:
        sys.modules.pop(name, None)


# The `mcp` package is loaded on first use: by the worker when it first reaches a grant's server
# (workers/mcp/hub.py), by the API on the first request to a session's /mcp (api/routes/mcp.py).
@pytest.mark.parametrize("process", ["workers.worker", "api.server"])
def test_a_process_starts_without_the_mcp_package(process: str) -> None:
    program = f"import sys, {process}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'mcp'))"
    root = Path(__file__).resolve().parents[2]
    found = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=root)
    assert found.stdout.strip() == "[]", found.stdout

"""The console's page scripts (api/static/*.js) run in Node for their unit tests: each test's script imports
the modules it names, gets a stand-in for the console's `el` (plain objects it reads back: a string child is
a text node) and the helpers that read them, and prints one JSON value."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

STATIC = Path(__file__).resolve().parents[2] / "api" / "static"

needs_node = pytest.mark.skipif(
    shutil.which("node") is None, reason="needs Node.js (node on PATH), which .ci/run installs"
)

FAKE_EL = """
const el = (tag, props = {}, ...children) => ({ tag, props, children: children.flat() });
const text = (node) => typeof node === "string" ? node : (node.children ?? []).map(text).join("");
const all = (node, tag) => typeof node === "string" ? [] :
  [...(node.tag === tag ? [node] : []), ...(node.children ?? []).flatMap((child) => all(child, tag))];
const button = (node, label) => all(node, "button").find((b) => text(b) === label);
"""


def run_node(modules: dict[str, str], script: str, prelude: str = "") -> Any:
    """What `script` prints, with each of `modules` (alias -> file under api/static) imported as `alias`,
    FAKE_EL and then `prelude` before it."""
    imports = "".join(
        f"import * as {alias} from {json.dumps((STATIC / name).as_uri())};\n" for alias, name in modules.items()
    )
    printed = subprocess.run(
        ["node", "--input-type=module", "-e", f"{imports}{FAKE_EL}\n{prelude}\n{script}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    return json.loads(printed)

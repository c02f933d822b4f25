"""examples/typed/ and the SDK's declarations: /sdk/switchboard.d.ts is served as committed, declares what
switchboard.js exports (no more, no less) and every event type, and the examples type-check against it
with the pinned TypeScript (while a misuse of the SDK does not)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from common.events.build import SDK_EVENT_TYPES
from common.events.catalogue import BY_TYPE
from tests.api_client import Api
from tests.examples.support import EXAMPLES
from tests.js_clients import ROOT, need_node_packages

STATIC = ROOT / "api" / "static"
DECLARATIONS = STATIC / "switchboard.d.ts"
TYPED = EXAMPLES / "typed"
TSC = ROOT / "node_modules" / ".bin" / "tsc"

# What a module's values are: `export class X`, `export function X`, `export { X, Y as Z } from "..."`.
_JS_EXPORT = re.compile(r"^export\s+(?:async\s+)?(?:class|function\*?)\s+(\w+)", re.MULTILINE)
_DTS_EXPORT = re.compile(
    r"^export\s+declare\s+(?:abstract\s+)?(?:class|function|const|let|var|enum)\s+(\w+)", re.MULTILINE
)
_RE_EXPORT = re.compile(r"^export\s*\{([^}]*)\}\s*from\b", re.MULTILINE)


def exported_values(source: str, declared: re.Pattern[str]) -> set[str]:
    names = set(declared.findall(source))
    for group in _RE_EXPORT.findall(source):
        for item in group.split(","):
            if item.strip() and not item.strip().startswith("type "):
                names.add(item.split(" as ")[-1].strip())
    return names


def tsc(project: Path) -> subprocess.CompletedProcess[str]:
    """`tsc -p project --noEmit`, as `.ci/run` runs it; skips where `npm ci` has not installed TypeScript."""
    need_node_packages()
    if not TSC.exists():
        pytest.skip("no node_modules/.bin/tsc: `npm ci` (run by `.ci/run`) installs the pinned TypeScript")
    return subprocess.run(
        [str(TSC), "-p", str(project), "--noEmit", "--pretty", "false"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_the_declarations_are_served_as_committed_with_the_typescript_media_type(api: Api) -> None:
    answer = await api.key.get("/sdk/switchboard.d.ts")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/typescript; charset=utf-8"
    assert answer.headers["cache-control"] == "no-cache"
    assert answer.content == DECLARATIONS.read_bytes()
    # The module it describes is served beside it.
    assert (await api.key.get("/sdk/switchboard.js")).content == (STATIC / "switchboard.js").read_bytes()


def test_the_declarations_export_exactly_the_values_the_module_exports() -> None:
    module = exported_values((STATIC / "switchboard.js").read_text(), _JS_EXPORT)
    declared = exported_values(DECLARATIONS.read_text(), _DTS_EXPORT)
    assert module == {"SwitchboardError", "connect", "Connection", "ToolClient", "pageTools"}
    assert declared == module
    # What switchboard.js re-exports is what page-tools.js exports.
    assert exported_values((STATIC / "page-tools.js").read_text(), _JS_EXPORT) == {"pageTools"}


def test_every_event_type_of_the_default_view_is_declared() -> None:
    source = DECLARATIONS.read_text()
    declared = set(re.findall(r'^\s*type: "(\w+)";', source, re.MULTILINE))
    union = re.search(r"export type SessionEvent =([^;]*);", source)
    assert union is not None
    members = re.findall(r"\|\s*(\w+)", union.group(1))
    assert len(members) == len(SDK_EVENT_TYPES) == 20
    assert declared >= SDK_EVENT_TYPES
    # And the extensions `include` asks for: every type the catalogue declares.
    assert declared >= set(BY_TYPE)


@pytest.mark.timeout(180)
def test_the_typed_examples_type_check_against_the_declarations() -> None:
    checked = tsc(TYPED / "tsconfig.json")
    assert checked.returncode == 0, checked.stdout + checked.stderr


# Each line marked `// wrong:` must be an error, and no other line.
MISUSE = """\
import { connect, pageTools, type ToolCallContext } from "/sdk/switchboard.js";
export const unnamed = connect({ sessionId: "s" }); // wrong: neither token nor getToken
const session = connect({ sessionId: "s", token: "t" });
session.on("client_tool_faild", () => undefined); // wrong: no such event type
session.on("client_tool_failed", (event) => event.reason === "cancelled"); // wrong: cancelled is a detail
// wrong: a symbol is no result (next line)
export const odd = session.registerClient({ name: "web", tools: { ...pageTools(), odd: { execute: () => Symbol() } } });
export const half = (call: ToolCallContext) => call.progress("half way", "half"); // wrong: a fraction is a number
export const fine = session.registerClient({ name: "web-2", tools: { ok: { execute: () => ({ n: 1 }) } } });
"""


@pytest.mark.timeout(180)
def test_a_misuse_of_the_sdk_does_not_type_check(tmp_path: Path) -> None:
    """The check is not vacuous: each wrong line of MISUSE is an error, and only those."""
    (tmp_path / "misuse.ts").write_text(MISUSE)
    config = {"extends": str(TYPED / "tsconfig.json"), "files": ["misuse.ts"]}
    (tmp_path / "tsconfig.json").write_text(json.dumps(config))
    checked = tsc(tmp_path / "tsconfig.json")
    assert checked.returncode != 0
    lines = {int(line) for line in re.findall(r"misuse\.ts\((\d+),\d+\): error TS\d+", checked.stdout)}
    source = MISUSE.splitlines()
    wrong = {n for n, line in enumerate(source, 1) if "// wrong:" in line and not line.startswith("//")}
    wrong |= {n + 1 for n, line in enumerate(source, 1) if line.startswith("// wrong:")}
    assert len(wrong) == 5
    assert lines == wrong, checked.stdout

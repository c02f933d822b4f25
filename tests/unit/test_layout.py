"""The layering rules and the Lua conventions, checked rather than hoped for."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from broker.keys import WORK_GROUP
from broker.scripts.runner import SCRIPT_NAMES
from broker.scripts.source import LIBRARIES, layout, library_declared, script_text
from broker.services.telemetry import MS_BUCKETS
from common.events.build import SDK_EVENT_TYPES

ROOT = Path(__file__).resolve().parents[2]
LUA = ROOT / "broker" / "scripts" / "lua"


def imports(package: str) -> set[str]:
    found: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_broker_depends_on_neither_api_nor_workers() -> None:
    assert not imports("broker") & {"api", "workers", "switchboard"}


def modules_imported(package: str) -> set[str]:
    """The first-party modules (dotted, as written) that `package`'s files import."""
    found: set[str] = set()
    for path in (ROOT / Path(*package.split("."))).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.split(".")[0] in {"api", "workers", "broker", "common", "switchboard"}}


def _within(names: set[str], *allowed: str) -> set[str]:
    return {name for name in names if not any(name == a or name.startswith(a + ".") for a in allowed)}


def test_shared_code_holds_no_redis_and_depends_on_nothing_of_ours() -> None:
    assert not _within(modules_imported("common"), "common")
    assert "redis" not in imports("common")


def test_the_broker_is_layered_transport_then_scripts_then_services() -> None:
    # The transport knows Redis and errors; the scripts know the transport and the key layout; the
    # services use both; the top (core, broker) assembles them.
    assert not _within(modules_imported("broker.transport"), "broker.transport", "broker.errors", "common")
    assert not _within(
        modules_imported("broker.scripts"),
        "broker.scripts", "broker.transport", "broker.errors", "broker.keys", "broker.refusals", "common",
    )  # fmt: skip
    for name in ("broker.keys", "broker.errors", "broker.refusals", "broker.partitions"):
        path = ROOT / Path(*name.split(".")).with_suffix(".py")
        tree = ast.parse(path.read_text())
        below = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert not {module for module in below if module.startswith(("broker.services", "broker.scripts"))}


def test_api_and_workers_use_services_never_the_core_the_scripts_or_a_key() -> None:
    for package in ("api", "workers"):
        reached = modules_imported(package)
        assert not {name for name in reached if name.startswith(("broker.core", "broker.scripts", "broker.keys"))}
        assert not {name for name in reached if name.startswith("broker.transport")}
        for path in (ROOT / package).rglob("*.py"):
            assert ".core." not in path.read_text().replace("ag_ui.core.", ""), path


def test_api_and_workers_stay_apart() -> None:
    assert "workers" not in imports("api")
    assert "api" not in imports("workers")


def test_the_benchmark_uses_nothing_of_the_tests() -> None:
    # The tests may use the bench's hostile servers; the bench runs without the test suite.
    assert "tests" not in imports("bench")
    mentioned = [p.name for p in (ROOT / "bench").rglob("*.py") if re.search(r"""['"]tests\.""", p.read_text())]
    assert not mentioned


def test_the_delegation_helper_is_a_pure_http_client() -> None:
    assert not imports("delegate") & {"api", "workers", "broker", "switchboard"}


def test_every_lua_file_is_a_registered_script_or_a_library() -> None:
    scripts = {p.stem for p in LUA.glob("*.lua")}
    assert scripts == set(SCRIPT_NAMES)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_scripts_document_their_interface_and_never_scan(name: str) -> None:
    script = script_text(name)
    assert "Returns" in script.header
    # lib/core.lua runs every call (sb_run_script; lib/batch.lua for a batched one), so every script includes it.
    assert script.includes[:1] == ("lib/core.lua",)
    layout(name)  # its declarations hold together: names, layouts, rest lists
    # What runs for it: its body and the libraries it includes.
    for text in (script.body, *(LUA.joinpath(path).read_text() for path in script.includes)):
        assert not re.search(r"^--!include ", text, re.MULTILINE)
        assert not re.search(r"redis\.call\('(KEYS|SCAN)'", text)


@pytest.mark.parametrize("path", sorted(LUA.rglob("*.lua")), ids=lambda path: str(path.relative_to(LUA)))
def test_lua_reads_its_keys_and_arguments_by_name_only(path: Path) -> None:
    """Positions are the build's business (broker/scripts/source.py binds K and A): no file indexes KEYS or
    ARGV, in its code or in its comments."""
    assert not re.search(r"\b(KEYS|ARGV)\[", path.read_text())


def test_the_partitions_keys_are_declared_in_the_order_python_hands_them() -> None:
    from broker.keys import KeySpace

    block = KeySpace("sb").partition(7).block
    declared = library_declared("lib/partition.lua").keys
    assert [key.rsplit(":", 1)[-1] for key in block] == [{"purges": "purge"}.get(name, name) for name in declared]


def test_a_script_called_with_a_name_it_does_not_declare_is_refused_before_anything_is_sent() -> None:
    keys: dict[str, str] = {"meta": "m", "tokens": "t"}
    args: dict[str, str | int] = {"sid": "s", "token": "", "need": 1, "cap": 0}
    assert layout("check_room").positional(keys, args) == (["m", "t"], ["s", "", 1, 0])
    with pytest.raises(TypeError, match="declares keys"):
        layout("check_room").positional({**keys, "extra": "x"}, args)
    with pytest.raises(TypeError, match="declares keys"):
        layout("check_room").positional(keys, {"sid": "s"})


def test_no_two_libraries_define_the_same_function() -> None:
    """The Functions library is one chunk: a local function defined twice hides the first below it."""
    seen: dict[str, str] = {}
    for path in (*LIBRARIES, "lib/batch.lua"):
        for name in re.findall(r"^local function (\w+)", (LUA / path).read_text(), re.MULTILINE):
            assert name not in seen, f"{name} is defined in {seen.get(name)} and {path}"
            seen[name] = path


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_scripts_include_libraries_in_the_order_the_functions_library_defines_them(name: str) -> None:
    includes = script_text(name).includes
    assert list(includes) == [path for path in LIBRARIES if path in includes]


def _module_graph() -> dict[str, set[str]]:
    """Each module of the packages and the modules of the packages it imports (`from pkg import sub` is
    the submodule), anywhere in it: at the top, in a function, or for type checking only."""
    paths = {}
    for package in ("api", "workers", "broker", "switchboard"):
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            paths[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = {f"{node.module}.{alias.name}" for alias in node.names} & paths.keys()
                found |= subs if len(subs) == len(node.names) else subs | ({node.module} & paths.keys())
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names} & paths.keys()
        graph[name] = found - {name}
    return graph


def test_no_module_imports_itself_through_others() -> None:
    graph = _module_graph()
    cycles: list[list[str]] = []
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            cycles.append([*path[path.index(name) :], name])
            return
        if name in done:
            return
        for imported in sorted(graph[name]):
            visit(imported, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


# What a module generated from the event catalogue says of itself (common/events/generate).
GENERATED = "Generated by `python -m common.events.generate`"


def test_each_type_is_defined_once() -> None:
    """A public class or type alias (`X = Literal[...]`, `Annotated[...]`) of one name in one place only:
    two of a name drift apart, and an import picks one by accident. (A module's private ones, `_X`, are
    its own; a module generated from the event catalogue names its models as the catalogue does, and
    cannot drift from it: tests/unit/test_event_generate.py.)"""
    where: dict[str, list[str]] = {}
    for package in ("api", "workers", "broker", "common", "switchboard", "delegate"):
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text()
            if GENERATED in text[:1000]:
                continue
            for node in ast.parse(text).body:
                names: list[str] = []
                if isinstance(node, ast.ClassDef):
                    names = [node.name]
                elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Subscript):
                    value = node.value.value
                    if isinstance(value, ast.Name) and value.id in ("Literal", "Annotated"):
                        names = [target.id for target in node.targets if isinstance(target, ast.Name)]
                for name in names:
                    if not name.startswith("_"):
                        where.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert not {name: paths for name, paths in where.items() if len(paths) > 1}


def test_no_pickle_anywhere() -> None:
    for package in ("api", "workers", "broker", "switchboard", "delegate"):
        assert "pickle" not in imports(package)


def test_the_figures_read_the_latency_buckets_the_scripts_count_in() -> None:
    library = (LUA / "lib" / "partition.lua").read_text()
    counted = re.search(r"^local SB_MS_BUCKETS = \{([^}]*)\}", library, re.MULTILINE)
    assert counted is not None
    assert tuple(int(bound) for bound in counted.group(1).split(",")) == MS_BUCKETS


def test_the_work_group_is_named_alike_in_python_and_lua() -> None:
    named = re.search(r"^local SB_WORK_GROUP = '([^']*)'", (LUA / "lib" / "partition.lua").read_text(), re.MULTILINE)
    assert named is not None
    assert named.group(1) == WORK_GROUP


# Session events' names that other protocols' objects share (an AI SDK chunk, an Anthropic block).
_SHARED_NAMES = {"error", "tool_result"}


def test_the_session_events_are_built_in_common_only() -> None:
    # Each is built once, in common/events/build.py (or by a script), so its fields cannot drift apart.
    events = SDK_EVENT_TYPES - _SHARED_NAMES
    built = []
    for package in ("api", "broker", "workers", "switchboard"):
        for path in (ROOT / package).rglob("*.py"):
            dicts = (node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Dict))
            for node in dicts:
                for key, value in zip(node.keys, node.values, strict=True):
                    if not isinstance(key, ast.Constant) or key.value != "type" or not isinstance(value, ast.Constant):
                        continue
                    if value.value in events:
                        built.append(f"{path.relative_to(ROOT)}:{node.lineno} {value.value}")
    assert not built

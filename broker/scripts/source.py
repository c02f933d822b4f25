"""The Lua text Redis runs, built from `broker/scripts/lua`: one Redis Functions library holding every script.

A script file is a header comment, its `--!include lib/x.lua` lines, then its body. The header declares
what the script is handed, by name, one per line, and the build is the only code that knows positions:

    --!layout lib/call.lua   the keys and arguments that library declares, first
    --!key receipt           one key (`K.receipt` in Lua); `--!key name...` takes every key left
    --!arg ttl_ms            one argument (`A.ttl_ms`); `--!arg name...` every argument left

A script's keys are those of each `--!layout` library, in order, then its own, then (when it includes
lib/partition.lua) its partition's, which that library declares; the same for its arguments. Python hands
them by name (`ScriptLayout.positional`) and Lua reads them by name from `K` and `A`, which a generated
binder fills from KEYS and ARGV as each call begins; no body reads KEYS or ARGV.

A library keeps what it holds for one call (the clock it read, what it holds back) in its own state, and
declares the functions that manage it: `--!setup f` starts it afresh as a call (or a batch of calls)
begins, `--!enter f` runs as each script call begins with its names bound, `--!teardown f` writes what
it held back as the call or batch ends, even when the script failed part way.

The libraries are written once and shared: in the Functions library they are defined once at load and
every script is a function registered over them, so a call runs only its own body. Running the whole
text of a script (its libraries' definitions included) on every call, as EVALSHA would, took about 6 µs
of an ack's 45 (timed inside Redis with TIME between the steps of the script); servers without Functions
(before Redis 7.0) are refused instead.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from itertools import pairwise

SCRIPT_NAMES = (
    "ack_call",
    "answer_call",
    "answer_input",
    "ask_input",
    "ask_grant_input",
    "ask_grant_live",
    "arm_session_timers",
    "auth_key",
    "begin_server_call",
    "begin_step",
    "cancel_call",
    "cancel_run",
    "check_room",
    "claim_work",
    "commit_step",
    "create_schedule",
    "create_session",
    "delete_schedule",
    "delete_session",
    "dequeue",
    "dispatch_call",
    "done_work",
    "expire_call",
    "finish_run",
    "fire_schedule",
    "idem_begin",
    "idem_finish",
    "inbox_change",
    "inbox_forget",
    "inbox_page",
    "keepers",
    "lapse_client",
    "leave_client",
    "mint_token",
    "note_missing_capability",
    "ping_client",
    "pool_take",
    "post_input",
    "progress_call",
    "publish_version",
    "read_schedules",
    "reclaim_step",
    "register_client",
    "park_server_call",
    "renew_call",
    "renew_step",
    "resolve_approval",
    "retain_session",
    "trim_calls",
    "server_progress",
    "server_result",
    "sweep",
    "take_work",
    "update_tools",
    "add_webhook",
    "change_webhook",
    "remove_webhook",
    "enqueue_deliveries",
    "due_webhooks",
    "take_deliveries",
    "record_delivery",
    "retry_delivery",
    "keep_mcp_connection",
    "forget_mcp_connection",
    "claim_mcp_refresh",
    "settle_mcp_refresh",
    "note_mcp_challenge",
    "expire_mcp_connection",
    "take_mcp_authorization",
    "begin_mcp_authorization",
    "complete_mcp_authorization",
    "require_mcp_authorization",
    "decline_mcp_authorization",
    "wait_mcp_authorization",
    "expire_mcp_authorization",
)

# Every library, each after those it uses (a local function is visible only below its definition), in
# the order the Functions library defines them. A script includes a subsequence of this
# (tests/unit/test_layout.py checks it), so what its includes say it sees is what the library gives it.
LIBRARIES = (
    "lib/core.lua",
    "lib/events.lua",
    "lib/partition.lua",
    "lib/calls.lua",
    "lib/run.lua",
    "lib/session.lua",
    "lib/call.lua",
    "lib/client.lua",
    "lib/input.lua",
    "lib/waiting.lua",
    "lib/hot.lua",
    "lib/webhooks.lua",
)

# The hot routes' scripts, which an API process sends several at a time (broker/scripts/batching.py). A ping is
# not among them: it takes none of its partition's keys to share, and a ping seldom meets another call
# of its partition in flight (pings of 1,000 sessions spread over 1,024 partitions).
# A partition's due schedules are fired side by side by its timekeeper (workers/timekeeper.py), so they
# go together as well: a minute's worth due at one instant is a few FCALLs per partition, not one each.
BATCHED = ("ack_call", "answer_call", "fire_schedule")

# The library of a session's partition: a script that includes it is handed the partition's keys last.
PARTITION_LIBRARY = "lib/partition.lua"
# Runs several calls of the BATCHED scripts in one FCALL (Functions library only).
_BATCH_FILE = "lib/batch.lua"

_INCLUDE = re.compile(r"^--!include (\S+)\n", re.MULTILINE)
_DIRECTIVE = re.compile(r"^--!(key|arg|layout|setup|enter|teardown) +(\S+)", re.MULTILINE)
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _read(name: str) -> str:
    return resources.files("broker.scripts").joinpath("lua", name).read_text(encoding="utf-8")


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()  # noqa: S324 (Redis's id for a script)


@dataclass(frozen=True, slots=True)
class Declared:
    """What one file's header declares: its names, the layouts it takes, its libraries' hooks."""

    keys: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    layouts: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    enter: tuple[str, ...] = ()
    teardown: tuple[str, ...] = ()


def _declared(path: str, header: str) -> Declared:
    found: dict[str, list[str]] = {kind: [] for kind in ("key", "arg", "layout", "setup", "enter", "teardown")}
    for match in _DIRECTIVE.finditer(header):
        found[match.group(1)].append(match.group(2))
    for kind in ("key", "arg"):
        names = found[kind]
        for position, name in enumerate(names):
            bare = name.removesuffix("...")
            if not _NAME.fullmatch(bare):
                raise ValueError(f"{path}: --!{kind} {name} is not a lower_case name")
            if name.endswith("...") and position != len(names) - 1:
                raise ValueError(f"{path}: --!{kind} {name} takes what is left, so it must be the last")
    return Declared(
        tuple(found["key"]),
        tuple(found["arg"]),
        tuple(found["layout"]),
        tuple(found["setup"]),
        tuple(found["enter"]),
        tuple(found["teardown"]),
    )


@cache
def library_declared(path: str) -> Declared:
    """A library's declarations: the header comment before its first line of code."""
    return _declared(path, _read(path).split("\n\n", 1)[0])


@dataclass(frozen=True, slots=True)
class ScriptLayout:
    """A script's keys and arguments by name, in the order the script is handed them. `rest_key` and
    `rest_arg` name a list that takes every key or argument left (before the partition's); `partition`
    names the partition's keys and arguments, which `Scripts` appends from `PartitionKeys`."""

    name: str
    keys: tuple[str, ...]
    args: tuple[str, ...]
    rest_key: str | None
    rest_arg: str | None
    partition_keys: tuple[str, ...]
    partition_args: tuple[str, ...]

    def positional(
        self,
        keys: Mapping[str, str | Sequence[str]],
        args: Mapping[str, Value | Sequence[Value]],
    ) -> tuple[list[str], list[Value]]:
        """The KEYS and ARGV (before the partition's) for `keys` and `args` given by name; a name missing
        or not declared is a programming error, raised before anything is sent."""
        if len(keys) != len(self.keys) + (self.rest_key is not None) or len(args) != len(self.args) + (
            self.rest_arg is not None
        ):
            self._misnamed(keys, args)
        try:
            key_list = [str(_one(self.name, name, keys[name])) for name in self.keys]
            arg_list = [_one(self.name, name, args[name]) for name in self.args]
            if self.rest_key is not None:
                key_list += [str(key) for key in _many(self.name, self.rest_key, keys[self.rest_key])]
            if self.rest_arg is not None:
                arg_list += _many(self.name, self.rest_arg, args[self.rest_arg])
        except KeyError:
            self._misnamed(keys, args)
        return key_list, arg_list

    def _misnamed(self, keys: Mapping[str, object], args: Mapping[str, object]) -> None:
        want_keys = {*self.keys, *([self.rest_key] if self.rest_key else [])}
        want_args = {*self.args, *([self.rest_arg] if self.rest_arg else [])}
        raise TypeError(
            f"script {self.name}: keys {sorted(keys)} and args {sorted(args)} given; it declares keys "
            f"{sorted(want_keys)} and args {sorted(want_args)}"
        )


Value = str | int | bytes


def _one(script: str, name: str, value: Value | Sequence[Value]) -> Value:
    if isinstance(value, str | int | bytes):
        return value
    raise TypeError(f"script {script}: {name} is one value, not a list")


def _many(script: str, name: str, value: Value | Sequence[Value]) -> list[Value]:
    if isinstance(value, str | int | bytes):
        raise TypeError(f"script {script}: {name}... takes a list")
    return list(value)


@dataclass(frozen=True, slots=True)
class ScriptText:
    """One script split where its includes stand: header comment, libraries included, body."""

    name: str
    header: str
    includes: tuple[str, ...]
    body: str

    @property
    def partitioned(self) -> bool:
        return PARTITION_LIBRARY in self.includes

    @property
    def declared(self) -> Declared:
        return _declared(f"{self.name}.lua", self.header)

    def layout(self) -> ScriptLayout:
        """Every name the script is handed, checked: no name twice, every layout a library it includes."""
        own = self.declared
        keys: list[str] = []
        args: list[str] = []
        for path in own.layouts:
            if path not in self.includes:
                raise ValueError(f"{self.name}.lua: --!layout {path} names a library it does not include")
            keys += library_declared(path).keys
            args += library_declared(path).args
        keys += own.keys
        args += own.args
        partition = library_declared(PARTITION_LIBRARY) if self.partitioned else Declared()
        for kind, names in (("key", [*keys, *partition.keys]), ("arg", [*args, *partition.args])):
            bare = [name.removesuffix("...") for name in names]
            twice = {name for name in bare if bare.count(name) > 1}
            if twice:
                raise ValueError(f"{self.name}.lua: --!{kind} {', '.join(sorted(twice))} declared twice")
            if any(name.endswith("...") for name in names[:-1]) and names[-1] not in partition.keys + partition.args:
                raise ValueError(f"{self.name}.lua: only the script's own last --!{kind} may take what is left")
        # lib/partition.lua keeps the partition's arguments in `K` beside its keys (SB_P is the call's K).
        clash = {name.removesuffix("...") for name in keys} & set(partition.args)
        if clash:
            raise ValueError(f"{self.name}.lua: no key may be named like a partition argument: {sorted(clash)}")
        rest_key = keys.pop().removesuffix("...") if keys and keys[-1].endswith("...") else None
        rest_arg = args.pop().removesuffix("...") if args and args[-1].endswith("...") else None
        return ScriptLayout(self.name, tuple(keys), tuple(args), rest_key, rest_arg, partition.keys, partition.args)

    def binder(self) -> str:
        """Lua that binds this call's KEYS and ARGV to `K` and `A` by name, then runs the `--!enter` hooks
        of the libraries it includes."""
        layout = self.layout()
        return (
            f"K = {_table('KEYS', layout.keys, layout.rest_key, layout.partition_keys)}\n"
            f"A = {_table('ARGV', layout.args, layout.rest_arg, layout.partition_args)}\n"
            + "".join(f"{hook}()\n" for path in self.includes for hook in library_declared(path).enter)
        )


def _table(source: str, names: tuple[str, ...], rest: str | None, tail: tuple[str, ...]) -> str:
    """A Lua table constructor naming `source`'s entries: `names` first, then `rest` (a list of what is left
    before the last `len(tail)`), then `tail`'s names, counted from the end."""
    fields = [f"{name} = {source}[{i}]" for i, name in enumerate(names, 1)]
    if rest is not None:
        fields.append(f"{rest} = sb_slice({source}, {len(names) + 1}, #{source} - {len(tail)})")
    for i, name in enumerate(tail):
        back = len(tail) - 1 - i
        fields.append(f"{name} = {source}[#{source}" + (f" - {back}]" if back else "]"))
    return "{" + ", ".join(fields) + "}"


@cache
def script_text(name: str) -> ScriptText:
    text = _read(f"{name}.lua")
    found = list(_INCLUDE.finditer(text))
    if not found:
        return ScriptText(name, text.split("\n\n", 1)[0], (), text)
    # The includes stand together, between the header and the body.
    if any(a.end() != b.start() for a, b in pairwise(found)):
        raise ValueError(f"{name}.lua: its --!include lines must stand together")
    return ScriptText(name, text[: found[0].start()], tuple(m.group(1) for m in found), text[found[-1].end() :])


@cache
def layout(name: str) -> ScriptLayout:
    """A script's keys and arguments by name (its header's declarations)."""
    return script_text(name).layout()


def _hooks(paths: Sequence[str]) -> str:
    """`sb_begin` and `sb_end` for a chunk holding the libraries at `paths`: every library's setup in
    order, every teardown in reverse (a later library writes what it held back before those it uses)."""
    setups = "".join(f"  {hook}()\n" for path in paths for hook in library_declared(path).setup)
    teardowns = "".join(f"  {hook}()\n" for path in reversed(paths) for hook in library_declared(path).teardown)
    return f"local function sb_begin()\n{setups}end\nlocal function sb_end()\n{teardowns}end\n"


@dataclass(frozen=True, slots=True)
class Library:
    """The Functions library: its name (carrying its version) and text, and each script's function."""

    name: str
    text: str
    functions: dict[str, str]
    batch: str
    """The function running several calls of the BATCHED scripts, all of one partition, in one FCALL."""


@cache
def library() -> Library:
    """Every script as one Redis Functions library. Its name and its functions' names end in a hash of its
    text, so processes of two releases sharing a Redis (a rolling update) each call their own."""
    parts = ["local KEYS, ARGV, K, A\n", *(_read(path) for path in LIBRARIES)]
    # Each script's functions are fields, not locals: a Lua function holds at most 200 locals, and the
    # libraries' own take most of them.
    parts.append("local SB_BIND, SB_SCRIPT = {}, {}\n")
    for name in SCRIPT_NAMES:
        script = script_text(name)
        parts.append(
            f"\nSB_BIND.{name} = function()\n{script.binder()}end\nSB_SCRIPT.{name} = function()\n{script.body}\nend\n"
        )
    batched = ", ".join(f"{name} = {{SB_SCRIPT.{name}, SB_BIND.{name}}}" for name in BATCHED)
    parts += [_hooks(LIBRARIES), f"local SB_BATCHED = {{{batched}}}\n", _read(_BATCH_FILE)]
    body = "".join(parts)
    version = _sha(body)[:12]
    functions = {name: f"sb_{name}_{version}" for name in SCRIPT_NAMES}
    registrations = "".join(
        f"do\nlocal script, bind = SB_SCRIPT.{name}, SB_BIND.{name}\n"
        f"redis.register_function('{function}', function(keys, args)\nKEYS, ARGV = keys, args\n"
        f"return sb_run_script(script, bind, sb_begin, sb_end)\nend)\nend\n"
        for name, function in functions.items()
    )
    registrations += f"redis.register_function('sb_batch_{version}', sb_batch)\n"
    library_name = f"switchboard_{version}"
    return Library(library_name, f"#!lua name={library_name}\n{body}{registrations}", functions, f"sb_batch_{version}")


def names_by_id() -> dict[str, str]:
    """Every script's name by what FCALL, SLOWLOG and MONITOR show: its function."""
    found = {function: name for name, function in library().functions.items()}
    found[library().batch] = "batch (" + ", ".join(BATCHED) + ")"
    return found

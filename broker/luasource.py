"""The Lua text Redis runs, built from `broker/lua`: one Redis Functions library holding every script, or
(on a Redis without Functions, before 7.0) each script on its own for EVALSHA.

A script file is a header comment, its `--!include lib/x.lua` lines, then its body. The libraries are
written once and shared: in the Functions library they are defined once at load and every script is a
function registered over them, so a call runs only its own body. Running the whole text of a script
(its libraries' definitions included) on every EVALSHA took about 6 µs of an ack's 45 (timed inside
Redis with TIME between the steps of the script). Both forms run the same text: the libraries read
`KEYS` and `ARGV` as the chunk's own locals, which each call sets before its body runs.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from itertools import pairwise

SCRIPT_NAMES = (
    "ack_call",
    "answer_call",
    "arm_session_timers",
    "auth_key",
    "begin_server_call",
    "begin_step",
    "cancel_call",
    "cancel_run",
    "check_room",
    "claim_work",
    "commit_step",
    "create_session",
    "delete_session",
    "dequeue",
    "dispatch_call",
    "done_work",
    "expire_call",
    "finish_run",
    "idem_begin",
    "idem_finish",
    "keepers",
    "lapse_client",
    "leave_client",
    "mint_token",
    "ping_client",
    "pool_take",
    "post_input",
    "progress_call",
    "publish_version",
    "reclaim_step",
    "register_client",
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
)

# Every library, each after those it uses (a local function is visible only below its definition). A
# script includes a subsequence of this (tests/unit/test_layout.py checks it), so it sees the same
# definitions in both forms.
LIBRARIES = (
    "lib/core.lua",
    "lib/partition.lua",
    "lib/calls.lua",
    "lib/run.lua",
    "lib/session.lua",
    "lib/call.lua",
    "lib/client.lua",
    "lib/http.lua",
)

# What a library holds back until its script ends (lib/core.lua: seqs and storage counts, messages;
# lib/partition.lua: figures), in the order it is written.
_FLUSHES = (
    ("lib/partition.lua", "sb_flush_counts()\n"),
    ("lib/core.lua", "sb_flush_use()\n"),
    ("lib/core.lua", "sb_flush_outbox()\n"),
)

# A library serves every call (or batch of calls): what one holds (the clock it read, the alarm it saw,
# what it held back) starts afresh as the next begins.
_CALL_ENDS = (
    """
local function sb_begin()
  sb_clock_read = false
  sb_use, sb_call_counted = {}, {}
  sb_outbox, sb_outbox_order = {}, {}
  sb_counted, sb_counted_stats = {}, nil
  sb_work_woken, sb_alarm = false, nil
  sb_token_good, sb_tokens_good, sb_meta_live = nil, nil, nil
end

local function sb_end()
"""
    + "".join(code for _, code in _FLUSHES)
    + "end\n"
)


_END_CALL = "sb_end()\n"


def _guarded(call: str, flush: str) -> str:
    """Lua that runs `call` and then `flush`, even when the call fails part way (what it did is kept, as
    Redis keeps a failed script's writes, so the seqs it used must be counted), then answers as it did."""
    return (
        f"local sb_ok, sb_answer = pcall({call})\n{flush}if not sb_ok then error(sb_answer, 0) end\nreturn sb_answer\n"
    )


# The hot routes' scripts, which an API process sends several at a time (broker/batching.py). A ping is
# not among them: it takes none of its partition's keys to share, and a ping seldom meets another call
# of its partition in flight (pings of 1,000 sessions spread over 1,024 partitions).
BATCHED = ("ack_call", "answer_call")

# Runs several calls in one FCALL, each as if it were called alone and each answered alone: an error in
# one (a bug; a refusal is an answer) is that call's answer, and the calls after it still run.
# KEYS: the keys every call ends with (its partition's), then each call's own keys, in order.
# ARGV[1] the number of calls  ARGV[2] the number of shared keys, then per call: script name, its number
# of own keys, its number of arguments, its arguments. Returns one reply (or error) per call, in order.
_BATCH = """
local SB_BATCHED = {{batched}}

local function sb_batch(keys, args)
  sb_begin()
  local shared = tonumber(args[2])
  local replies, k, a = {}, shared + 1, 3
  for i = 1, tonumber(args[1]) do
    local script, nk, na = SB_BATCHED[args[a]], tonumber(args[a + 1]), tonumber(args[a + 2])
    a = a + 3
    local call_keys, call_args = {}, {}
    for j = 1, nk do call_keys[j] = keys[k + j - 1] end
    for j = 1, shared do call_keys[nk + j] = keys[j] end
    for j = 1, na do call_args[j] = args[a + j - 1] end
    k, a = k + nk, a + na
    KEYS, ARGV = call_keys, call_args
    local ok, reply = pcall(script)
    if ok then
      replies[i] = reply
    elseif type(reply) == 'table' and reply.err then
      replies[i] = reply
    else
      replies[i] = {err = tostring(reply)}
    end
  end
  sb_end()
  return replies
end
"""

# The library of a session's partition: a script that includes it gets the partition's keys last, and
# begins by pointing the library at them.
PARTITION_LIBRARY = "lib/partition.lua"
_ENTER_PARTITION = "sb_partition_enter()\n"

_INCLUDE = re.compile(r"^--!include (\S+)\n", re.MULTILINE)


def _read(name: str) -> str:
    return resources.files("broker").joinpath("lua", name).read_text(encoding="utf-8")


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()  # noqa: S324 (Redis's id for a script)


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
    def entry(self) -> str:
        """The body as it runs, the partition pointed at first when the script has one."""
        return (_ENTER_PARTITION if self.partitioned else "") + self.body

    @property
    def flush(self) -> str:
        """What the script's libraries hold back until it ends: the figures counted, the messages."""
        return "".join(code for path, code in _FLUSHES if path in self.includes)


@cache
def script_text(name: str) -> ScriptText:
    text = _read(f"{name}.lua")
    found = list(_INCLUDE.finditer(text))
    if not found:
        return ScriptText(name, "", (), text)
    # The includes stand together, between the header and the body.
    if any(a.end() != b.start() for a, b in pairwise(found)):
        raise ValueError(f"{name}.lua: its --!include lines must stand together")
    return ScriptText(name, text[: found[0].start()], tuple(m.group(1) for m in found), text[found[-1].end() :])


def source(name: str) -> str:
    """A script whole, for EVALSHA: its header, the libraries it includes, and its body."""
    script = script_text(name)
    if not script.includes:
        return script.body
    libraries = "".join(_read(path) for path in script.includes)
    # KEYS and ARGV are the call's globals here; the libraries read them as the chunk's locals.
    return (
        f"{script.header}local KEYS, ARGV = KEYS, ARGV\n{libraries}local function sb_main()\n{script.entry}\nend\n"
        + _guarded("sb_main", script.flush)
    )


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
    parts = ["local KEYS, ARGV\n", *(_read(path) for path in LIBRARIES)]
    for name in SCRIPT_NAMES:
        script = script_text(name)
        parts.append(f"\nlocal function sb_script_{name}()\n{script.entry}\nend\n")
    batched = ", ".join(f"{name} = sb_script_{name}" for name in BATCHED)
    parts.append(_CALL_ENDS + _BATCH.replace("{batched}", batched))
    body = "".join(parts)
    version = _sha(body)[:12]
    functions = {name: f"sb_{name}_{version}" for name in SCRIPT_NAMES}
    registrations = "".join(
        f"redis.register_function('{function}', function(keys, args)\nKEYS, ARGV = keys, args\nsb_begin()\n"
        f"{_guarded(f'sb_script_{name}', _END_CALL)}end)\n"
        for name, function in functions.items()
    )
    registrations += f"redis.register_function('sb_batch_{version}', sb_batch)\n"
    library_name = f"switchboard_{version}"
    return Library(library_name, f"#!lua name={library_name}\n{body}{registrations}", functions, f"sb_batch_{version}")


def script_sha(name: str) -> str:
    """The SHA1 EVALSHA runs a script by."""
    return _sha(source(name))


def names_by_id() -> dict[str, str]:
    """Every script's name by what EVALSHA, FCALL, SLOWLOG and MONITOR show: its SHA1 and its function."""
    found = {script_sha(name): name for name in SCRIPT_NAMES}
    found.update({function: name for name, function in library().functions.items()})
    found[library().batch] = "batch (" + ", ".join(BATCHED) + ")"
    return found

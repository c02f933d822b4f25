"""Every event a script builds (lib/events.lua, generated from common/events/catalogue.py) is stored in its
declared order: read back as its record and written again, it is the same bytes. The flows below make each
type the scripts build, through the real scripts, on both Redis kinds."""

from __future__ import annotations

import re

import pytest

from broker import Broker
from broker.services.runs import PlannedCall, Route
from common.codec import uuid7
from common.events.read import decode, encode
from tests.helpers import HIGHLIGHT, SCRIPTED_CONFIG, call, commit, make_session, start_run, work_entries
from workers.catalog import Catalog
from workers.config import RunConfig
from workers.tools.builtins import BUILTINS

pytestmark = pytest.mark.both_redis

# What the log splices in front of every body (lib/core.lua sb_append).
_LOGGED = re.compile(rb'^\{"seq":\d+,"created_at":"[^"]+",')

# Every type whose body a script assembles (the rest come whole from Python: common/events/build.py).
LUA_BUILT = {
    "session_created",
    "message_user",
    "run_queued",
    "run_started",
    "run_completed",
    "run_cancelled",
    "run_failed",
    "custom",
    "tool_result",
    "approval_resolved",
    "client_registered",
    "client_tools_updated",
    "client_left",
    "client_tool_acked",
    "client_tool_failed",
}

APPROVE = {**SCRIPTED_CONFIG, "client_tool_policies": {"client__web__highlight_row": "require_approval"}}
LOOKUP = {"name": "lookup", "description": "Find a row", "parameters": {"type": "object"}}


async def _begin(broker: Broker, session_id: str, run_id: str, step: int) -> None:
    member = f"s|{session_id}|{run_id}|{step}|0"
    (entry,) = [e for e, m in await work_entries(broker, session_id) if m == member]
    assert await broker.runs.begin(session_id, run_id, step, 0, 25, entry) == "run"


async def approvals_and_calls(broker: Broker) -> str:
    """Registrations, approvals (allowed with edited arguments and remembered, denied, remembered again),
    an ack, a cancel, a run that completes with its usage."""
    session_id = await make_session(broker, APPROVE)
    web = await broker.clients.register(session_id, uuid7(), "web", 60, [HIGHLIGHT])
    await broker.clients.register(session_id, uuid7(), "tab", None, [LOOKUP])
    await broker.clients.update_tools(session_id, web.id, [HIGHLIGHT, LOOKUP])
    run_id = await start_run(broker, session_id, 'a "quoted" line\nand another')
    allowed, denied = call("client__web__highlight_row", {"row_id": "1"}), call("client__web__highlight_row")
    await commit(broker, session_id, run_id, [allowed, denied], APPROVE)
    await broker.approvals.resolve(
        session_id, allowed.call_id, "allow", "", "key-1", remember=True, arguments={"row_id": "2"}
    )
    await broker.approvals.resolve(session_id, denied.call_id, "deny", "not that one", "key-1")
    await broker.clients.ack(session_id, web.id, allowed.call_id)
    await broker.calls.cancel(session_id, allowed.call_id, "enough")
    await _begin(broker, session_id, run_id, 1)
    again = call("client__web__highlight_row")
    message = '{"type":"message_assistant","message":{"role":"assistant","content":[],"model":null}}'
    planned = [(again, await _route(broker, session_id, again))]
    usage = '{"input_tokens":12,"output_tokens":3}'
    await broker.runs.commit(session_id, run_id, 1, 0, message, planned, "", usage)
    await broker.runs.finish(session_id, run_id, 1, 0, "run_completed")
    return session_id


async def _route(broker: Broker, session_id: str, planned: PlannedCall) -> Route:
    catalog = Catalog.build(await broker.runs.offered(session_id), BUILTINS, RunConfig.of(APPROVE), broker.arguments)
    return await catalog.route(planned)


async def runs_that_end_otherwise(broker: Broker) -> str:
    """A run failed, one cancelled with its queue, a client leaving with a call owed, a call awaiting
    approval when its run ends, a run-scoped registration with a lease."""
    session_id = await make_session(broker, APPROVE, policy="queue")
    web = await broker.clients.register(session_id, uuid7(), "web", None, [HIGHLIGHT, LOOKUP])
    failing = await start_run(broker, session_id)
    await broker.runs.finish(session_id, failing, 0, 0, "run_failed", "the model said \\no/")
    owing = await start_run(broker, session_id)
    await commit(broker, session_id, owing, [call("client__web__lookup"), call("client__web__highlight_row")], APPROVE)
    assert (await broker.runs.submit(session_id, uuid7(), uuid7(), "later", "client")).outcome == "new_run"
    await broker.clients.leave(session_id, web.id)
    await broker.runs.cancel(session_id)
    await broker.runs.cancel(session_id)
    scoped = (uuid7(), [LOOKUP])
    await broker.runs.submit(session_id, uuid7(), uuid7(), "with tools", "external", scoped, scoped_ttl_s=30)
    return session_id


async def _bodies(broker: Broker, session_id: str) -> list[bytes]:
    """The session's stored bodies without seq and created_at. Redis's cjson (sb_str) writes `/` as `\\/`, the
    same JSON string as msgspec's `/`: a matter of escaping, not of order, so it is written back as `/`."""
    rows = await broker.log.after(session_id, 0, 10_000)
    return [_LOGGED.sub(b"{", data).replace(b"\\/", b"/") for _, data in rows]


async def test_every_body_a_script_builds_is_written_in_its_declared_order(broker: Broker) -> None:
    bodies = [*await _bodies(broker, await approvals_and_calls(broker))]
    bodies += await _bodies(broker, await runs_that_end_otherwise(broker))
    for body in bodies:
        assert encode(decode(body)).encode() == body
    made = {type(decode(body)).__struct_config__.tag for body in bodies}
    assert made >= LUA_BUILT
    written = b"\n".join(bodies)
    # The extensions each script writes when it has them.
    for mark in (b'"remember":"session"', b'"remembered":true', b'"arguments":{"row_id":"2"}', b'"detail":"cancelled"'):
        assert mark in written
    assert b'"usage":{"input_tokens":12,"output_tokens":3}' in written
    assert b'"lifetime":{"type":"ttl","data":{"seconds":30}}' in written

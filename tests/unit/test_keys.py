"""Golden key names: renaming a key is a data migration, so every name is pinned here."""

from __future__ import annotations

from broker.keys import KeySpace

SID = "01a22ad0-37ab-71e3-9fe8-89a4ab14876a"


def test_workspace_and_global_names() -> None:
    keys = KeySpace()
    assert [
        keys.workspace,
        keys.api_keys,
        keys.api_key("k"),
        keys.api_key_secret("h"),
        keys.agents,
        keys.agent("a"),
        keys.agent_versions("a"),
        keys.agent_sessions("a"),
        keys.version("v"),
        keys.providers,
        keys.provider("p"),
        keys.sessions,
        keys.workspace_idempotency("d"),
        keys.deadlines,
        keys.leases,
        keys.work,
        keys.steps,
        keys.dequeue,
        keys.purges,
        keys.queue,
        keys.worker_health("host"),
        keys.hub_control,
        keys.step_job_id("r", 3, 1),
        keys.tool_job_id("s", "c"),
    ] == [
        "sb:{w}:workspace",
        "sb:{w}:apikeys",
        "sb:{w}:apikey:k",
        "sb:{w}:apikey-secret:h",
        "sb:{w}:agents",
        "sb:{w}:agent:a",
        "sb:{w}:agent:a:versions",
        "sb:{w}:agent:a:sessions",
        "sb:{w}:version:v",
        "sb:{w}:providers",
        "sb:{w}:provider:p",
        "sb:{w}:sessions",
        "sb:{w}:idem:d",
        "sb:deadlines",
        "sb:leases",
        "sb:work",
        "sb:steps",
        "sb:dequeue",
        "sb:purge",
        "sb:arq:queue",
        "sb:arq:health:host",
        "sb:hub",
        "sb:step:r:3:1",
        "sb:tool:s:c",
    ]


def test_session_names_carry_the_session_as_hash_tag() -> None:
    s = KeySpace().session(SID)
    names = [
        s.meta, s.events, s.tokens, s.names, s.clients, s.calls, s.owed, s.run, s.inbox, s.queue, s.live,
        s.client("c"), s.lease("c"), s.client_calls("c"), s.deadline("call_1"), s.idempotency("d"),
    ]  # fmt: skip
    suffixes = ["meta", "events", "tokens", "names", "clients", "calls", "owed", "run", "inbox", "queue", "live"]
    suffixes += ["client:c", "client:c:lease", "client:c:calls", "dl:call_1", "idem:d"]
    assert names == [f"sb:{{{SID}}}:{suffix}" for suffix in suffixes]


def test_nothing_is_named_under_arq_but_arq_own_job_keys() -> None:
    keys = KeySpace()
    assert not any(name.startswith("arq:") for name in (keys.queue, keys.worker_health("h"), keys.wake))
    # The one place Switchboard writes arq's keys (enqueue_job.lua) names them as arq does.
    assert (keys.arq_job("sb:step:r:1:1"), keys.arq_result("j")) == ("arq:job:sb:step:r:1:1", "arq:result:j")


def test_expired_key_names_parse_back() -> None:
    keys = KeySpace("t1")
    s = keys.session(SID)
    assert keys.parse_expired(s.deadline("call_a:b/c")) == ("deadline", SID, "call_a:b/c")
    assert keys.parse_expired(s.lease("0190f2a0-0000-7000-8000-0000000000aa")) == (
        "lease",
        SID,
        "0190f2a0-0000-7000-8000-0000000000aa",
    )
    assert keys.parse_expired(s.meta) is None
    assert keys.parse_expired(KeySpace("other").session(SID).deadline("x")) is None
    assert keys.split_member(keys.member(SID, "call:with:colons")) == (SID, "call:with:colons")

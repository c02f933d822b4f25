"""Golden key names: renaming a key is a data migration, so every name is pinned here."""

from __future__ import annotations

import binascii

from broker.keys import KeySpace
from broker.partitions import CLUSTER_SLOTS, partition_of, tag

SID = "01a22ad0-37ab-71e3-9fe8-89a4ab14876a"


def slot(key: str) -> int:
    """Redis Cluster's slot of a key (the hash tag's CRC16 when it has one)."""
    start = key.find("{")
    if start >= 0:
        end = key.find("}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return binascii.crc_hqx(key.encode(), 0) % CLUSTER_SLOTS


def test_workspace_names() -> None:
    keys = KeySpace()
    assert [
        keys.workspace,
        keys.partition_count,
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
        keys.platform_offer("p"),
        keys.sessions,
        keys.workspace_idempotency("d"),
        keys.keepers,
        keys.worker_health("host"),
        keys.hub_control,
    ] == [
        "sb:{w}:workspace",
        "sb:{w}:partitions",
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
        "sb:{w}:platform:p",
        "sb:{w}:sessions",
        "sb:{w}:idem:d",
        "sb:{w}:keepers",
        "sb:{w}:health:host",
        "sb:hub",
    ]
    assert len({slot(name) for name in [keys.workspace, keys.keepers, keys.agent("a"), keys.sessions]}) == 1


def test_partition_names() -> None:
    p = KeySpace().partition(7)
    assert p.block == [
        f"sb:{{{tag(7)}}}:{suffix}"
        for suffix in (
            "deadlines",
            "leases",
            "steps",
            "dequeue",
            "purge",
            "claims",
            "schedules",
            "work",
            "alarm",
            "stats",
        )
    ]
    assert {slot(name) for name in p.block} == {7 * 16}


def test_a_session_and_its_partition_share_one_slot() -> None:
    keys = KeySpace()
    s = keys.session(SID)
    names = [
        s.meta, s.events, s.tokens, s.names, s.clients, s.calls, s.owed, s.run, s.inbox, s.queue,
        s.client("c"), s.client_calls("c"), s.idempotency("d"), s.trace("r"),
    ]  # fmt: skip
    suffixes = ["meta", "events", "tokens", "names", "clients", "calls", "owed", "run", "inbox", "queue"]
    suffixes += ["client:c", "client:c:calls", "idem:d", "trace:r"]
    base = f"sb:{{{tag(partition_of(SID))}}}:s:{SID}"
    assert names == [f"{base}:{suffix}" for suffix in suffixes]
    assert s.live == f"{base}:live"
    assert s.partition == keys.partition(partition_of(SID))
    assert {slot(name) for name in [*names, *s.partition.block]} == {partition_of(SID) * 16}


def test_alarm_channels_name_their_partition() -> None:
    keys = KeySpace("t1")
    assert keys.partition_of_alarm(keys.partition(1023).alarm) == 1023
    assert keys.partition_of_alarm(KeySpace("other").partition(3).alarm) is None
    assert keys.partition_of_alarm("t1:{3.bogus}:alarm") is None
    assert keys.alarm_pattern == "t1:{*}:alarm"
    assert keys.split_member(keys.member(SID, "call:with:colons")) == (SID, "call:with:colons")


def test_inbox_names_share_the_workspace_slot() -> None:
    keys = KeySpace()
    names = [
        keys.inbox_items,
        keys.inbox_index(),
        keys.inbox_index("call"),
        keys.inbox_index(None, "a"),
        keys.inbox_index(None, None, "u:{x}"),
        keys.inbox_index("approval", "a", "u"),
        keys.inbox_session(SID),
    ]
    assert names == [
        "sb:{w}:inbox:items",
        "sb:{w}:inbox:ix",
        "sb:{w}:inbox:ix:k:call",
        "sb:{w}:inbox:ix:a:a",
        "sb:{w}:inbox:ix:u:u:{x}",
        "sb:{w}:inbox:ix:k:approval:a:a:u:u",
        f"sb:{{w}}:inbox:s:{SID}",
    ]
    assert {slot(name) for name in names} == {slot(keys.workspace)}

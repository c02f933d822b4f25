"""Partitions: every session belongs to one of `PARTITIONS`, and each partition is one Redis Cluster slot.

A partition's hash tag is chosen so that partition `p` sits in slot `p * SLOT_STRIDE` exactly: Redis
Cluster hands masters contiguous slot ranges, so any number of masters up to a few hundred gets an even
share of partitions (48 masters: 21 or 22 each), which random tags would not give (a partition per random
slot spreads with a binomial error). The tags were found by searching `<p>.<base-36 counter>` for the
first string whose CRC16 lands on the slot; `tests/unit/test_partitions.py` checks every one.

`PARTITIONS` is fixed for the life of a deployment: a session's keys are found by its partition, so a
deployment created with one number cannot be read with another (`broker/core.py` records it at first
start and refuses a mismatch).
"""

from __future__ import annotations

import zlib
from importlib import resources

PARTITIONS = 1024
CLUSTER_SLOTS = 16384
SLOT_STRIDE = CLUSTER_SLOTS // PARTITIONS

# One tag per partition, in order, whitespace-separated (data, so the module stays readable).
_TAGS = resources.files("broker").joinpath("partition-tags.txt").read_text(encoding="ascii").split()
assert len(_TAGS) == PARTITIONS


def tag(partition: int) -> str:
    """The hash tag (without braces) of partition `partition`."""
    return _TAGS[partition]


def partition_of(session_id: str) -> int:
    """The partition a session belongs to, from its id alone (CRC32, not the id's time-ordered prefix)."""
    return zlib.crc32(session_id.encode()) % PARTITIONS


def partition_of_tag(text: str) -> int | None:
    """The partition whose tag is `text`, or None."""
    number, dot, _ = text.partition(".")
    if not dot or not number.isdigit():
        return None
    partition = int(number)
    return partition if partition < PARTITIONS and _TAGS[partition] == text else None

"""Partitions: each tag sits in the slot it was chosen for, and sessions spread over all of them."""

from __future__ import annotations

import binascii
import random
import uuid
from collections import Counter

from broker.partitions import CLUSTER_SLOTS, PARTITIONS, SLOT_STRIDE, partition_of, partition_of_tag, tag
from broker.services.keepers import owned


def test_every_tag_sits_in_its_own_evenly_spaced_slot() -> None:
    slots = [binascii.crc_hqx(tag(p).encode(), 0) % CLUSTER_SLOTS for p in range(PARTITIONS)]
    assert slots == [p * SLOT_STRIDE for p in range(PARTITIONS)]
    assert all(partition_of_tag(tag(p)) == p for p in range(PARTITIONS))


def test_any_number_of_masters_with_even_slot_ranges_gets_an_even_share() -> None:
    for masters in (3, 5, 7, 48):
        # redis-cli --cluster create gives master i the slots from i * 16384 / n on.
        bounds = [round(i * CLUSTER_SLOTS / masters) for i in range(masters + 1)]
        share = Counter(
            next(i for i in range(masters) if bounds[i] <= p * SLOT_STRIDE < bounds[i + 1]) for p in range(PARTITIONS)
        )
        assert max(share.values()) - min(share.values()) <= 1, (masters, share)


def test_sessions_spread_over_every_partition() -> None:
    rng = random.Random(7)
    counts = Counter(partition_of(str(uuid.UUID(int=rng.getrandbits(128)))) for _ in range(200_000))
    assert len(counts) == PARTITIONS
    mean = 200_000 / PARTITIONS
    assert mean * 0.7 < min(counts.values())
    assert max(counts.values()) < mean * 1.3


def test_live_workers_split_the_partitions_and_a_leaver_moves_only_its_share() -> None:
    workers = [f"w{i}" for i in range(4)]
    shares = {w: owned(workers, w) for w in workers}
    assert set().union(*shares.values()) == set(range(PARTITIONS))
    assert sum(len(s) for s in shares.values()) == PARTITIONS
    assert all(PARTITIONS / 4 * 0.8 < len(s) < PARTITIONS / 4 * 1.2 for s in shares.values())
    after = {w: owned(workers[:3], w) for w in workers[:3]}
    for w in workers[:3]:
        assert shares[w] <= after[w]
    assert owned(workers, "stranger") == frozenset()

"""The simulation over a PARTITIONBY route (`interleaved`): each chunk a writer reads is cut
into one object per group, so a partition's objects interleave, and some offsets Kafka never
had are in no object. Exactly once is proven from the bodies (`Checker.never_had`); a commit
naming only one group's objects of its range (`partial_groups`) must be caught."""

import itertools
import json
import os
import time

import pytest

from kafka_archive.archiver.protocol.invariants import Checker, Violation
from kafka_archive.archiver.protocol.log import (
    ObjectRef,
    PartitionCommit,
    PartitionRef,
    decode_entry,
    encode_entry,
    entry_key,
)
from kafka_archive.archiver.protocol.memstore import MemStore
from kafka_archive.archiver.protocol.mutations import GROUPED_MUTATIONS
from kafka_archive.archiver.protocol.simulation import Simulation, first_failure, simulate
from kafka_archive.archiver.protocol.simworld import PREFIX, GroupedKafka
from kafka_archive.archiver.protocol.steps import drive
from kafka_archive.archiver.protocol.writer import Writer, checksum

SCHEDULES = int(os.environ.get("SIM_SCHEDULES", "200"))
REF = PartitionRef("r", "t", 0)


def test_interleaved_schedules_hold_every_invariant_and_interleave() -> None:
    started = time.monotonic()
    overlapping = 0
    for seed in range(SCHEDULES):
        sim = Simulation(seed, interleaved=True)
        result = sim.run()
        if result.violation is not None:
            pytest.fail(
                "\n".join(result.moves[-40:])
                + f"\nseed {seed}: {result.violation}\nreplay: python -m "
                f"kafka_archive.archiver.protocol.simulation --replay --interleaved --seed {seed}"
            )
        for st in sim.checker.state.partitions.values():
            spans = sorted((o.first, o.last) for o in st.objects)
            overlapping += any(b[0] <= a[1] for a, b in itertools.pairwise(spans))
    took = time.monotonic() - started
    print(f"{SCHEDULES} interleaved schedules in {took:.1f} s; {overlapping} partitions interleave")
    assert overlapping >= SCHEDULES // 4, "objects of several groups overlap in most schedules"


@pytest.mark.parametrize("mutation", sorted(GROUPED_MUTATIONS))
def test_each_grouped_bug_is_caught(mutation: str) -> None:
    failure, ran = first_failure(range(1000), frozenset([mutation]), interleaved=True)
    print(f"{mutation}: caught after {ran} schedules: {failure and failure.violation}")
    assert failure is not None, f"{mutation} survived {ran} schedules"
    assert "in no committed object" in (failure.violation or "")


def test_an_interleaved_seed_replays_exactly() -> None:
    for seed in range(3):
        a, b = simulate(seed, interleaved=True), simulate(seed, interleaved=True)
        assert (a.moves, a.violation) == (b.moves, b.violation)


def _archived() -> tuple[MemStore, Checker]:
    """Entry 1 claims, entry 2 commits [0, 7) of two groups' objects; offset 3 never had."""
    store = MemStore()
    source = GroupedKafka({REF: 7}, 7)
    w = Writer(PREFIX, "run-1", [REF], source, clock=lambda: store.now, groups=source)
    w.batch_objects = 5
    drive(w.session(), store)
    checker = Checker(store, PREFIX, never_had=source.had)
    checker.check()
    commit = decode_entry(store.get(entry_key(PREFIX, 2)).body).commits[0]
    assert not commit.tiled and len(commit.objects) == 2
    assert commit.objects[0].first < commit.objects[1].first <= commit.objects[0].last
    return store, checker


def test_the_checker_sees_a_group_missing_from_a_commit() -> None:
    store, _ = _archived()
    entry = decode_entry(store.get(entry_key(PREFIX, 2)).body)
    c = entry.commits[0]
    claim = decode_entry(store.get(entry_key(PREFIX, 1)).body)
    fresh = MemStore()
    fresh.put(entry_key(PREFIX, 1), encode_entry(claim), {})
    for o in c.objects:
        fresh.put(o.key, store.get(o.key).body, {})
    one = PartitionCommit(REF, c.start, c.end, c.objects[:1], tiled=False)
    fresh.put(
        entry_key(PREFIX, 2),
        encode_entry(entry.__class__(**{**entry.__dict__, "commits": (one,)})),
        {},
    )
    with pytest.raises(Violation, match="in no committed object"):
        Checker(fresh, PREFIX, never_had=GroupedKafka({}).had).check()


def test_the_checker_sees_an_offset_in_two_objects() -> None:
    store, _ = _archived()
    entry = decode_entry(store.get(entry_key(PREFIX, 2)).body)
    c = entry.commits[0]
    key = f"{PREFIX}/t/g9/0/{0:020d}.json"
    body = json.dumps({"partition": 0, "offsets": [0]}).encode()
    store.put(key, body, {})
    extra = ObjectRef(key, 0, 0, 1, len(body), checksum(body))
    # (a commit the fold accepts: the count still fits the range when a record is dropped)
    objects = (c.objects[0], extra)
    doubled = PartitionCommit(REF, c.start, c.end, objects, tiled=False)
    fresh = MemStore()
    fresh.put(entry_key(PREFIX, 1), store.get(entry_key(PREFIX, 1)).body, {})
    for o in objects:
        fresh.put(o.key, store.get(o.key).body, {})
    fresh.put(
        entry_key(PREFIX, 2),
        encode_entry(entry.__class__(**{**entry.__dict__, "commits": (doubled,)})),
        {},
    )
    with pytest.raises(Violation, match="offset 0 in"):
        Checker(fresh, PREFIX, never_had=GroupedKafka({}).had).check()

"""The deterministic simulation: seeded schedules hold the invariants, and each reintroduced
bug (a mutation switch of the writer) is caught by some seed within a bound.

SIM_SCHEDULES sets how many clean schedules run (`make simulate` runs a nightly-size count
through the module's command line instead); the fault-coverage assertions (every fault kind,
requests landing after their sender crashed, paused or was declared dead, crashes before
every kind of request of drivers and executors) need the default 400.
"""

import json
import os
import re
import time
from dataclasses import replace
from typing import Any

import pytest

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.invariants import Checker, Violation
from kafka_archive.archiver.protocol.log import (
    Entry,
    ObjectRef,
    PartitionCommit,
    PartitionRef,
    checkpoint_key,
    decode_checkpoint,
    decode_entry,
    encode_checkpoint,
    encode_entry,
    entry_key,
)
from kafka_archive.archiver.protocol.memstore import MemStore
from kafka_archive.archiver.protocol.mutations import MUTATIONS
from kafka_archive.archiver.protocol.simulation import first_failure, simulate
from kafka_archive.archiver.protocol.simworld import PREFIX, Kafka
from kafka_archive.archiver.protocol.steps import drive
from kafka_archive.archiver.protocol.writer import Writer, checksum

SCHEDULES = int(os.environ.get("SIM_SCHEDULES", "400"))
MUTATION_BOUND = 1000


KINDS = (
    "-> Ambiguous",  # lost responses and requests delayed in flight
    "-> PreconditionFailed",
    "DELETE",
    "kafka ",
    "/checkpoint/",
    "pause ",
    "declares attempt",  # the driver times an attempt out and launches another
    "speculates on attempt",  # a copy side by side with a running attempt
    "ends: in the way",  # an attempt meets its live sibling's object
    "format with a place",  # stamped bytes (Parquet, Avro, gzip)
    "format without a place",  # TEXT, BYTES, CSV, uncompressed JSON: no stamp
    "cut off ",  # a run's endpoint never answers again (applying its requests or not)
    "ends: no answer",  # ... and the run stops with the runtime's error
    "COMPLETEUPLOAD",  # objects above the part size: multipart, Complete If-None-Match
)
# a request that lands after its sender crashed, paused, or was declared dead
LANDED_AFTER = ("crashed", "paused", "dead", "running")
DRIVER_POINTS = ("start", "GET entry", "GET checkpoint", "PUT entry", "PUT checkpoint", "wait")
VACUUM_POINTS = ("LIST object", "HEAD object")  # (its DELETE: too rare to require here)
EXECUTOR_POINTS = (
    "start",
    "PUT object",
    "HEAD object",
    "DELETE object",
    "GET entry",
    "UPLOADPART object",  # between parts: an open upload left, aborted by a later start
    "COMPLETEUPLOAD object",
)
CRASH_POINTS = {("driver", p) for p in (*DRIVER_POINTS, *VACUUM_POINTS)} | {
    ("executor", p) for p in EXECUTOR_POINTS
}


def test_seeded_schedules_hold_every_invariant_and_exercise_the_faults() -> None:
    started = time.monotonic()
    seen: set[str] = set()
    landed: set[str] = set()
    crashed: set[tuple[str, str]] = set()
    for seed in range(SCHEDULES):
        result = simulate(seed)
        if result.violation is not None:
            pytest.fail(
                "\n".join(result.moves[-40:])
                + f"\nseed {seed}: {result.violation}\nreplay: python -m "
                f"kafka_archive.archiver.protocol.simulation --replay --seed {seed}"
            )
        for m in result.moves:
            seen.update(k for k in KINDS if k in m)
            if re.match(r"w\S+ (GET|HEAD|LIST) \S+ -> Ambiguous", m):
                seen.add("a read without answer")
            if re.match(r"w\d+ ABORTUPLOAD \S+ -> ok", m):
                seen.add("an open upload aborted")
            if (hit := re.match(r"lands \w+ \S+ of \S+ \((\w+)\)", m)) is not None:
                landed.add(hit[1])
            if (hit := re.match(r"crash w\d+(\.\d+)? before (.*)", m)) is not None:
                crashed.add(("executor" if hit[1] else "driver", hit[2]))
    took = time.monotonic() - started
    print(f"{SCHEDULES} schedules in {took:.1f} s: {SCHEDULES / took:.1f}/s")
    assert seen == {*KINDS, "a read without answer", "an open upload aborted"}
    assert landed >= set(LANDED_AFTER)
    assert crashed >= CRASH_POINTS, sorted(CRASH_POINTS - crashed)


@pytest.mark.parametrize("mutation", [None, "straggler_delete", "lower_attempt_dead"])
def test_a_seed_replays_exactly(mutation: str | None) -> None:
    mutations = frozenset([mutation] if mutation else [])
    for seed in range(5):
        a, b = simulate(seed, mutations), simulate(seed, mutations)
        assert (a.moves, a.violation) == (b.moves, b.violation)


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_each_reintroduced_bug_is_caught(mutation: str) -> None:
    failure, ran = first_failure(range(MUTATION_BOUND), frozenset([mutation]))
    print(f"{mutation}: caught after {ran} schedules: {failure and failure.violation}")
    assert failure is not None, f"{mutation} survived {ran} schedules"


REF = PartitionRef("r", "t", 0)


def _archived_store() -> tuple[MemStore, Checker]:
    """Entry 1 claims, entry 2 commits [0, 4) in two objects, checkpoint 2."""
    store = MemStore()
    w = Writer(PREFIX, "run-1", [REF], Kafka({REF: 4}, 2), clock=lambda: store.now)
    w.checkpoint_every = 2
    drive(w.session(), store)
    checker = Checker(store, PREFIX)
    checker.check()
    return store, checker


def _tamper_checkpoint(store: MemStore) -> None:
    key = checkpoint_key(PREFIX, 2)
    cp = decode_checkpoint(store.get(key).body)
    store.put(key, encode_checkpoint(replace(cp, max_epoch=7)), {})


def _tamper_stale_commit(store: MemStore) -> None:
    # run-2 claims; then run-1, fenced, commits 4..4 anyway
    log = [decode_entry(store.get(entry_key(PREFIX, seq)).body) for seq in (1, 2)]
    claim = core.claim_entry(core.fold_all(core.LogState(), log), "run-2", [REF])
    store.put(entry_key(PREFIX, 3), encode_entry(claim), {})
    stale = decode_entry(store.get(entry_key(PREFIX, 2)).body)
    _commit_4(store, replace(stale, seq=4), [4])


def _commit_4(store: MemStore, template: Entry, offsets: list[int]) -> None:
    key = f"{PREFIX}/t/0/{4:020d}.json"
    store.put(key, json.dumps({"partition": 0, "offsets": offsets}).encode(), {})
    obj = ObjectRef(key, 4, 4, 1, 1, checksum(store.get(key).body))
    commit = PartitionCommit(REF, 4, 5, (obj,))
    store.put(
        entry_key(PREFIX, template.seq), encode_entry(replace(template, commits=(commit,))), {}
    )


def _tamper_body(store: MemStore) -> None:
    # a commit of offset 4 whose object holds offset 5
    _commit_4(store, replace(decode_entry(store.get(entry_key(PREFIX, 2)).body), seq=3), [5])


@pytest.mark.parametrize(
    ("tamper", "violation"),
    [
        (lambda s: s.put(entry_key(PREFIX, 2), b"{}", {}), "log entry 2 overwritten"),
        (_tamper_stale_commit, "invalid entry.*which does not hold it"),
        (lambda s: s.delete(f"{PREFIX}/t/0/{2:020d}.json"), "deleted or overwritten"),
        (lambda s: s.put(f"{PREFIX}/t/0/{0:020d}.json", b"x", {}), "deleted or overwritten"),
        (_tamper_body, "holds 5, the committed objects before it end at 4"),
        (_tamper_checkpoint, "checkpoint 2 is not the fold"),
    ],
)
def test_the_checker_sees_each_invariant_broken(tamper: Any, violation: str) -> None:
    store, checker = _archived_store()
    tamper(store)
    with pytest.raises(Violation, match=violation):
        checker.check()

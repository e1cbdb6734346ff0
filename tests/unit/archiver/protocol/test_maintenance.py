"""The maintenance session (issue 38): a rewrite under SIGKILL at every point, what eager
deletion does to a reader, and the simulation with maintenance sessions among the writers
(clean seeds; each rewrite mutation caught within a bound)."""

import json
import os
import re
import time
from collections import Counter
from collections.abc import Sequence

import pytest

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.invariants import Checker, Violation
from kafka_archive.archiver.protocol.log import PartitionRef, Removed, log_prefix
from kafka_archive.archiver.protocol.maintenance import (
    MUTATIONS,
    Maintainer,
    RewritePlan,
    generation,
    generation_key,
)
from kafka_archive.archiver.protocol.memstore import MemStore
from kafka_archive.archiver.protocol.rewritesim import (
    PREFIX,
    RewritingKafka,
    first_failure,
    simulate,
)
from kafka_archive.archiver.protocol.steps import Steps, drive, execute, read_log
from kafka_archive.archiver.protocol.store import NotFound
from kafka_archive.archiver.protocol.writer import Writer, attempt_key

SCHEDULES = int(os.environ.get("SIM_REWRITE_SCHEDULES", "200"))
MUTATION_BOUND = 1000
P0, P1 = PartitionRef("r", "t", 0), PartitionRef("r", "t", 1)
HIGHS = {P0: 8, P1: 5}
ERASE = {1, 4, 7}  # offsets of P0 whose records carry the erased key
MERGE = 4


def test_generation_keys_keep_the_first_offset_and_never_repeat() -> None:
    key = f"{PREFIX}/t/0/{12:020d}.json"
    assert generation(key) == 0
    g1 = generation_key(key, 1)
    assert g1 == f"{PREFIX}/t/0/{12:020d}.g1.json"
    assert (generation(g1), generation_key(g1, 2)) == (1, f"{PREFIX}/t/0/{12:020d}.g2.json")
    assert int(g1.rpartition("/")[2].split(".")[0]) == 12  # a seek by first offset


def test_an_attempts_own_key_of_a_generation_keeps_the_generation() -> None:
    """A rewrite's object of a format with no place for a stamp: the attempt after the
    generation (``<first>.g<N>.e<epoch>a<attempt>.<ext>``), so the next rewrite of it reads
    generation N and names N + 1, and two attempts never share a key."""
    g2 = generation_key(f"{PREFIX}/t/0/{12:020d}.json", 2)
    own = attempt_key(g2, 5, 3)
    assert own == f"{PREFIX}/t/0/{12:020d}.g2.e5a3.json"
    assert generation(own) == 2
    assert generation_key(own, 3) == f"{PREFIX}/t/0/{12:020d}.g3.e5a3.json"
    assert attempt_key(g2, 5, 4) != own != attempt_key(g2, 6, 3)


def plan_erase_and_compact(state: core.LogState) -> list[RewritePlan]:
    """Erase ERASE from P0 and merge each partition into objects of MERGE records: nothing
    to do once done (what a rerun plans after a rewrite that landed)."""
    plans = []
    for ref, st in sorted(state.partitions.items()):
        removed = {x for r in st.removed for x in range(r.first, r.last + 1)}
        held = [x for o in st.objects for x in range(o.first, o.last + 1) if x not in removed]
        drop = sorted(ERASE & set(held)) if ref == P0 else []
        if st.objects and (drop or len(st.objects) > -(-len(held) // MERGE)):
            removals = tuple(Removed(x, x, "erased", 1.7e9) for x in drop)
            plans.append(RewritePlan(ref, st.objects, removals))
    return plans


def writer(store: MemStore, run: str) -> Writer:
    return Writer(PREFIX, run, [P0, P1], RewritingKafka(dict(HIGHS), 1), lambda: store.now)


def archived() -> tuple[MemStore, Checker]:
    store = MemStore()
    drive(writer(store, "run-1").session(), store)
    checker = Checker(store, PREFIX)
    checker.check()
    return store, checker


def maintainer(store: MemStore, run: str, mutations: Sequence[str] = ()) -> Maintainer:
    source = RewritingKafka(dict(HIGHS), 1, merge=MERGE)
    return Maintainer(
        PREFIX,
        run,
        [],
        source,
        lambda: store.now,
        checkpoint_every=3,
        mutations=frozenset(mutations),
        planner=plan_erase_and_compact,
        rewriter=source,
    )


def step(
    steps: Steps[str],
    store: MemStore,
    checker: Checker,
    limit: int,
    violations: list[str] | None = None,
) -> int:
    """Runs `steps` for at most `limit` requests, checking the invariants after each (a
    SIGKILL after the limit: the generator is dropped). Returns the requests sent. A
    violation raises, or is added to `violations` (and the steps go on)."""
    sent = 0
    try:
        req = next(steps)
        while sent < limit:
            assert not isinstance(req, core.LogState)
            reply = execute(store, req)  # type: ignore[arg-type]
            sent += 1
            try:
                checker.check()
            except Violation as v:
                if violations is None:
                    raise
                violations.append(str(v))
            store.now += 1.0
            req = steps.send(reply)
    except StopIteration:
        pass
    return sent


def bodies(store: MemStore) -> Counter[tuple[int, int]]:
    """(partition, offset) of every record in the objects under the prefix, read from their
    JSON bodies (not through the log)."""
    held: Counter[tuple[int, int]] = Counter()
    for key, o in store.objects.items():
        if not key.startswith(log_prefix(PREFIX)):
            doc = json.loads(o.body)
            held.update((doc["partition"], x) for x in doc["offsets"])
    return held


def test_a_rewrite_killed_at_any_point_is_finished_by_a_rerun_and_vacuum() -> None:
    store, checker = archived()
    total = step(maintainer(store, "m-0").session(), store, checker, limit=10**6)
    assert total > 10
    expected = Counter(
        {(r.partition, x): 1 for r in HIGHS for x in range(HIGHS[r]) if (r, x) not in _erased()}
    )
    for kill_at in range(total + 1):
        store, checker = archived()
        step(maintainer(store, "m-1").session(), store, checker, kill_at)
        rerun = maintainer(store, "m-2")
        step(rerun.session(), store, checker, 10**6)
        assert rerun.outcome in ("rewritten", "nothing to do"), (kill_at, rerun.outcome)
        state = drive(read_log(PREFIX), store)
        assert state.partitions[P0].removed == tuple(
            Removed(x, x, "erased", 1.7e9) for x in sorted(ERASE)
        )
        assert [len(state.partitions[r].objects) for r in (P0, P1)] == [2, 2]
        assert all(state.end(r) == HIGHS[r] for r in HIGHS)
        # listing readers may see replaced objects until vacuum, past the grace
        store.now += 61.0
        step(writer(store, "run-3").session(), store, checker, 10**6)
        assert bodies(store) == expected, kill_at
        data = {k for k in store.objects if not k.startswith(log_prefix(PREFIX))}
        assert data == set(drive(read_log(PREFIX), store).named()) == set(checker.committed)


def _erased() -> set[tuple[PartitionRef, int]]:
    return {(P0, x) for x in ERASE}


@pytest.mark.parametrize("eager", [False, True])
def test_a_reader_that_read_the_log_before_a_rewrite_reads_on_unless_deleted_eagerly(
    eager: bool,
) -> None:
    store, checker = archived()
    reader = drive(read_log(PREFIX), store)  # a reader read the log (cat, restore, verify) ...
    m = maintainer(store, "m-1", ["rewrite_eager_delete"] if eager else [])
    violations: list[str] = []
    step(m.session(), store, checker, 10**6, violations)
    assert m.outcome == "rewritten"
    assert bool(violations) is eager, violations
    for v in violations:
        assert re.search("replaced object .* deleted .* within the grace", v), v
    lost = []
    for key in reader.named():  # ... and now GETs the objects it names
        try:
            store.get(key)
        except NotFound:
            lost.append(key)
    assert bool(lost) is eager


SIM_KINDS = ("ends: rewritten", "ends: fenced", "ends: nothing to do")
MAINT_CRASH_POINTS = {"PUT object", "PUT entry", "GET object", "GET entry", "HEAD object"}


def test_seeded_schedules_with_maintenance_hold_every_invariant() -> None:
    started = time.monotonic()
    seen: set[str] = set()
    crashed: set[str] = set()
    for seed in range(SCHEDULES):
        result = simulate(seed)
        if result.violation is not None:
            pytest.fail(
                "\n".join(result.moves[-40:])
                + f"\nseed {seed}: {result.violation}\nreplay: python -m "
                f"kafka_archive.archiver.protocol.rewritesim --replay --seed {seed}"
            )
        maint = {m.split()[1].rstrip(":") for m in result.moves if m.endswith(": maintenance")}
        for m in result.moves:
            name = m.split()[1] if m.startswith("crash ") else m.split()[0]
            if name not in maint:
                continue
            seen.update(k for k in SIM_KINDS if k in m)
            if hit := re.match(r"crash \S+ before (.*)", m):
                crashed.add(hit[1])
    took = time.monotonic() - started
    print(f"{SCHEDULES} schedules with maintenance in {took:.1f} s")
    assert seen == set(SIM_KINDS)
    assert crashed >= MAINT_CRASH_POINTS, sorted(MAINT_CRASH_POINTS - crashed)


def test_a_rewrite_seed_replays_exactly() -> None:
    for seed in range(5):
        a, b = simulate(seed), simulate(seed)
        assert (a.moves, a.violation) == (b.moves, b.violation)


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_each_rewrite_bug_is_caught(mutation: str) -> None:
    failure, ran = first_failure(range(MUTATION_BOUND), frozenset([mutation]))
    print(f"{mutation}: caught after {ran} schedules: {failure and failure.violation}")
    assert failure is not None, f"{mutation} survived {ran} schedules"

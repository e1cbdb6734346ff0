"""The deterministic simulation: seeded schedules hold the invariants, and each reintroduced
bug (a mutation switch of the writer) is caught by some seed within a bound.

SIM_SCHEDULES sets how many clean schedules run (`make simulate` runs a nightly-size count
through the module's command line instead).
"""

import os
import time

import pytest

from kafka_archive.archiver.protocol.simulation import first_failure, simulate
from kafka_archive.archiver.protocol.writer import MUTATIONS

SCHEDULES = int(os.environ.get("SIM_SCHEDULES", "400"))
MUTATION_BOUND = 1000


def test_seeded_schedules_hold_every_invariant_and_exercise_the_faults() -> None:
    started = time.monotonic()
    seen: set[str] = set()
    kinds = (
        "lands PUT",
        "crash ",
        "pause ",
        "-> Ambiguous",
        "-> PreconditionFailed",
        "DELETE",
        "kafka ",
        "/checkpoint/",
    )
    for seed in range(SCHEDULES):
        result = simulate(seed)
        if result.violation is not None:
            pytest.fail(
                "\n".join(result.moves[-40:])
                + f"\nseed {seed}: {result.violation}\nreplay: python -m "
                f"kafka_archive.archiver.protocol.simulation --replay --seed {seed}"
            )
        if seed < 40:
            seen.update(k for m in result.moves for k in kinds if k in m)
    took = time.monotonic() - started
    print(f"{SCHEDULES} schedules in {took:.1f} s: {SCHEDULES / took:.1f}/s")
    assert seen == set(kinds)


@pytest.mark.parametrize("mutation", [None, "straggler_delete"])
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

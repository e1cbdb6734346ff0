"""The simulation with maintenance over a PARTITIONBY route (issue 38: untiled rewrites):
objects of two groups interleave, the planner picks consecutive objects of one group, the
rewriter keeps the group. Every offset below the end is in exactly one committed object of
its own group, or removed (from the bodies); each grouped rewrite bug is caught."""

import os
import time

import pytest

from kafka_archive.archiver.protocol.mutations import GROUPED_REWRITE_MUTATIONS
from kafka_archive.archiver.protocol.rewritesim import RewriteSimulation, first_failure, simulate

SCHEDULES = int(os.environ.get("SIM_REWRITE_SCHEDULES", "200"))
MUTATION_BOUND = 1000


def test_interleaved_schedules_with_maintenance_hold_every_invariant() -> None:
    started = time.monotonic()
    untiled = 0
    for seed in range(SCHEDULES):
        sim = RewriteSimulation(seed, interleaved=True)
        result = sim.run()
        if result.violation is not None:
            pytest.fail(
                "\n".join(result.moves[-40:])
                + f"\nseed {seed}: {result.violation}\nreplay: python -m "
                "kafka_archive.archiver.protocol.rewritesim --replay --interleaved "
                f"--seed {seed}"
            )
        untiled += sum(
            1
            for raw in sim.checker.entries.values()
            if b'"rewrites"' in raw and b'"tiled":false' in raw
        )
    took = time.monotonic() - started
    print(f"{SCHEDULES} interleaved schedules with maintenance in {took:.1f} s; {untiled} untiled")
    assert untiled >= SCHEDULES // 4, "untiled rewrites land in many schedules"


@pytest.mark.parametrize("mutation", sorted(GROUPED_REWRITE_MUTATIONS))
def test_each_grouped_rewrite_bug_is_caught(mutation: str) -> None:
    failure, ran = first_failure(range(MUTATION_BOUND), frozenset([mutation]), interleaved=True)
    print(f"{mutation}: caught after {ran} schedules: {failure and failure.violation}")
    assert failure is not None, f"{mutation} survived {ran} schedules"


def test_an_interleaved_rewrite_seed_replays_exactly() -> None:
    for seed in range(3):
        a, b = simulate(seed, interleaved=True), simulate(seed, interleaved=True)
        assert (a.moves, a.violation) == (b.moves, b.violation)

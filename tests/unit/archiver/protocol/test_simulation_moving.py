"""The simulation with ends that move without objects (`moving`): retention moves Kafka's low
past what was archived, runs pass the gap (--allow-gaps) or leave the partition alone, and
runs begin partitions at Kafka's end (--start latest). Every offset below a committed end is
then in exactly one committed object, or in exactly one passed gap, or below the partition's
start (from the bodies: `Checker._coverage`). A gap recorded over offsets an object also holds
(`gap_over_object`) and a gap not recorded (`gap_unrecorded`) must be caught."""

import os
import time

import pytest

from kafka_archive.archiver.protocol.mutations import MOVING_MUTATIONS
from kafka_archive.archiver.protocol.simulation import Simulation, first_failure

SCHEDULES = int(os.environ.get("SIM_SCHEDULES", "200"))


def test_moving_schedules_hold_every_invariant_and_pass_gaps_and_begin_late() -> None:
    started = time.monotonic()
    passed = begun = 0
    for seed in range(SCHEDULES):
        sim = Simulation(seed, moving=True)
        result = sim.run()
        if result.violation is not None:
            pytest.fail(
                "\n".join(result.moves[-40:])
                + f"\nseed {seed}: {result.violation}\nreplay: python -m "
                f"kafka_archive.archiver.protocol.simulation --replay --moving --seed {seed}"
            )
        parts = sim.checker.state.partitions.values()
        passed += any(st.gaps for st in parts)
        begun += any(st.begin for st in parts)
    took = time.monotonic() - started
    print(f"{SCHEDULES} moving schedules in {took:.1f} s; {passed} pass gaps, {begun} begin late")
    assert passed >= SCHEDULES // 10, "gaps are passed in many schedules"
    assert begun >= SCHEDULES // 10, "partitions begin past 0 in many schedules"


@pytest.mark.parametrize("mutation", sorted(MOVING_MUTATIONS))
def test_each_moving_end_bug_is_caught_by_the_coverage_invariant(mutation: str) -> None:
    failure, ran = first_failure(range(1000), frozenset([mutation]), moving=True)
    print(f"{mutation}: caught after {ran} schedules: {failure and failure.violation}")
    assert failure is not None and failure.violation is not None
    assert "committed object" in failure.violation, failure.violation  # from the bodies
    assert ran <= 20

"""A partition state's passed gaps (allow_gaps): recorded with the state, merged, bounded."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.state.checkpoint import GAPS_KEPT, PartitionState, append_gap

TP = TopicPartition("orders", 0)


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=30))
def test_passed_gaps_cover_what_was_passed_in_order_and_apart(steps: list[tuple[int, int]]) -> None:
    """Gaps come in offset order (each starts at or after the last one's end, as a state's
    next offset only grows): the record covers exactly their offsets, as ranges that are
    ordered and do not touch."""
    gaps: tuple[tuple[int, int], ...] = ()
    covered: set[int] = set()
    at = 0
    for skip, length in steps:
        first = at + skip
        last = first + length
        gaps = append_gap(gaps, first, last)
        covered |= set(range(first, last + 1))
        at = last + 1
    assert {o for first, last in gaps for o in range(first, last + 1)} == covered
    assert all(a[1] + 1 < b[0] for a, b in itertools.pairwise(gaps))


def test_the_oldest_gaps_are_forgotten() -> None:
    gaps: tuple[tuple[int, int], ...] = ()
    for i in range(GAPS_KEPT + 5):
        gaps = append_gap(gaps, 10 * i, 10 * i + 4)
    assert len(gaps) == GAPS_KEPT and gaps[-1] == (10 * (GAPS_KEPT + 4), 10 * (GAPS_KEPT + 4) + 4)


def test_gaps_round_trip_and_a_state_without_any_writes_none() -> None:
    state = PartitionState(20, "run", "2026-11-24T00:00:00Z", gaps=((10, 14),))
    body = state.to_json(TP, "job")
    assert body["gaps"] == [[10, 14]]
    assert PartitionState.from_json(body) == state
    plain = PartitionState(20, "run", "2026-11-24T00:00:00Z")
    assert "gaps" not in plain.to_json(TP, "job")
    assert PartitionState.from_json(plain.to_json(TP, "job")).gaps == ()


def test_a_state_fenced_again_differs_from_the_one_before_and_round_trips() -> None:
    """A follow session fences a partition again after a failed batch (same epoch): the
    state's content, hence its ETag, must differ from the one that batch planned from."""
    state = PartitionState(20, "run", "2026-11-24T00:00:00Z", epoch=3)
    again = PartitionState(20, "run", "2026-11-24T00:00:00Z", epoch=3, refenced=1)
    assert again.to_json(TP, "job") != state.to_json(TP, "job")
    assert PartitionState.from_json(again.to_json(TP, "job")) == again
    assert "refenced" not in state.to_json(TP, "job")

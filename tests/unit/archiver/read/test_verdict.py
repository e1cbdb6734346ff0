"""verify's pure parts: the offsets of a hole that no passed gap (allow_gaps) covers."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.commands.verify import uncovered

RANGES = st.tuples(st.integers(0, 40), st.integers(0, 10)).map(lambda r: (r[0], r[0] + r[1]))


@given(RANGES, st.lists(RANGES, max_size=5))
def test_a_hole_less_its_passed_gaps_is_exactly_the_offsets_no_gap_covers(
    hole: tuple[int, int], gaps: list[tuple[int, int]]
) -> None:
    left = uncovered(*hole, gaps)
    offsets = [o for first, last in left for o in range(first, last + 1)]
    covered = {o for first, last in gaps for o in range(first, last + 1)}
    assert offsets == [o for o in range(hole[0], hole[1] + 1) if o not in covered]
    # As ranges: in order, each non-empty, none touching the next.
    assert all(first <= last for first, last in left)
    assert all(a[1] + 1 < b[0] for a, b in itertools.pairwise(left))


def test_a_hole_a_run_passed_is_no_hole() -> None:
    assert uncovered(10, 14, [(10, 14)]) == []
    assert uncovered(10, 19, [(10, 14)]) == [(15, 19)]
    assert uncovered(10, 19, [(12, 13), (16, 30)]) == [(10, 11), (14, 15)]

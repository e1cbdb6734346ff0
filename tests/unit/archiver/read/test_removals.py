"""What verify does with offsets erase and expire removed (the commit log's record), pure:
which offsets they hold, where an object's records end when some of its offsets are removed,
and that the offline sequence check calls none of them a hole."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.read.listing import StoredObject
from kafka_archive.archiver.read.verdict import Removals, removed_notes, sequence_findings

RANGES = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 6)).map(lambda r: (r[0], r[0] + r[1])),
    max_size=6,
)


def _disjoint(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Ranges as the log keeps them: disjoint (a removed offset is never removed again)."""
    taken: set[int] = set()
    out = []
    for first, last in ranges:
        span = set(range(first, last + 1))
        if not span & taken:
            taken |= span
            out.append((first, last))
    return out


@given(RANGES, st.integers(0, 70))
def test_holds_exactly_the_removed_offsets(ranges: list[tuple[int, int]], offset: int) -> None:
    ranges = _disjoint(ranges)
    removed = {o for first, last in ranges for o in range(first, last + 1)}
    assert Removals(tuple(ranges)).holds(offset) == (offset in removed)


@given(RANGES, st.integers(0, 40), st.integers(0, 30))
def test_past_is_the_offset_after_count_offsets_not_removed(
    ranges: list[tuple[int, int]], start: int, count: int
) -> None:
    ranges = _disjoint(ranges)
    removed = {o for first, last in ranges for o in range(first, last + 1)}
    kept = [o for o in range(start, 200) if o not in removed][:count]
    end = Removals(tuple(ranges)).past(start, count)
    assert end == (kept[-1] + 1 if kept else start)


def test_an_object_with_erased_offsets_inside_is_no_hole_offline() -> None:
    route = kcql.parse("INSERT INTO bkt:p SELECT * FROM t STOREAS `JSON`").routes[0]
    tp = TopicPartition("t", 0)
    # 0..9 with 3, 4 erased (8 records), then 10..14 with 10 and 14 erased (3 records), 15..
    objects = [
        StoredObject(0, "p/t/0/000000000000.g1.json", tp, (), 1),
        StoredObject(11, "p/t/0/000000000011.g1.json", tp, (), 1),
        StoredObject(15, "p/t/0/000000000015.json", tp, (), 1),
    ]
    counts = {o.key: n for o, n in zip(objects, [8, 3, 5], strict=True)}
    removed = ((3, 4), (10, 10), (14, 14))
    problems, notes = sequence_findings(route, objects, counts, removed, removed)
    assert problems == [] and notes == []
    # Without knowing them, the same objects show a hole.
    _, notes = sequence_findings(route, objects, counts, ())
    assert notes


def test_removed_offsets_are_named_by_their_reason() -> None:
    (erased, expired) = removed_notes(((9, 9, "erased"), (3, 4, "erased"), (0, 2, "expired")))
    assert erased.startswith("offsets 3..4, 9: erased by kafka-archive erase")
    assert expired.startswith("offsets 0..2: expired by kafka-archive expire")
    assert "not a hole" in erased

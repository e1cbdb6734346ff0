"""verify's judgement, pure: the offsets of a hole that no passed gap (allow_gaps) covers, what
objects' keys and records tell offline, and the comparison of Kafka's records with them."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.read.decoding import StoredRecord
from kafka_archive.archiver.read.listing import StoredObject
from kafka_archive.archiver.read.verdict import (
    Comparison,
    Discrepancy,
    Events,
    allowed_gap_notes,
    object_problems,
    placement_problems,
    sequence_findings,
    uncovered,
)
from kafka_archive.kcql.plan import Route

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


# -- offline -------------------------------------------------------------------------------

TP = TopicPartition("orders", 0)


def single() -> Route:
    return kcql.parse("INSERT INTO bkt:p SELECT * FROM orders STOREAS JSON").routes[0]


def grouped() -> Route:
    return kcql.parse(
        "INSERT INTO bkt:p SELECT * FROM orders PARTITIONBY country STOREAS JSON"
    ).routes[0]


def obj(start: int, route: Route | None = None, group: tuple[str | None, ...] = ()) -> StoredObject:
    key = layout_for(route or single()).key(TP, start, group)
    return StoredObject(start, key, TP, group, 10)


def test_placement_problems_name_what_the_keys_tell_against_the_state() -> None:
    route = single()
    a, b, twin, late = obj(0), obj(10), obj(10), obj(30)
    twin = StoredObject(10, twin.key + ".dup", TP, (), 10)
    gone = obj(20).key
    problems = placement_problems(route, TP, (a, b, twin, late), 30, (b.key, gone), 6)
    assert [(p.key, p.first_offset, p.last_offset) for p in problems] == [
        (twin.key, 10, None),  # the record at 10 archived twice
        (late.key, 30, None),  # at the committed offset: a crashed run's
        (None, 20, 29),  # the state's object that is gone: its offsets up to the next one's
        (None, None, None),  # 3 objects below 30, the state counts 6
    ]
    assert "archived twice" in problems[0].problem
    assert "left by a crashed run" in problems[1].problem
    assert problems[2].problem == f"the state names {gone}, which does not exist"
    assert "3 object(s) were deleted" in problems[3].problem
    assert [p.problem for p in placement_problems(route, TP, (a,), None, (), 0)] == [
        "object exists but the job has no committed state for this partition"
    ]
    assert placement_problems(route, TP, (a, b), 30, (a.key, b.key), 2) == []


def test_object_problems_are_an_empty_object_and_offsets_out_of_order() -> None:
    def records(*offsets: int | None) -> list[StoredRecord]:
        return [StoredRecord(b"v", offset=o) for o in offsets]

    o = obj(5)
    assert [p.problem for p in object_problems(o, [])] == ["empty object"]
    assert object_problems(o, records(5, 6, 7)) == []
    assert object_problems(o, records(None, None)) == []  # offsets not stored
    for bad in (records(6, 7), records(5, 7, 6), records(5, 5)):
        (problem,) = object_problems(o, bad)
        assert (problem.key, problem.first_offset) == (o.key, 5)
        assert "not strictly increasing" in problem.problem


def test_sequence_findings_are_overlaps_and_holes_not_known() -> None:
    objects = (obj(0), obj(10), obj(15), obj(40))
    counts = {objects[0].key: 10, objects[1].key: 8, objects[2].key: 5}
    problems, notes = sequence_findings(single(), objects, counts, [(25, 29)])
    assert [(p.key, p.first_offset, p.last_offset) for p in problems] == [(objects[2].key, 15, 17)]
    assert "overlaps" in problems[0].problem
    # 20..39 is between objects: 25..29 is known (compared, or a gap a run passed).
    assert [n.split(" are in no object")[0] for n in notes] == ["offsets 20..24", "offsets 30..39"]
    # Objects of several groups interleave: no sequence to tell.
    route = grouped()
    g = (obj(0, route, ("DE",)), obj(50, route, ("FR",)))
    assert sequence_findings(route, g, {g[0].key: 10}, ()) == ([], [])


def test_allowed_gaps_are_named() -> None:
    (note,) = allowed_gap_notes([(3, 9)])
    assert note.startswith("offsets 3..9: an allowed gap")


# -- against Kafka ---------------------------------------------------------------------------

GROUPS = ((), ("DE",), ("FR",))


def archive(groups: list[int]) -> tuple[list[StoredObject], dict[str, list[StoredRecord]]]:
    """Objects as the writer cuts them: a record at offset i of group GROUPS[groups[i]] goes
    to its group's open object, and an object holds at most 3 records."""
    route = grouped()
    objects: list[StoredObject] = []
    records: dict[str, list[StoredRecord]] = {}
    open_: dict[tuple[str | None, ...], StoredObject] = {}
    for offset, g in enumerate(groups):
        group = GROUPS[g]
        current = open_.get(group)
        if current is None or len(records[current.key]) == 3:
            current = open_[group] = obj(offset, route, group)
            objects.append(current)
            records[current.key] = []
        records[current.key].append(StoredRecord(f"v{offset}", offset=offset))
    return sorted(objects), records


def compare(
    objects: list[StoredObject],
    records: dict[str, list[StoredRecord]],
    kafka: list[tuple[int, int, str]],
    *,
    compacted: bool = False,
) -> tuple[list[Discrepancy], list[str], list[str]]:
    """Kafka's records (offset, group index, value) through a Comparison; its problems,
    notes and the keys it loaded, in order."""
    loaded: list[str] = []

    def load(o: StoredObject) -> list[StoredRecord] | None:
        loaded.append(o.key)
        return records[o.key]

    problems: list[Discrepancy] = []
    events = Events()
    first = objects[0].start_offset if objects else 0
    comparison = Comparison(objects, first, compacted, load, problems, events)
    for offset, g, value in kafka:
        comparison.add(offset, GROUPS[g], value)
    last = kafka[-1][0] + 1 if kafka else first
    notes = comparison.close(last, {k: len(records[k]) for k in loaded})
    return problems + events.close(), notes, loaded


@given(st.lists(st.integers(1, 2), min_size=1, max_size=40))
def test_an_archive_that_holds_kafkas_records_is_clean(groups: list[int]) -> None:
    objects, records = archive(groups)
    kafka = [(o, g, f"v{o}") for o, g in enumerate(groups)]
    problems, notes, loaded = compare(objects, records, kafka)
    assert problems == [] and notes == []
    assert sorted(loaded) == sorted(o.key for o in objects)  # each read once


@given(st.lists(st.integers(1, 2), min_size=2, max_size=40), st.data())
def test_a_record_changed_in_the_archive_is_reported_at_its_offset(
    groups: list[int], data: st.DataObject
) -> None:
    objects, records = archive(groups)
    changed = data.draw(st.integers(0, len(groups) - 1))
    kafka = [(o, g, f"v{o}" if o != changed else "other") for o, g in enumerate(groups)]
    problems, _, _ = compare(objects, records, kafka)
    assert [(p.first_offset, p.last_offset, p.problem) for p in problems] == [
        (changed, changed, "archived record differs from Kafka")
    ]


def test_missing_extra_and_misplaced_records_are_discrepancies() -> None:
    objects, records = archive([1, 1, 1, 1, 1])  # objects at 0 (0..2) and 3 (3, 4)
    first, second = objects
    # Kafka has a record more than the second object holds, and one the archive has not.
    kafka = [(o, 1, f"v{o}") for o in range(6)] + [(6, 2, "v6")]
    problems, _, _ = compare(objects, records, kafka)
    assert [(p.key, p.first_offset, p.problem) for p in problems] == [
        (second.key, 5, "record missing from its object"),
        (None, 6, "record is in no object"),
    ]
    # Kafka lacks the archive's last record (a duplicate?), and starts the first object late.
    kafka = [(o, 1, f"v{o}") for o in (1, 2, 3)]
    records[first.key] = records[first.key][1:]
    problems, _, _ = compare(objects, records, kafka)
    assert [(p.key, p.problem.split(",")[0]) for p in problems] == [
        (first.key, "the key says the first record is at offset 0"),
        (second.key, "holds 1 record(s) more than Kafka has for its range (duplicates?)"),
    ]


def test_on_a_compacted_topic_the_archive_may_hold_more_than_kafka_still_has() -> None:
    objects, records = archive([1] * 9)
    kept = [0, 4, 5, 8]  # the log cleaner removed the rest since they were archived
    problems, notes, _ = compare(objects, records, [(o, 1, f"v{o}") for o in kept], compacted=True)
    assert problems == []
    assert notes == [
        "5 archived record(s) are no longer in Kafka: the topic is compacted, and its log "
        "cleaner removed them after they were archived"
    ]
    # Without stored offsets, the next equal value is found.
    bare = {k: [StoredRecord(r.value) for r in rs] for k, rs in records.items()}
    problems, notes, _ = compare(objects, bare, [(o, 1, f"v{o}") for o in kept], compacted=True)
    assert problems == [] and notes[0].startswith("5 archived record(s)")


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 60),
    st.integers(0, 60),
    st.lists(st.tuples(st.integers(0, 80), st.integers(0, 10)), max_size=6),
)
def test_the_offsets_left_of_a_span_are_those_no_removal_holds(
    first: int, length: int, removals: list[tuple[int, int]]
) -> None:
    last = first + length
    removed: list[tuple[int, int]] = []
    for a, n in sorted(removals):  # disjoint, sorted, as a partition's removed ranges
        if not removed or a > removed[-1][1]:
            removed.append((a, a + n))
    left = uncovered(first, last, removed)  # what an expired object dropped whole removes
    gone = {o for a, b in removed for o in range(a, b + 1)}
    assert [o for a, b in left for o in range(a, b + 1)] == [
        o for o in range(first, last + 1) if o not in gone
    ]
    assert all(b + 1 < c for (_, b), (c, _) in itertools.pairwise(left))  # maximal ranges

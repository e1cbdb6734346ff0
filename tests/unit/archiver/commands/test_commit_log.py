"""commit_protocol=log, the driver's pure part: a partition's units (or pieces) turned into
one log commit (archiver.commands.commit_log._partition), and what is refused up front."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.commands import commit_log
from kafka_archive.archiver.commands.commit_log import _partition
from kafka_archive.archiver.config.settings import KafkaSettings, Settings
from kafka_archive.archiver.core.errors import ConfigError, FencedError
from kafka_archive.archiver.core.failure import TaskFailure, kind_of
from kafka_archive.archiver.core.model import (
    Gap,
    ObjectWritten,
    TopicPartition,
    UnitResult,
    WorkUnit,
)
from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    Entry,
    EntryKind,
    ObjectRef,
    PartitionCommit,
    WriterId,
)
from kafka_archive.archiver.protocol.naming import partition_ref
from kafka_archive.archiver.write.task import UnitFailure

ROUTE = kcql.parse("INSERT INTO bkt:p SELECT * FROM t").routes[0]
TP = TopicPartition("t", 0)
ME = WriterId("run", 1)


def claimed(end: int) -> core.LogState:
    """A log where ME holds TP, committed up to ``end`` (by one object, when above 0)."""
    ref = partition_ref(TP)
    state = core.fold(core.LogState(), Entry(1, EntryKind.CLAIM, ME, claims=(ref,)))
    if end:
        obj = core.ObjectRef("k0", 0, end - 1, end, 1, "e")
        commit = core.PartitionCommit(ref, 0, end, (obj,))
        state = core.fold(state, Entry(2, EntryKind.COMMIT, ME, commits=(commit,)))
    return state


def piece(start: int, stop: int) -> WorkUnit:
    return WorkUnit(0, ROUTE, TP, start, stop, "run", "job", "group", log_batch=1, epoch=1)


def result(start: int, next_offset: int, objects: list[tuple[int, int]]) -> UnitResult:
    written = tuple(
        ObjectWritten(f"k{first}", first, last, last - first + 1, 10, etag=f"e{first}")
        for first, last in objects
    )
    return UnitResult(0, TP, start, next_offset, len(written), 10, written, 0.0)


@st.composite
def pieces(draw: st.DrawFn) -> tuple[int, list[tuple[WorkUnit, UnitResult | UnitFailure]]]:
    """A partition committed up to ``end``, then pieces from there, each with objects whose
    records sit anywhere in the piece (offsets without records between and after them)."""
    end = draw(st.integers(0, 50))
    group: list[tuple[WorkUnit, UnitResult | UnitFailure]] = []
    at = end
    for _ in range(draw(st.integers(1, 4))):
        stop = at + draw(st.integers(1, 40))
        offsets = sorted(draw(st.sets(st.integers(at, stop - 1), max_size=8)))
        cuts = sorted(draw(st.sets(st.sampled_from(offsets), max_size=3))) if offsets else []
        objects, first = [], None
        for o in offsets:
            if first is None:
                first = o
            if o in cuts or o == offsets[-1]:
                objects.append((first, o))
                first = None
        outcome: UnitResult | UnitFailure = result(at, stop, objects)
        if draw(st.integers(0, 5)) == 0:
            failure = TaskFailure(kind_of(FencedError), "fenced", None, TP, None)
            outcome = UnitFailure(0, TP, failure)
        group.append((piece(at, stop), outcome))
        at = stop
    return end, group


@settings(deadline=None, max_examples=300)
@given(pieces())
def test_a_partitions_pieces_commit_their_contiguous_prefix_as_a_range_the_log_folds(
    drawn: tuple[int, list[tuple[WorkUnit, UnitResult | UnitFailure]]],
) -> None:
    end, group = drawn
    state = claimed(end)
    merged, commit = _partition(group, state)
    prefix = []
    for _, outcome in group:
        if isinstance(outcome, UnitFailure):
            break
        prefix.append(outcome)
    written = [o for r in prefix for o in r.objects]
    if not written:
        assert commit is None
        return
    assert commit is not None
    assert core.range_problem(end, commit) is None
    assert core.commit_verdict(state, ME, [commit]) is core.Verdict.OK
    core.fold(state, core.commit_entry(state, ME, [commit]))
    assert [o.key for o in commit.objects] == [w.key for w in written]
    for ref, w in zip(commit.objects, written, strict=True):
        assert ref.first <= w.first_offset and w.last_offset <= ref.last  # records inside
        assert ref.checksum == w.etag
    assert commit.end == prefix[-1].next_offset
    done = merged.committed if isinstance(merged, UnitFailure) else merged
    assert done is not None and done.next_offset == commit.end


def settings_with(**kwargs: object) -> Settings:
    return dataclasses.replace(Settings(kafka=KafkaSettings("b:9092")), **kwargs)  # type: ignore[arg-type]


ICEBERG = (
    "INSERT INTO bkt:tables/orders SELECT * FROM t STOREAS PARQUET "
    "PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.orders')"
)


def test_an_iceberg_route_is_not_refused_by_the_object_maintenance() -> None:
    """compact, erase and expire hand an Iceberg route to the table maintenance
    (commands.table_maintenance: a rewrite of data files through pyiceberg); the object
    path's refusals (PARTITIONBY erase, gzip block indexes) never name it."""
    from kafka_archive.archiver.commands.compact import refusal
    from kafka_archive.archiver.plan import maintenance

    route = kcql.parse(ICEBERG).routes[0]
    assert route.iceberg is not None
    for request in (None, maintenance.Erase(frozenset({b"k"})), maintenance.Expire(0)):
        assert refusal(route, request) is None


def test_a_partition_moves_past_a_passed_gap_or_begins_at_its_start_else_is_refused() -> None:
    ref = partition_ref(TP)
    e = core.claim_entry(core.LogState(), "run", [ref])
    state = core.fold(core.LogState(), e)
    assert commit_log._move(state, TP, 0, None) is None
    assert commit_log._move(state, TP, 7, None) == commit_log.Move(7, (), True)  # --start
    gap = Gap(0, TP, 0, 6, passed=True)
    assert commit_log._move(state, TP, 7, gap) == commit_log.Move(0, ((0, 6),))  # added
    state = core.fold(
        state,
        core.commit_entry(
            state, e.writer, [PartitionCommit(ref, 0, 3, (ObjectRef("k", 0, 2, 3, 1, "c"),))]
        ),
    )
    assert commit_log._move(state, TP, 9, Gap(0, TP, 3, 8, passed=True)) == commit_log.Move(
        3, ((3, 8),)
    )
    with pytest.raises(ConfigError, match="would start at offset 9"):
        commit_log._move(state, TP, 9, None)  # past the end, no gap passed: not recordable


def test_a_partitions_objects_after_a_passed_gap_are_committed_with_it() -> None:
    ref = partition_ref(TP)
    e = core.claim_entry(core.LogState(), "run", [ref])
    state = core.fold(core.LogState(), e)
    move = commit_log.Move(0, ((0, 4),))
    _, commit = commit_log._partition([(piece(5, 9), result(5, 9, [(5, 8)]))], state, move)
    assert commit is not None and (commit.start, commit.end, commit.gaps) == (0, 9, ((0, 4),))
    assert [(o.first, o.last) for o in commit.objects] == [(5, 8)]
    assert core.fold(state, core.commit_entry(state, e.writer, [commit])).end(ref) == 9
    # A start with nothing written: the partition begins there, no object.
    _, begun = commit_log._partition(
        [(piece(7, 7), result(7, 7, []))], state, commit_log.Move(7, (), True)
    )
    assert begun is not None and (begun.start, begun.end, begun.objects) == (7, 7, ())
    assert core.fold(state, core.commit_entry(state, e.writer, [begun])).end(ref) == 7


def test_each_objects_block_index_is_named_beside_it_as_a_side_object() -> None:
    state = claimed(0)
    done = result(0, 6, [(0, 2), (3, 5)])
    indexed = (
        dataclasses.replace(done.objects[0], index=("k0.index.json", "i0")),
        done.objects[1],
    )
    done = dataclasses.replace(done, objects=indexed)
    _, commit = _partition([(piece(0, 6), done)], state)
    assert commit is not None
    assert [(o.key, o.first, o.last, o.checksum) for o in commit.sides] == [
        ("k0.index.json", 0, 2, "i0")
    ]
    assert core.fold(state, core.commit_entry(state, ME, [commit])).named().keys() >= {
        "k0",
        "k0.index.json",
    }


def test_a_units_dead_letters_are_named_as_a_side_object_of_its_partition() -> None:
    state = claimed(0)
    letters = ObjectWritten("_dead-letter/t/0/000000000001.e1a1.json", 1, 4, 2, 80, etag="L")
    done = dataclasses.replace(result(0, 6, [(0, 5)]), dead_letters=2, dead_letter_key=letters.key)
    done = dataclasses.replace(done, dead_letter_object=letters)
    merged, commit = _partition([(piece(0, 6), done)], state)
    assert commit is not None
    assert [(o.key, o.first, o.last, o.records, o.checksum) for o in commit.sides] == [
        (letters.key, 1, 4, 2, "L")
    ]
    assert isinstance(merged, UnitResult) and merged.dead_letters == 2
    assert merged.dead_letter_key == letters.key

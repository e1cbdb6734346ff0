"""Commits whose objects interleave within their range (PARTITIONBY, time layouts: several
objects of a partition open at once), marked ``tiled=False``; tiled commits keep the
stronger in-order check."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    FORMAT_VERSION,
    Entry,
    EntryKind,
    LogFormatError,
    ObjectRef,
    PartitionCommit,
    PartitionRef,
    WriterId,
    decode_entry,
    encode_entry,
)

P0 = PartitionRef("r", "t", 0)


def ob(group: str, offsets: list[int]) -> ObjectRef:
    return ObjectRef(
        f"t/{group}/0/{offsets[0]:020d}", offsets[0], offsets[-1], len(offsets), 1, "c"
    )


def interleaved(start: int, end: int, *objects: ObjectRef) -> PartitionCommit:
    return PartitionCommit(P0, start, end, objects, tiled=False)


def test_interleaved_objects_commit_their_range() -> None:
    # A holds 0, 2, 5 and B 1, 3, 4: their [first, last] overlap.
    c = interleaved(0, 6, ob("a", [0, 2, 5]), ob("b", [1, 3, 4]))
    assert core.range_problem(0, c) is None
    state, writer = _claimed()
    entry = Entry(state.seq + 1, EntryKind.COMMIT, writer, commits=(c,))
    after = core.fold(state, entry)
    assert after.end(P0) == 6
    assert {o.key for o in after.partitions[P0].objects} == {o.key for o in c.objects}


def test_offsets_kafka_never_had_may_lie_in_no_object() -> None:
    # 3 records over [0, 8): a transaction's markers and compacted offsets in between.
    c = interleaved(0, 8, ob("a", [0, 6]), ob("b", [2]))
    assert core.range_problem(0, c) is None


@pytest.mark.parametrize(
    ("commit", "problem"),
    [
        (interleaved(0, 6, ob("a", [0, 2, 6]), ob("b", [1])), "beyond"),
        (interleaved(2, 6, ob("a", [1, 3]), ob("b", [2])), "before"),
        (interleaved(0, 3, ob("a", [0, 1, 2]), ob("a", [0, 1, 2])), "twice"),
        (
            interleaved(0, 3, ob("a", [0, 1, 2]), ob("b", [0, 1])),
            "5 records in a range of 3",
        ),
        (interleaved(1, 3, ob("a", [1, 2])), "committed end is 0"),
        (interleaved(0, 3), "empty"),
        (
            interleaved(0, 3, ObjectRef("k", 2, 1, 0, 1, "c")),
            "holds [2, 1]",
        ),
        (
            interleaved(0, 9, ObjectRef("k", 0, 2, 4, 1, "c")),
            "4 records in [0, 2]",
        ),
    ],
)
def test_an_interleaved_commit_is_refused_when_it_cannot_be_right(
    commit: PartitionCommit, problem: str
) -> None:
    start = commit.start if "committed end" not in problem else 0
    assert problem in (core.range_problem(start, commit) or ""), core.range_problem(start, commit)


def test_a_tiled_commit_keeps_the_in_order_check() -> None:
    objs = (ob("a", [0, 2, 5]), ob("b", [1, 3, 4]))
    assert core.range_problem(0, PartitionCommit(P0, 0, 6, objs)) is not None
    assert core.range_problem(0, PartitionCommit(P0, 0, 6, objs, tiled=False)) is None


@settings(max_examples=100)
@given(
    st.integers(0, 50),
    st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=1, max_size=40),
)
def test_any_split_of_a_range_into_groups_commits_and_round_trips(
    start: int, offsets: list[tuple[int, bool]]
) -> None:
    """Offsets start.., each in group 0-2 or none (never had by Kafka): one object per
    group holding its offsets commits [start, start + n) and encodes as it decodes."""
    groups: dict[int, list[int]] = {}
    for i, (group, had) in enumerate(offsets):
        if had:
            groups.setdefault(group, []).append(start + i)
    objs = tuple(ob(str(g), offs) for g, offs in sorted(groups.items()))
    c = interleaved(start, start + len(offsets), *objs)
    if not objs:
        assert core.range_problem(start, c) is not None
        return
    assert core.range_problem(start, c) is None
    entry = Entry(3, EntryKind.COMMIT, WriterId("w", 1), commits=(c,))
    assert decode_entry(encode_entry(entry)) == entry


def test_a_tiled_commit_encodes_as_before() -> None:
    c = PartitionCommit(P0, 0, 1, (ob("a", [0]),))
    entry = Entry(3, EntryKind.COMMIT, WriterId("w", 1), commits=(c,))
    assert b"tiled" not in encode_entry(entry)
    assert decode_entry(encode_entry(entry)).commits[0].tiled


def _claimed() -> tuple[core.LogState, WriterId]:
    e = core.claim_entry(core.LogState(), "w", [P0])
    return core.fold(core.LogState(), e), e.writer


def test_an_interleaved_commit_is_refused_by_older_readers_with_upgrade_it() -> None:
    """Readers up to format version 2 know no ``tiled`` and would fold it as tiled: an entry
    with an untiled commit is version 3, which they refuse with "upgrade it"."""
    untiled = Entry(
        3, EntryKind.COMMIT, WriterId("w", 1), commits=(interleaved(0, 2, ob("a", [0])),)
    )
    assert json.loads(encode_entry(untiled))["version"] == 3
    doc = json.loads(encode_entry(untiled))
    doc["version"] = FORMAT_VERSION + 1  # a reader of version 2 meets version 3 alike
    with pytest.raises(LogFormatError, match="upgrade"):
        decode_entry(json.dumps(doc).encode())
    tiled = Entry(
        3, EntryKind.COMMIT, WriterId("w", 1), commits=(PartitionCommit(P0, 0, 1, (ob("a", [0]),)),)
    )
    assert json.loads(encode_entry(tiled))["version"] == 1

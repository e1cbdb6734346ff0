"""Ends that move without objects (issue 37): a partition's first commit may begin past
offset 0 (``--start latest|<time>|<offset>``: offsets below it are before the start), and a
commit may pass gaps (``--allow-gaps``: offsets gone from Kafka, recorded as gap ranges). Every
offset below the committed end is then in exactly one committed object or in exactly one
recorded gap or below the start."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    ObjectRef,
    PartitionCommit,
    PartitionRef,
    WriterId,
    decode_checkpoint,
    decode_entry,
    encode_checkpoint,
    encode_entry,
)

P0 = PartitionRef("t", "t", 0)


def obj(first: int, last: int) -> ObjectRef:
    return ObjectRef(f"t/0/{first:020d}.json", first, last, last - first + 1, 10, "c")


def claimed() -> tuple[core.LogState, WriterId]:
    e = core.claim_entry(core.LogState(), "r", [P0])
    return core.fold(core.LogState(), e), e.writer


def commit(state: core.LogState, me: WriterId, c: PartitionCommit) -> core.LogState:
    assert core.commit_verdict(state, me, [c]) is core.Verdict.OK
    return core.fold(state, core.commit_entry(state, me, [c]))


def test_a_first_commit_begins_past_zero_and_the_next_follows_its_end() -> None:
    state, me = claimed()
    state = commit(state, me, PartitionCommit(P0, 100, 103, (obj(100, 102),), begins=True))
    assert state.end(P0) == 103 and state.partitions[P0].begin == 100
    state = commit(state, me, PartitionCommit(P0, 103, 105, (obj(103, 104),)))
    assert state.end(P0) == 105 and state.partitions[P0].begin == 100


def test_a_start_without_records_moves_the_end_with_no_object() -> None:
    """``--start latest`` on a partition with nothing new: it begins at the latest offset,
    and the next run resumes there (not at a later latest)."""
    state, me = claimed()
    state = commit(state, me, PartitionCommit(P0, 50, 50, (), begins=True))
    assert state.end(P0) == 50 and state.partitions[P0].objects == ()
    assert core.committed_any(state)


def test_only_a_partitions_first_commit_begins() -> None:
    state, me = claimed()
    state = commit(state, me, PartitionCommit(P0, 0, 3, (obj(0, 2),)))
    late = PartitionCommit(P0, 10, 12, (obj(10, 11),), begins=True)
    assert core.commit_verdict(state, me, [late]) is core.Verdict.STALE
    with pytest.raises(core.InvalidEntry):
        core.fold(state, core.commit_entry(state, me, [late]))
    # Without `begins`, a range past the end is refused as before.
    skip = PartitionCommit(P0, 10, 12, (obj(10, 11),))
    assert core.commit_verdict(state, me, [skip]) is core.Verdict.STALE


def test_a_commit_passes_a_gap_recorded_with_the_partitions_gaps() -> None:
    state, me = claimed()
    state = commit(state, me, PartitionCommit(P0, 0, 3, (obj(0, 2),)))
    state = commit(state, me, PartitionCommit(P0, 3, 12, (obj(8, 11),), gaps=((3, 7),)))
    assert state.end(P0) == 12 and state.partitions[P0].gaps == ((3, 7),)
    state = commit(state, me, PartitionCommit(P0, 12, 20, (), gaps=((12, 19),)))
    assert state.end(P0) == 20 and state.partitions[P0].gaps == ((3, 7), (12, 19))


@pytest.mark.parametrize(
    "bad",
    [
        PartitionCommit(P0, 0, 12, (obj(0, 11),), gaps=((3, 7),)),  # a gap over an object
        PartitionCommit(P0, 0, 12, (obj(0, 2), obj(8, 11)), gaps=((3, 8),)),  # overlapping
        PartitionCommit(P0, 0, 12, (obj(0, 2), obj(8, 11)), gaps=((4, 7),)),  # 3 in neither
        PartitionCommit(P0, 0, 12, (obj(0, 2),), gaps=((3, 12),)),  # a gap past the end
        PartitionCommit(P0, 0, 12, (obj(0, 2),), gaps=((7, 11), (3, 6))),  # out of order
        PartitionCommit(P0, 0, 5, (), gaps=((0, 1), (1, 4))),  # gaps overlapping
        PartitionCommit(P0, 0, 0, ()),  # moves nothing
    ],
)
def test_offsets_in_no_object_and_no_gap_or_in_both_are_refused(bad: PartitionCommit) -> None:
    state, me = claimed()
    assert core.range_problem(0, bad) is not None
    with pytest.raises(core.InvalidEntry):
        core.fold(state, core.commit_entry(state, me, [bad]))


def test_an_interleaved_commit_passes_a_gap_that_no_object_spans() -> None:
    state, me = claimed()
    a = ObjectRef("t/0/a/00000000000000000000.json", 0, 9, 2, 5, "a")
    b = ObjectRef("t/0/b/00000000000000000001.json", 1, 2, 2, 5, "b")
    ok = PartitionCommit(P0, 0, 20, (b, ObjectRef(a.key, 12, 19, 2, 5, "a")), False, ((3, 11),))
    state = commit(state, me, ok)
    assert state.partitions[P0].gaps == ((3, 11),)
    over = PartitionCommit(P0, 0, 20, (a, b), False, ((3, 11),))
    assert core.range_problem(0, over) is not None


def test_moving_ends_take_a_newer_format_version_plain_commits_keep_theirs() -> None:
    """An older reader would check a commit with gaps or a start as tiled from its end (and
    call the log broken): such entries and checkpoints say "upgrade it" to it instead."""
    state, me = claimed()
    plain = core.commit_entry(state, me, [PartitionCommit(P0, 0, 3, (obj(0, 2),))])
    assert json.loads(encode_entry(plain))["version"] == 1
    begun = core.commit_entry(state, me, [PartitionCommit(P0, 5, 8, (obj(5, 7),), begins=True)])
    gapped = core.commit_entry(state, me, [PartitionCommit(P0, 0, 8, (obj(5, 7),), gaps=((0, 4),))])
    for e in (begun, gapped):
        doc = json.loads(encode_entry(e))
        assert doc["version"] == 4
        assert decode_entry(encode_entry(e)) == e
    state = core.fold(state, begun)
    cp = json.loads(encode_checkpoint(state.checkpoint()))
    assert cp["version"] == 4 and cp["partitions"][0]["begin"] == 5
    assert decode_checkpoint(encode_checkpoint(state.checkpoint())) == state.checkpoint()


@given(
    st.lists(
        st.tuples(st.sampled_from(["object", "gap"]), st.integers(1, 5)), min_size=1, max_size=8
    ),
    st.integers(0, 20),
)
def test_any_tiling_of_objects_and_gaps_from_the_end_is_accepted_and_kept(
    tiles: list[tuple[str, int]], begin: int
) -> None:
    """Every offset of [start, end) in exactly one object or exactly one gap: accepted, and
    the state's objects and gaps then cover [begin, end) exactly once."""
    objs, gaps, at = [], [], begin
    for kind, n in tiles:
        if kind == "object":
            objs.append(obj(at, at + n - 1))
        elif gaps and gaps[-1][1] == at - 1:
            gaps[-1] = (gaps[-1][0], at + n - 1)  # adjacent gaps are one gap
        else:
            gaps.append((at, at + n - 1))
        at += n
    state, me = claimed()
    state = commit(
        state, me, PartitionCommit(P0, begin, at, tuple(objs), gaps=tuple(gaps), begins=True)
    )
    st_ = state.partitions[P0]
    covered = sorted(
        [i for o in st_.objects for i in range(o.first, o.last + 1)]
        + [i for g in st_.gaps for i in range(g[0], g[1] + 1)]
    )
    assert covered == list(range(st_.begin, st_.end))

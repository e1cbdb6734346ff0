"""Side objects (issue 37): objects a commit names that hold no offsets of its range but
belong to it, a gzip object's block index and a partition's dead letters. Named like the
objects (vacuum keeps them, a 412 on one means the plan is stale), never in the coverage."""

import json

import pytest

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
DATA = ObjectRef("a/t/0/00000000000000000000.e1a1.json.gz", 0, 9, 10, 100, "d")
INDEX = ObjectRef("a/t/0/00000000000000000000.e1a1.json.gz.index", 0, 9, 0, 20, "i")
LETTERS = ObjectRef("a/_dead-letter/t/0/000000000003.e1a1.json", 3, 4, 2, 50, "l")


def claimed() -> tuple[core.LogState, WriterId]:
    e = core.claim_entry(core.LogState(), "r", [P0])
    return core.fold(core.LogState(), e), e.writer


def test_a_commit_names_its_side_objects_and_vacuum_keeps_them() -> None:
    state, me = claimed()
    c = PartitionCommit(P0, 0, 10, (DATA,), sides=(INDEX, LETTERS))
    assert core.commit_verdict(state, me, [c]) is core.Verdict.OK
    entry = core.commit_entry(state, me, [c])
    assert decode_entry(encode_entry(entry)) == entry
    assert json.loads(encode_entry(entry))["version"] == 4  # an older writer's vacuum: upgrade
    state = core.fold(state, entry)
    assert state.partitions[P0].objects == (DATA,) and state.partitions[P0].sides == (
        INDEX,
        LETTERS,
    )
    assert set(state.named()) == {DATA.key, INDEX.key, LETTERS.key}
    fenced = WriterId("old", 0)
    listed = [core.Listed(o.key, "e", 0.0, fenced, P0) for o in (DATA, INDEX, LETTERS)]
    assert core.vacuum_candidates(state, me, listed, now=1e9, grace=1) == []
    cp = state.checkpoint()
    assert decode_checkpoint(encode_checkpoint(cp)) == cp
    assert json.loads(encode_checkpoint(cp))["version"] == 4


def test_a_commit_without_sides_encodes_as_before() -> None:
    state, me = claimed()
    entry = core.commit_entry(state, me, [PartitionCommit(P0, 0, 10, (DATA,))])
    assert b"sides" not in encode_entry(entry) and json.loads(encode_entry(entry))["version"] == 1


@pytest.mark.parametrize(
    "sides",
    [
        (INDEX, INDEX),  # named twice
        (ObjectRef(DATA.key, 0, 9, 0, 1, "x"),),  # the key of an object of the commit
        (ObjectRef("k", 5, 12, 0, 1, "x"),),  # about offsets outside the range
    ],
)
def test_a_side_object_named_twice_or_outside_its_range_is_refused(
    sides: tuple[ObjectRef, ...],
) -> None:
    state, me = claimed()
    c = PartitionCommit(P0, 0, 10, (DATA,), sides=sides)
    assert core.range_problem(0, c) is not None
    with pytest.raises(core.InvalidEntry):
        core.fold(state, core.commit_entry(state, me, [c]))


def test_a_side_object_with_the_key_of_one_committed_before_is_refused() -> None:
    state, me = claimed()
    state = core.fold(
        state, core.commit_entry(state, me, [PartitionCommit(P0, 0, 10, (DATA,), sides=(INDEX,))])
    )
    nxt = ObjectRef("a/t/0/00000000000000000010.json.gz", 10, 11, 2, 5, "n")
    again = PartitionCommit(P0, 10, 12, (nxt,), sides=(ObjectRef(INDEX.key, 10, 11, 0, 1, "x"),))
    with pytest.raises(core.InvalidEntry, match="named"):
        core.fold(state, core.commit_entry(state, me, [again]))

"""The import entry: an archive of the state protocol's committed ends, objects and passed
gaps, set on partitions the log has not committed yet, by the holder of their claim."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    Entry,
    EntryKind,
    ObjectRef,
    PartitionCommit,
    PartitionImport,
    PartitionRef,
    WriterId,
    decode_checkpoint,
    decode_entry,
    encode_checkpoint,
    encode_entry,
)

from .strategies import imports

P0 = PartitionRef("t", "t", 0)
P1 = PartitionRef("t", "t", 1)


def obj(first: int, last: int, partition: int = 0) -> ObjectRef:
    return ObjectRef(f"t/{partition}/{first:020d}.json", first, last, 0, 10, "etag:x")


def imported(
    ref: PartitionRef,
    end: int,
    *objs: ObjectRef,
    gaps: tuple[tuple[int, int], ...] | list[tuple[int, int]] = (),
) -> PartitionImport:
    return PartitionImport(ref, end, objs, tuple(gaps))


def claimed(run: str = "m", state: core.LogState | None = None) -> tuple[core.LogState, WriterId]:
    state = state or core.LogState()
    e = core.claim_entry(state, run, [P0, P1])
    return core.fold(state, e), e.writer


def test_an_import_sets_each_partitions_end_objects_and_gaps_and_commits_follow_it() -> None:
    state, me = claimed()
    entry = core.import_entry(
        state, me, [imported(P0, 10, obj(0, 4), obj(7, 9), gaps=[(5, 6)]), imported(P1, 0)]
    )
    state = core.fold(state, entry)
    assert state.end(P0) == 10 and state.end(P1) == 0
    assert state.partitions[P0].objects == (obj(0, 4), obj(7, 9))
    assert state.partitions[P0].gaps == ((5, 6),)
    assert state.holder(P0) == me
    nxt = ObjectRef("t/0/00000000000000000010.json", 10, 11, 2, 5, "c")
    state = core.fold(state, core.commit_entry(state, me, [PartitionCommit(P0, 10, 12, (nxt,))]))
    assert state.end(P0) == 12 and state.partitions[P0].gaps == ((5, 6),)
    assert state.named().keys() == {obj(0, 4).key, obj(7, 9).key, nxt.key}
    # and a later claim keeps them
    state, _ = claimed("next", state)
    assert state.partitions[P0].gaps == ((5, 6),) and state.end(P0) == 12


def test_an_import_is_refused_from_a_writer_not_holding_the_claim() -> None:
    state, me = claimed("a")
    state, _newer = claimed("b", state)
    with pytest.raises(core.InvalidEntry, match="does not hold it"):
        core.fold(state, core.import_entry(state, me, [imported(P0, 3, obj(0, 2))]))


def test_an_import_is_refused_on_a_partition_already_committed() -> None:
    state, me = claimed()
    state = core.fold(state, core.import_entry(state, me, [imported(P0, 3, obj(0, 2))]))
    with pytest.raises(core.InvalidEntry, match="log end is 3"):
        core.fold(state, core.import_entry(state, me, [imported(P0, 5, obj(3, 4))]))


@pytest.mark.parametrize(
    ("parts", "problem"),
    [
        ([], "an import without partitions"),
        ([imported(P0, 3, obj(0, 2)), imported(P0, 3, obj(0, 2))], "twice"),
        ([imported(P0, 3, obj(0, 3))], "at or beyond the end 3"),
        ([imported(P0, 3, obj(2, 1))], "holds [2, 1]"),
        ([imported(P0, -1)], "end -1"),
        ([imported(P0, 9, obj(0, 2), obj(0, 2))], "named twice"),
        ([imported(P0, 9, obj(0, 2), gaps=[(3, 9)])], "gap [3, 9]"),
    ],
)
def test_a_malformed_import_is_refused(parts: list[PartitionImport], problem: str) -> None:
    state, me = claimed()
    with pytest.raises(core.InvalidEntry, match=problem.replace("[", r"\[")):
        core.fold(state, Entry(state.seq + 1, EntryKind.IMPORT, me, imports=tuple(parts)))


def test_an_import_with_claims_or_commits_is_refused() -> None:
    state, me = claimed()
    with pytest.raises(core.InvalidEntry, match="import with claims, commits or rewrites"):
        core.fold(
            state,
            Entry(state.seq + 1, EntryKind.IMPORT, me, claims=(P0,), imports=(imported(P0, 0),)),
        )


def test_a_commit_or_claim_carrying_imports_is_refused() -> None:
    state, _me = claimed()
    with pytest.raises(core.InvalidEntry):
        core.fold(
            state,
            Entry(
                state.seq + 1,
                EntryKind.CLAIM,
                WriterId("z", 9),
                claims=(P0,),
                imports=(imported(P0, 0),),
            ),
        )


@settings(max_examples=50)
@given(imports)
def test_an_import_entry_round_trips(parts: tuple[PartitionImport, ...]) -> None:
    entry = Entry(3, EntryKind.IMPORT, WriterId("m", 2), imports=parts)
    assert decode_entry(encode_entry(entry)) == entry


def test_a_checkpoint_keeps_the_imported_gaps() -> None:
    state, me = claimed()
    state = core.fold(
        state, core.import_entry(state, me, [imported(P0, 10, obj(0, 4), gaps=[(5, 9)])])
    )
    cp = state.checkpoint()
    assert decode_checkpoint(encode_checkpoint(cp)) == cp
    assert core.LogState.from_checkpoint(decode_checkpoint(encode_checkpoint(cp))) == state


def test_entries_and_checkpoints_without_gaps_or_imports_encode_as_before() -> None:
    state, _me = claimed()
    assert b"imports" not in encode_entry(core.claim_entry(state, "x", [P0]))
    assert b"gaps" not in encode_checkpoint(state.checkpoint())


@given(st.integers(0, 5))
def test_committed_any_tells_a_log_with_a_committed_partition(end: int) -> None:
    state, me = claimed()
    assert not core.committed_any(state)
    state = core.fold(state, core.import_entry(state, me, [imported(P0, end)]))
    assert core.committed_any(state) == (end > 0)

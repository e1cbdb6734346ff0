import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    Entry,
    EntryKind,
    ObjectRef,
    PartitionCommit,
    PartitionRef,
    WriterId,
    decode_checkpoint,
    encode_checkpoint,
)

from .strategies import valid_logs

P0 = PartitionRef("r", "t", 0)
P1 = PartitionRef("r", "t", 1)


def obj(first: int, last: int) -> ObjectRef:
    return ObjectRef(f"t/0/{first:020d}", first, last, last - first + 1, 1, "c")


def rng(ref: PartitionRef, start: int, *cuts: int) -> PartitionCommit:
    objs, at = [], start
    for last in cuts:
        objs.append(ObjectRef(f"t/{ref.partition}/{at:020d}", at, last, last - at + 1, 1, "c"))
        at = last + 1
    return PartitionCommit(ref, start, at, tuple(objs))


def claimed(*runs: str) -> tuple[core.LogState, list[WriterId]]:
    state, ws = core.LogState(), []
    for run in runs:
        e = core.claim_entry(state, run, [P0, P1])
        state = core.fold(state, e)
        ws.append(e.writer)
    return state, ws


@settings(max_examples=60)
@given(valid_logs(), st.data())
def test_a_checkpoint_plus_the_tail_folds_as_the_whole_log(
    log: list[Entry], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, len(log)))
    whole = core.fold_all(core.LogState(), log)
    cp = decode_checkpoint(
        encode_checkpoint(core.fold_all(core.LogState(), log[:cut]).checkpoint())
    )
    assert core.fold_all(core.LogState.from_checkpoint(cp), log[cut:]) == whole


def test_claims_take_growing_epochs_and_fence_lower_ones() -> None:
    state, (a, b) = claimed("a", "b")
    assert (a.epoch, b.epoch) == (1, 2)
    assert core.is_fenced(state, a, [P0])
    assert not core.is_fenced(state, b, [P0, P1])
    with pytest.raises(core.InvalidEntry, match="claim of epoch 2 after epoch 2"):
        core.fold(state, Entry(3, EntryKind.CLAIM, WriterId("c", 2), claims=(P0,)))


def test_only_the_holder_commits_and_only_from_the_committed_end() -> None:
    state, (a, b) = claimed("a", "b")
    with pytest.raises(core.InvalidEntry, match="does not hold it"):
        core.fold(state, core.commit_entry(state, a, [rng(P0, 0, 3)]))
    assert core.commit_verdict(state, a, [rng(P0, 0, 3)]) is core.Verdict.FENCED
    assert core.commit_verdict(state, b, [rng(P0, 0, 3)]) is core.Verdict.OK
    state = core.fold(state, core.commit_entry(state, b, [rng(P0, 0, 1, 3)]))
    assert state.end(P0) == 4 and state.end(P1) == 0
    assert core.commit_verdict(state, b, [rng(P0, 0, 3)]) is core.Verdict.STALE
    with pytest.raises(core.InvalidEntry, match="starts at 0, committed end is 4"):
        core.fold(state, core.commit_entry(state, b, [rng(P0, 0, 3)]))


@pytest.mark.parametrize(
    ("commit", "problem"),
    [
        (PartitionCommit(P0, 0, 4, (obj(0, 1), obj(3, 3))), "expected to start at 2"),
        (PartitionCommit(P0, 0, 4, (obj(0, 1),)), "objects end at 2, range at 4"),
        (PartitionCommit(P0, 0, 0, ()), "empty range"),
        (PartitionCommit(P0, 0, 2, (obj(0, 1), obj(1, 1))), "expected to start at 2"),
    ],
)
def test_a_range_must_be_covered_by_its_objects_in_order(
    commit: PartitionCommit, problem: str
) -> None:
    assert problem in (core.range_problem(0, commit) or "")


def test_create_outcome_after_a_lost_response() -> None:
    state, (a,) = claimed("a")
    ours = core.commit_entry(state, a, [rng(P0, 0, 1)])
    theirs = core.claim_entry(state, "b", [P0])
    assert core.create_outcome(ours, ours) is core.Outcome.LANDED
    assert core.create_outcome(theirs, ours) is core.Outcome.TAKEN
    assert core.create_outcome(None, ours) is core.Outcome.UNKNOWN


def test_a_found_object_is_deleted_only_when_its_writer_is_fenced_never_adopted() -> None:
    state, (a, b) = claimed("a", "b")
    state = core.fold(state, core.commit_entry(state, b, [rng(P0, 0, 1)]))
    key = "t/0/00000000000000000000"
    named = core.FoundObject(key, '"1"', a, 1)
    assert core.found_object(state, b, 7, {4}, P0, named) is core.Found.NAMED
    other = "t/0/00000000000000000002"
    assert (
        core.found_object(state, b, 7, {4}, P0, core.FoundObject(other, "e", a, 1))
        is core.Found.DELETE
    )
    # a writer above us: we are the one fenced; read the log
    c = WriterId("c", 3)
    assert (
        core.found_object(state, b, 7, {4}, P0, core.FoundObject(other, "e", c, 1))
        is core.Found.CHECK
    )
    # our own attempt declared dead is deleted; another, live or not declared, is not
    assert (
        core.found_object(state, b, 7, {4}, P0, core.FoundObject(other, "e", b, 4))
        is core.Found.DELETE
    )
    for live in (3, 9):  # a lower number is no proof of death (a speculative copy)
        found = core.FoundObject(other, "e", b, live)
        assert core.found_object(state, b, 7, {4}, P0, found) is core.Found.CHECK
    # our attempt's own create, landed although its response was lost: ours, with that ETag
    assert (
        core.found_object(state, b, 7, {4}, P0, core.FoundObject(other, "e", b, 7))
        is core.Found.OURS
    )
    # the same attempt number of another writer (run or epoch) is not ours
    for w in (WriterId("b", 1), WriterId("z", 2)):
        found = core.FoundObject(other, "e", w, 7)
        assert core.found_object(state, b, 7, {4}, P0, found) is not core.Found.OURS
    # no writer metadata: not ours to judge
    assert (
        core.found_object(state, b, 7, {4}, P0, core.FoundObject(other, "e", None, 0))
        is core.Found.CHECK
    )


def test_vacuum_takes_unnamed_objects_of_fenced_writers_past_the_grace() -> None:
    state, (a, b) = claimed("a", "b")
    state = core.fold(state, core.commit_entry(state, b, [rng(P0, 0, 1)]))
    c = WriterId("c", 3)

    def listed(key: str, w: WriterId, at: float) -> core.Listed:
        return core.Listed(key, "e", at, w, P0)

    objs = [
        listed("t/0/00000000000000000000", b, 0.0),  # named
        listed("old-a", a, 0.0),  # fenced, old: deleted
        listed("young-a", a, 50.0),  # fenced, within the grace
        listed("mine", b, 0.0),  # this run's, unnamed: its attempts are over
        listed("c", c, 0.0),  # a writer the state does not fence
    ]
    got = core.vacuum_candidates(state, b, objs, now=100.0, grace=60.0)
    assert [o.key for o in got] == ["old-a", "mine"]


# -- Iceberg routes under the commit log ----------------------------------------------------


@given(st.none() | st.integers(0, 50), st.integers(1, 50))
def test_an_iceberg_commit_is_refused_only_when_the_table_carries_a_higher_epoch(
    table_epoch: int | None, mine: int
) -> None:
    """The claim's epoch is the table's fence token: a table whose last commit of ours
    (or none: a new table, or states-mode commits without an epoch) carries an epoch at or
    below the writer's takes its commit; one a newer claimant committed to refuses it."""
    allowed = core.iceberg_commit_allowed(table_epoch, mine)
    assert allowed == (table_epoch is None or table_epoch <= mine)


def test_a_newer_claimant_fences_the_table_against_every_older_writer() -> None:
    """Claims in sequence: once the table carries claimant n's epoch, every writer that
    claimed before n is refused and n itself (and later claimants) may commit."""
    _, writers = claimed("a" * 16, "b" * 16, "c" * 16)
    for n, newest in enumerate(writers):
        for w in writers[:n]:
            assert not core.iceberg_commit_allowed(newest.epoch, w.epoch)
        for w in writers[n:]:
            assert core.iceberg_commit_allowed(newest.epoch, w.epoch)

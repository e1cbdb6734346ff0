"""The rewrite entry (compact, erase, expire: issue 38): its fold, verdict, codec and what it
does to vacuum, on hand-made logs."""

import json
from dataclasses import replace

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
    PartitionRewrite,
    Removed,
    WriterId,
    decode_checkpoint,
    decode_entry,
    encode_checkpoint,
    encode_entry,
)
from kafka_archive.archiver.protocol.maintenance import generation, generation_key

from .strategies import valid_logs

P0 = PartitionRef("r", "t", 0)
P1 = PartitionRef("r", "t", 1)


def obj(first: int, last: int, gen: int = 0, records: int | None = None, c: str = "c") -> ObjectRef:
    key = f"t/0/{first:020d}" + (f".g{gen}" if gen else "") + ".json"
    n = last - first + 1 if records is None else records
    return ObjectRef(key, first, last, n, 10, c)


def archived() -> tuple[core.LogState, WriterId]:
    """run "m" holds P0 and P1; P0 committed [0, 6) in three objects of two offsets."""
    state = core.fold(core.LogState(), core.claim_entry(core.LogState(), "m", [P0, P1]))
    m = WriterId("m", 1)
    commit = PartitionCommit(P0, 0, 6, (obj(0, 1), obj(2, 3), obj(4, 5)))
    return core.fold(state, core.commit_entry(state, m, [commit])), m


def erased(first: int, last: int) -> Removed:
    return Removed(first, last, "erased", 1.7e9)


def test_a_compaction_replaces_consecutive_objects_and_keeps_the_end() -> None:
    state, m = archived()
    before = state.partitions[P0].objects
    rw = PartitionRewrite(P0, before[:2], (obj(0, 3, gen=1),))
    assert core.rewrite_verdict(state, m, [rw]) is core.Verdict.OK
    after = core.fold(state, core.rewrite_entry(state, m, [rw]))
    st = after.partitions[P0]
    assert st.objects == (obj(0, 3, gen=1), before[2])
    assert (st.end, st.holder, st.removed, st.rewritten) == (6, m, (), after.seq)
    # readers' view: never an object and its replacement
    assert set(after.named()) == {obj(0, 3, gen=1).key, before[2].key}


def test_an_erase_records_the_offsets_by_reason_and_the_objects_hold_the_rest() -> None:
    state, m = archived()
    objs = state.partitions[P0].objects
    # erase offsets 1, 2 and 5: one object [0, 3] holds 0 and 3; 4 stays, alone
    rw = PartitionRewrite(
        P0, objs, (obj(0, 3, 1, records=2), obj(4, 4, 1)), (erased(1, 2), erased(5, 5))
    )
    after = core.fold(state, core.rewrite_entry(state, m, [rw]))
    assert after.partitions[P0].removed == (erased(1, 2), erased(5, 5))
    # a later compaction over the hole: the removed offsets stay removed, counted out
    state2 = after
    rw2 = PartitionRewrite(P0, after.partitions[P0].objects, (obj(0, 4, 2, records=3),))
    after2 = core.fold(state2, core.rewrite_entry(state2, m, [rw2]))
    assert after2.partitions[P0].objects == (obj(0, 4, 2, records=3),)
    assert after2.partitions[P0].removed == (erased(1, 2), erased(5, 5))
    # a claim and a commit after it keep the removals (and the end moves only by commits)
    claim = core.claim_entry(after2, "n", [P0])
    after3 = core.fold(after2, claim)
    commit = PartitionCommit(P0, 6, 7, (obj(6, 6),))
    after4 = core.fold(after3, core.commit_entry(after3, claim.writer, [commit]))
    assert after4.partitions[P0].removed == (erased(1, 2), erased(5, 5))
    assert after4.partitions[P0].rewritten == after2.seq
    assert after4.end(P0) == 7


def test_an_expiry_of_every_object_leaves_none_and_the_end_where_it_was() -> None:
    state, m = archived()
    objs = state.partitions[P0].objects
    rw = PartitionRewrite(P0, objs, (), (Removed(0, 5, "expired", 1.7e9),))
    after = core.fold(state, core.rewrite_entry(state, m, [rw]))
    assert after.partitions[P0].objects == ()
    assert after.end(P0) == 6
    # the next commit starts at the end, as ever
    assert core.range_problem(after.end(P0), PartitionCommit(P0, 6, 7, (obj(6, 6),))) is None


@pytest.mark.parametrize(
    ("objects", "removed", "problem"),
    [
        ((obj(0, 2, 1),), (), "in no new object and not removed"),  # offset 3 lost
        ((obj(0, 3, 1, records=3),), (), "counts 3 records"),
        ((obj(0, 3, 1),), (erased(3, 3),), "ends at a removed offset"),  # both held and removed
        ((obj(0, 1, 1), obj(1, 3, 1)), (), "outside"),  # two objects hold offset 1
        ((obj(0, 3, 1),), (erased(4, 4),), "outside"),  # removes an offset it does not replace
        ((obj(0, 3, 1, records=3),), (Removed(1, 1, "forgotten", 0),), "unknown reason"),
        ((replace(obj(0, 3), key=obj(4, 5).key),), (), "key of a committed object"),
    ],
)
def test_the_fold_refuses_a_rewrite_that_loses_doubles_or_reuses(
    objects: tuple[ObjectRef, ...], removed: tuple[Removed, ...], problem: str
) -> None:
    state, m = archived()
    rw = PartitionRewrite(P0, state.partitions[P0].objects[:2], objects, removed)
    with pytest.raises(core.InvalidEntry, match=problem):
        core.fold(state, core.rewrite_entry(state, m, [rw]))
    assert core.rewrite_verdict(state, m, [rw]) is core.Verdict.STALE


def test_a_removed_offset_is_never_removed_again_nor_held_again() -> None:
    state, m = archived()
    objs = state.partitions[P0].objects
    rw = PartitionRewrite(P0, objs[:1], (obj(0, 0, 1),), (erased(1, 1),))
    after = core.fold(state, core.rewrite_entry(state, m, [rw]))
    again = PartitionRewrite(P0, after.partitions[P0].objects[:2], (obj(3, 3, 2),), (erased(0, 2),))
    with pytest.raises(core.InvalidEntry, match="removed before"):
        core.fold(after, core.rewrite_entry(after, m, [again]))
    back = PartitionRewrite(P0, after.partitions[P0].objects[:2], (obj(0, 3, 2),))
    with pytest.raises(core.InvalidEntry, match="counts 4 records"):
        core.fold(after, core.rewrite_entry(after, m, [back]))


def test_a_rewrite_planned_on_a_stale_view_is_refused() -> None:
    state, m = archived()
    objs = state.partitions[P0].objects
    first = PartitionRewrite(P0, objs[:2], (obj(0, 3, 1),))
    after = core.fold(state, core.rewrite_entry(state, m, [first]))
    # the same plan again (planned before the first landed), and one naming other bytes
    for stale in (
        PartitionRewrite(P0, objs[1:3], (obj(2, 5, 1),)),
        PartitionRewrite(P0, (replace(objs[2], checksum="other"),), (obj(4, 5, 1),)),
    ):
        assert core.rewrite_verdict(after, m, [stale]) is core.Verdict.STALE
        with pytest.raises(core.InvalidEntry, match="stale view"):
            core.fold(after, core.rewrite_entry(after, m, [stale]))


def test_only_the_holder_rewrites() -> None:
    state, m = archived()
    rw = PartitionRewrite(P0, state.partitions[P0].objects[:2], (obj(0, 3, 1),))
    claim = core.claim_entry(state, "run", [P0])  # a run of the job takes the partition
    later = core.fold(state, claim)
    assert core.rewrite_verdict(later, m, [rw]) is core.Verdict.FENCED
    with pytest.raises(core.InvalidEntry, match="does not hold it"):
        core.fold(later, core.rewrite_entry(later, m, [rw]))
    # and a rewrite entry is rewrites only
    bad = Entry(state.seq + 1, EntryKind.REWRITE, m, commits=(PartitionCommit(P1, 0, 1, ()),))
    with pytest.raises(core.InvalidEntry, match="a rewrite with"):
        core.fold(state, bad)


def test_the_codec_round_trips_rewrites_and_keeps_plain_logs_at_version_1() -> None:
    state, m = archived()
    objs = state.partitions[P0].objects
    new = (obj(0, 3, 1, records=2), obj(4, 4, 1))
    rw = PartitionRewrite(P0, objs, new, (erased(1, 2), erased(5, 5)))
    entry = core.rewrite_entry(state, m, [rw])
    data = encode_entry(entry)
    assert decode_entry(data) == entry
    assert json.loads(data)["version"] == 2
    assert json.loads(encode_entry(core.claim_entry(state, "x", [P0])))["version"] == 1
    after = core.fold(state, entry)
    cp = after.checkpoint()
    assert decode_checkpoint(encode_checkpoint(cp)) == cp
    assert json.loads(encode_checkpoint(cp))["version"] == 2
    assert json.loads(encode_checkpoint(state.checkpoint()))["version"] == 1


def test_vacuum_leaves_replaced_objects_for_the_grace_after_the_rewrite() -> None:
    state, m = archived()
    objs = state.partitions[P0].objects
    rw = PartitionRewrite(P0, objs[:2], (obj(0, 3, 1),))
    entry = core.rewrite_entry(state, m, [rw])
    after = core.fold(state, entry)
    a = WriterId("a", 0)  # the (fenced) writer that made the replaced objects, long ago
    listed = [core.Listed(o.key, "e", 0.0, a, P0) for o in objs[:2]]
    # the objects are old, but the rewrite entry is 10 s old: kept
    assert core.vacuum_candidates(after, m, listed, 100.0, 60.0, {entry.seq: 90.0}) == []
    # an entry the listing does not show (a stale listing) is taken as young
    assert core.vacuum_candidates(after, m, listed, 100.0, 60.0, {}) == []
    # past the grace after the entry: deleted
    assert core.vacuum_candidates(after, m, listed, 200.0, 60.0, {entry.seq: 90.0}) == listed


@st.composite
def rewritten_logs(draw: st.DrawFn) -> tuple[core.LogState, list[Entry]]:
    """A valid log, then rewrites by the holders: runs of consecutive objects, some offsets
    dropped (erased or expired), the rest cut into objects of 1–4 records."""
    state = core.fold_all(core.LogState(), draw(valid_logs()))
    entries = []
    for _ in range(draw(st.integers(0, 6))):
        live = sorted(r for r, p in state.partitions.items() if p.objects and p.holder)
        if not live:
            break
        ref = draw(st.sampled_from(live))
        p = state.partitions[ref]
        i = draw(st.integers(0, len(p.objects) - 1))
        replaced = p.objects[i : i + draw(st.integers(1, 3))]
        gone = {x for r in p.removed for x in range(r.first, r.last + 1)}
        span = range(replaced[0].first, replaced[-1].last + 1)
        held = [x for x in span if x not in gone]
        drop = [x for x in held if draw(st.booleans())]
        reason = draw(st.sampled_from(("erased", "expired")))
        removed = tuple(Removed(x, x, reason, 0.0) for x in drop)
        kept = [x for x in held if x not in drop]
        gen = 1 + max(generation(o.key) for o in replaced)
        size = draw(st.integers(1, 4))
        objs = []
        for j in range(0, len(kept), size):
            c = kept[j : j + size]
            key = generation_key(f"{ref.partition}/{c[0]:020d}", gen)
            n = c[-1] - c[0] + 1 - sum(1 for x in range(c[0], c[-1] + 1) if x in gone or x in drop)
            objs.append(ObjectRef(key, c[0], c[-1], n, 1, "c"))
        assert p.holder is not None
        rw = PartitionRewrite(ref, replaced, tuple(objs), removed)
        assert core.rewrite_verdict(state, p.holder, [rw]) is core.Verdict.OK
        entry = core.rewrite_entry(state, p.holder, [rw])
        entries.append(entry)
        state = core.fold(state, entry)
    return state, entries


@settings(max_examples=100, deadline=None)
@given(rewritten_logs())
def test_every_offset_below_the_end_is_held_once_or_removed_after_any_rewrites(
    log: tuple[core.LogState, list[Entry]],
) -> None:
    state, entries = log
    for ref, p in state.partitions.items():
        gone = [x for r in p.removed for x in range(r.first, r.last + 1)]
        assert len(gone) == len(set(gone))
        held = [x for o in p.objects for x in range(o.first, o.last + 1) if x not in set(gone)]
        assert sorted(held + gone) == list(range(p.end)), ref  # exactly once, never both
        assert sum(o.records for o in p.objects) == len(held)
        assert len({o.key for o in p.objects}) == len(p.objects)
    for e in entries:
        assert decode_entry(encode_entry(e)) == e
    cp = state.checkpoint()
    assert decode_checkpoint(encode_checkpoint(cp)) == cp


def test_one_entry_rewrites_two_separate_runs_of_one_partition_and_older_readers_upgrade() -> None:
    """erase changes objects 0..1 and 4..5 of P0 but not 2..3 between them: one entry holds
    both rewrites, folded in order; it is format version 4, which older readers (they refuse
    a partition rewritten twice as a broken log) refuse with "upgrade it"."""
    state, m = archived()
    a, b, c = state.partitions[P0].objects
    first = PartitionRewrite(P0, (a,), (obj(1, 1, gen=1, records=1),), (erased(0, 0),))
    second = PartitionRewrite(P0, (c,), (), (erased(4, 5),))
    assert core.rewrite_verdict(state, m, [first, second]) is core.Verdict.OK
    entry = core.rewrite_entry(state, m, [first, second])
    after = core.fold(state, entry)
    st = after.partitions[P0]
    assert st.objects == (obj(1, 1, gen=1, records=1), b)
    assert st.removed == (erased(0, 0), erased(4, 5)) and st.end == 6
    data = encode_entry(entry)
    assert json.loads(data)["version"] == 5 and decode_entry(data) == entry
    doc = json.loads(data)
    doc["version"] = FORMAT_VERSION + 1
    with pytest.raises(LogFormatError, match="upgrade"):
        decode_entry(json.dumps(doc).encode())
    # Overlapping rewrites of one partition in one entry stay refused.
    again = PartitionRewrite(P0, (a,), (obj(1, 1, gen=2, records=1),), (erased(0, 0),))
    assert core.rewrite_verdict(state, m, [first, again]) is core.Verdict.STALE
    with pytest.raises(core.InvalidEntry):
        core.fold(state, core.rewrite_entry(state, m, [first, again]))

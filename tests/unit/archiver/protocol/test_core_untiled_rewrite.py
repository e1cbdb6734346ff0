"""The untiled rewrite (issue 38: compact of PARTITIONBY and time layouts): a partition's
objects of several groups interleave, so one group's objects are replaced by new objects of
that group (``PartitionRewrite.tiled`` false). The fold checks the replaced exactly as named,
each new object inside [min first, max last] of the replaced, new keys, and the records
counted (new = replaced - removed); the object list keeps first-offset order. Format
version 6: older readers say "upgrade it"."""

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    FORMAT_VERSION,
    LogFormatError,
    ObjectRef,
    PartitionCommit,
    PartitionRef,
    PartitionRewrite,
    Removed,
    WriterId,
    decode_entry,
    encode_entry,
)

P0 = PartitionRef("r", "t", 0)


def ob(group: str, offsets: list[int], gen: int = 0, c: str = "c") -> ObjectRef:
    key = f"t/{group}/0/{offsets[0]:020d}" + (f".g{gen}" if gen else "") + ".json"
    return ObjectRef(key, offsets[0], offsets[-1], len(offsets), 10, c)


A0, B1, A6, B7 = ob("a", [0, 2, 5]), ob("b", [1, 3, 4]), ob("a", [6, 8]), ob("b", [7, 9])


def archived() -> tuple[core.LogState, WriterId]:
    """Run "m" committed [0, 6) and [6, 10) of P0, each as one object per group: a holds
    0, 2, 5, 6, 8 and b 1, 3, 4, 7, 9."""
    state = core.fold(core.LogState(), core.claim_entry(core.LogState(), "m", [P0]))
    m = WriterId("m", 1)
    for c in (
        PartitionCommit(P0, 0, 6, (A0, B1), tiled=False),
        PartitionCommit(P0, 6, 10, (A6, B7), tiled=False),
    ):
        state = core.fold(state, core.commit_entry(state, m, [c]))
    return state, m


def merged_a() -> PartitionRewrite:
    return PartitionRewrite(P0, (A0, A6), (ob("a", [0, 2, 5, 6, 8], gen=1),), tiled=False)


def test_one_groups_objects_are_replaced_and_the_list_keeps_first_offset_order() -> None:
    state, m = archived()
    rw = merged_a()
    # As a tiled rewrite it cannot hold: A0 and A6 are not consecutive in the partition, and
    # their span [0, 8] holds b's records too.
    assert core.rewrite_problem(state.partitions[P0], replace(rw, tiled=True)) is not None
    assert core.rewrite_problem(state.partitions[P0], rw, state.named()) is None
    assert core.rewrite_verdict(state, m, [rw]) is core.Verdict.OK
    after = core.fold(state, core.rewrite_entry(state, m, [rw]))
    st_ = after.partitions[P0]
    assert [o.key for o in st_.objects] == [rw.objects[0].key, B1.key, B7.key]
    assert st_.end == 10 and st_.rewritten == after.seq and st_.removed == ()


def test_a_second_compaction_of_the_other_group_folds_on_the_first() -> None:
    state, m = archived()
    state = core.fold(state, core.rewrite_entry(state, m, [merged_a()]))
    rw = PartitionRewrite(P0, (B1, B7), (ob("b", [1, 3, 4, 7, 9], gen=1),), tiled=False)
    after = core.fold(state, core.rewrite_entry(state, m, [rw]))
    assert [o.first for o in after.partitions[P0].objects] == [0, 1]


@pytest.mark.parametrize(
    ("rw", "problem"),
    [
        # replaced not as named (a stale view: another checksum)
        (PartitionRewrite(P0, (replace(A0, checksum="x"),), (A0,), tiled=False), "stale"),
        (PartitionRewrite(P0, (A0, A0), (ob("a", [0, 2, 5], 1),), tiled=False), "twice"),
        (PartitionRewrite(P0, (), (), tiled=False), "replaces nothing"),
        # a new object outside [min first, max last] of the replaced
        (
            PartitionRewrite(P0, (A0, A6), (ob("a", [0, 2, 5, 6, 8, 10], 1),), tiled=False),
            "outside [0, 8]",
        ),
        # a record dropped without a removal: new records != replaced - removed
        (PartitionRewrite(P0, (A0, A6), (ob("a", [0, 2, 5, 8], 1),), tiled=False), "counts"),
        # a record of another group's object added (b's 1): counts too many
        (PartitionRewrite(P0, (A0,), (ob("a", [0, 1, 2, 5], 1),), tiled=False), "counts"),
        # the key of a committed object
        (
            PartitionRewrite(P0, (A0, A6), (replace(B1, first=0, last=8, records=5),), tiled=False),
            "key",
        ),
        # more records than offsets in its span
        (
            PartitionRewrite(
                P0, (A0, A6), (ObjectRef("t/a/0/x.g1", 0, 2, 5, 1, "c"),), tiled=False
            ),
            "records in [0, 2]",
        ),
        (
            PartitionRewrite(
                P0, (A0,), (ob("a", [0, 2], 1),), (Removed(5, 5, "why", 1.0),), tiled=False
            ),
            "unknown reason",
        ),
        (
            PartitionRewrite(
                P0, (A0,), (ob("a", [0, 2], 1),), (Removed(5, 6, "erased", 1.0),), tiled=False
            ),
            "outside",
        ),
    ],
)
def test_an_untiled_rewrite_is_refused_when_it_cannot_be_right(
    rw: PartitionRewrite, problem: str
) -> None:
    state, m = archived()
    found = core.rewrite_problem(state.partitions[P0], rw, state.named())
    assert found is not None and problem in found, found
    with pytest.raises(core.InvalidEntry):
        core.fold(state, core.rewrite_entry(state, m, [rw]))


def test_removed_records_are_counted_out() -> None:
    state, m = archived()
    rw = PartitionRewrite(
        P0, (A0, A6), (ob("a", [0, 2, 6, 8], 1),), (Removed(5, 5, "erased", 1.0),), tiled=False
    )
    after = core.fold(state, core.rewrite_entry(state, m, [rw]))
    assert after.partitions[P0].removed == (Removed(5, 5, "erased", 1.0),)


def test_the_codec_writes_version_6_which_older_readers_refuse_with_upgrade_it() -> None:
    state, m = archived()
    entry = core.rewrite_entry(state, m, [merged_a()])
    data = encode_entry(entry)
    doc = json.loads(data)
    assert FORMAT_VERSION == 6 and doc["version"] == 6
    assert doc["rewrites"][0]["tiled"] is False
    assert decode_entry(data) == entry
    doc["version"] = FORMAT_VERSION + 1  # a reader of version 5 meets version 6 alike
    with pytest.raises(LogFormatError, match="upgrade"):
        decode_entry(json.dumps(doc).encode())
    tiled = replace(entry, rewrites=(replace(merged_a(), tiled=True),))
    assert b"tiled" not in encode_entry(tiled)
    assert json.loads(encode_entry(tiled))["version"] == 2


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.booleans()), min_size=2, max_size=40),
    st.integers(1, 3),
    st.data(),
)
def test_any_run_of_one_groups_objects_compacts_and_every_offset_stays_held_once(
    offsets: list[tuple[int, bool]], size: int, data: st.DataObject
) -> None:
    """Offsets 0.. each of group 0-2 or never had; committed in chunks of ``size`` offsets,
    one object per group a chunk; any run of consecutive objects of one group merged into
    one: the fold accepts it, and every offset is then in exactly one object, of its group."""
    group_of = {x: g for x, (g, had) in enumerate(offsets) if had}
    state = core.fold(core.LogState(), core.claim_entry(core.LogState(), "m", [P0]))
    m = WriterId("m", 1)
    held: dict[str, list[int]] = {}
    for start in range(0, len(offsets), size):
        end = min(start + size, len(offsets))
        by: dict[int, list[int]] = {}
        for x in range(start, end):
            if x in group_of:
                by.setdefault(group_of[x], []).append(x)
        objs = tuple(ob(str(g), xs) for g, xs in sorted(by.items()))
        held.update({o.key: xs for o, (_, xs) in zip(objs, sorted(by.items()), strict=True)})
        if objs:
            c = PartitionCommit(P0, state.end(P0), end, objs, tiled=False)
            state = core.fold(state, core.commit_entry(state, m, [c]))
    objects = state.partitions[P0].objects if P0 in state.partitions else ()
    if not objects:
        return
    g = data.draw(st.sampled_from(sorted({o.key.split("/")[1] for o in objects})))
    mine = [o for o in objects if o.key.split("/")[1] == g]
    i = data.draw(st.integers(0, len(mine) - 1))
    run = mine[i : i + data.draw(st.integers(1, len(mine) - i))]
    xs = [x for o in run for x in held[o.key]]
    new = ob(g, xs, gen=1)
    rw = PartitionRewrite(P0, tuple(run), (new,), tiled=False)
    after = core.fold(state, core.rewrite_entry(state, m, [rw]))
    held[new.key] = xs
    seen = [x for o in after.partitions[P0].objects for x in held[o.key]]
    assert sorted(seen) == sorted(group_of)
    assert all(
        group_of[x] == int(o.key.split("/")[1])
        for o in after.partitions[P0].objects
        for x in held[o.key]
    )
    firsts = [o.first for o in after.partitions[P0].objects]
    assert firsts == sorted(firsts)

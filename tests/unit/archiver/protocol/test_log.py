import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    FORMAT_VERSION,
    LogFormatError,
    Removed,
    checkpoint_key,
    checkpoint_seq,
    decode_checkpoint,
    decode_entry,
    encode_checkpoint,
    encode_entry,
    entry_key,
)

from .strategies import entries, valid_logs


def test_keys_sort_by_seq_and_tell_checkpoints_apart() -> None:
    assert entry_key("b/p", 7) == "b/p/.kafka-archive/log/00000000000000000007.json"
    assert (
        checkpoint_key("b/p/", 7) == "b/p/.kafka-archive/log/checkpoint/00000000000000000007.json"
    )
    assert entry_key("p", 10) > entry_key("p", 9)
    assert checkpoint_seq(checkpoint_key("p", 12)) == 12
    assert checkpoint_seq(entry_key("p", 12)) is None


@settings(max_examples=50)
@given(entries)
def test_entry_round_trips(entry: object) -> None:
    assert decode_entry(encode_entry(entry)) == entry  # type: ignore[arg-type]


@settings(max_examples=50)
@given(valid_logs())
def test_checkpoint_round_trips(log: list) -> None:  # type: ignore[type-arg]
    cp = core.fold_all(core.LogState(), log).checkpoint()
    assert decode_checkpoint(encode_checkpoint(cp)) == cp


def test_newer_format_is_refused_with_the_way_out() -> None:
    doc = json.loads(encode_entry(core.claim_entry(core.LogState(), "r", [])))
    doc["version"] = FORMAT_VERSION + 1
    with pytest.raises(LogFormatError, match=rf"format version {FORMAT_VERSION + 1}.*upgrade"):
        decode_entry(json.dumps(doc).encode())


@pytest.mark.parametrize("data", [b"", b"{", b"[]", b'{"version": 1}', b'{"seq": 1}', b"\xff"])
def test_damaged_documents_are_refused(data: bytes) -> None:
    with pytest.raises(LogFormatError, match="damaged"):
        decode_entry(data)
    with pytest.raises(LogFormatError, match="damaged"):
        decode_checkpoint(data)


# -- record-time bounds of objects (issue 38: expire drops objects unread) ----------------

_REF = core.PartitionRef("r", "t", 0)
_ME = core.WriterId("run", 1)


def _bounds(o: core.ObjectRef) -> tuple[int | None, int | None]:
    return (o.min_time_ms, o.max_time_ms)


def _committed(objects: tuple[core.ObjectRef, ...]) -> tuple[core.LogState, core.Entry]:
    state = core.fold(core.LogState(), core.claim_entry(core.LogState(), "run", [_REF]))
    end = objects[-1].last + 1
    entry = core.commit_entry(state, _ME, [core.PartitionCommit(_REF, 0, end, objects)])
    return state, entry


@settings(max_examples=100)
@given(st.lists(st.one_of(st.none(), st.integers(0, 2**50)), min_size=2, max_size=8))
def test_an_objects_time_bounds_survive_entries_and_checkpoints(
    times: list[int | None],
) -> None:
    """Each object a commit names keeps its records' min and max time through the entry, a
    checkpoint of the fold and a rewrite entry naming it; absent bounds stay absent."""
    objects = tuple(
        core.ObjectRef(f"k{i}", i, i, 1, 1, "c", t, None if t is None else t + i)
        for i, t in enumerate(times)
    )
    state, entry = _committed(objects)
    decoded = decode_entry(encode_entry(entry))
    assert [_bounds(o) for o in decoded.commits[0].objects] == [_bounds(o) for o in objects]
    state = core.fold(state, decoded)
    cp = decode_checkpoint(encode_checkpoint(state.checkpoint()))
    assert [_bounds(o) for o in cp.partitions[_REF].objects] == [_bounds(o) for o in objects]
    new = core.ObjectRef("k0.g1", 0, 1, 2, 2, "n", 5, 9)
    rw = core.PartitionRewrite(_REF, objects[:2], (new,))
    back = decode_entry(encode_entry(core.rewrite_entry(state, _ME, [rw])))
    assert [_bounds(o) for o in back.rewrites[0].replaced] == [_bounds(o) for o in objects[:2]]
    assert _bounds(back.rewrites[0].objects[0]) == (5, 9)


def test_bounds_are_additive_no_version_and_absent_without_them() -> None:
    """Bounds need no new format version: an entry without them encodes as before; one
    with them keeps the version it had, and a reader ignores object fields it does not
    know (so an older reader reads an entry with bounds)."""
    plain = (core.ObjectRef("k0", 0, 0, 1, 1, "c"),)
    timed = (core.ObjectRef("k0", 0, 0, 1, 1, "c", 10, 20),)
    plain_doc = json.loads(encode_entry(_committed(plain)[1]))
    timed_doc = json.loads(encode_entry(_committed(timed)[1]))
    assert "min_time_ms" not in json.dumps(plain_doc)
    assert timed_doc["version"] == plain_doc["version"] == 1
    timed_doc["commits"][0]["objects"][0]["field_of_a_later_version"] = [1]
    assert decode_entry(json.dumps(timed_doc).encode()).commits[0].objects == timed


def test_a_rewrite_naming_an_object_without_its_bounds_still_names_it() -> None:
    """A writer that does not know bounds (an older version) names the replaced objects
    without them: it names the same objects, and the fold accepts the rewrite."""
    state, entry = _committed((core.ObjectRef("k0", 0, 0, 1, 1, "c", 10, 20),))
    state = core.fold(state, entry)
    older = core.PartitionRewrite(_REF, (core.ObjectRef("k0", 0, 0, 1, 1, "c"),), ())
    older = core.PartitionRewrite(_REF, older.replaced, (), (Removed(0, 0, "expired", 1.0),))
    assert core.rewrite_verdict(state, _ME, [older]) is core.Verdict.OK
    assert core.fold(state, core.rewrite_entry(state, _ME, [older])).partitions[_REF].objects == ()

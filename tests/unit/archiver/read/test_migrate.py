"""The migration's pure part: an archive's listed objects as the log names them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import PartitionImport, PartitionRef
from kafka_archive.archiver.read.listing import StoredObject
from kafka_archive.archiver.read.migrate import object_refs

TP = TopicPartition("t", 0)


def stored(start: int, group: str | None = None) -> StoredObject:
    return StoredObject(start, f"t/{group}/0/{start:012d}.json", TP, (group,), 10 + start)


def test_each_object_ends_before_the_next_of_its_group_or_the_end() -> None:
    objs = [stored(0, "FR"), stored(1, "DE"), stored(5, "FR"), stored(9, "DE")]
    refs = object_refs(reversed(objs), 12)
    assert [(r.first, r.last, r.size) for r in refs] == [
        (0, 4, 10),
        (1, 8, 11),
        (5, 11, 15),
        (9, 11, 19),
    ]
    assert all(r.records == 0 and r.checksum == "" for r in refs)


@given(st.sets(st.integers(0, 200), max_size=20), st.integers(1, 50), st.booleans())
def test_the_import_of_any_listing_below_the_end_is_one_the_fold_accepts(
    starts: set[int], beyond: int, grouped: bool
) -> None:
    end = max(starts, default=0) + beyond
    objs = [stored(s, ("A", "B")[s % 2] if grouped else None) for s in starts]
    ref = PartitionRef("t", "t", 0)
    imported = PartitionImport(ref, end, object_refs(objs, end), ())
    assert core.import_problem(imported) is None
    state = core.fold(core.LogState(), core.claim_entry(core.LogState(), "m", [ref]))
    holder = state.holder(ref)
    assert holder is not None
    state = core.fold(state, core.import_entry(state, holder, [imported]))
    assert state.end(ref) == end and len(state.named()) == len(starts)

"""The committed view of a target with a commit log: its pure part (no request)."""

from __future__ import annotations

from kafka_archive import kcql
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import ObjectRef, PartitionImport, PartitionRef
from kafka_archive.archiver.read.committed import CommittedView
from kafka_archive.archiver.read.verdict import leftover_notes, log_holes

P0, P1 = PartitionRef("t", "t", 0), PartitionRef("t", "t", 1)


def _log() -> core.LogState:
    state = core.fold(core.LogState(), core.claim_entry(core.LogState(), "m", [P0, P1]))
    holder = state.holder(P0)
    assert holder is not None
    objs = (
        ObjectRef("a/t/c=FR/0/000000000005.json", 5, 9, 0, 30, ""),
        ObjectRef("a/t/c=DE/0/000000000000.json", 0, 9, 0, 20, ""),
    )
    imports = [PartitionImport(P0, 10, objs), PartitionImport(P1, 0, ())]
    return core.fold(state, core.import_entry(state, holder, imports))


def test_a_log_view_gives_ends_named_objects_and_states_without_a_request() -> None:
    plan = kcql.parse("INSERT INTO bkt:a SELECT * FROM t PARTITIONBY c STOREAS `JSON`")
    route = plan.routes[0]
    view = CommittedView(route.target, _log())
    assert view.from_log
    assert view.offsets(None) == {TopicPartition("t", 0): 10}  # type: ignore[arg-type]
    end, objects = view.partition_objects(None, route, TopicPartition("t", 0))  # type: ignore[arg-type]
    assert end == 10
    assert [(o.start_offset, o.key, o.size) for o in objects] == [
        (0, "a/t/c=DE/0/000000000000.json", 20),
        (5, "a/t/c=FR/0/000000000005.json", 30),
    ]
    assert view.partition_objects(None, route, TopicPartition("t", 1)) == (None, ())  # type: ignore[arg-type]
    states = view.states()
    assert set(states) == {TopicPartition("t", 0)}
    state = states[TopicPartition("t", 0)].state
    assert state is not None and (state.next_offset, state.objects, state.bytes) == (10, 2, 50)


def test_verify_names_holes_with_offsets_and_leftovers_as_no_data() -> None:
    (hole,) = log_holes([("k", 3, 7)])
    assert (hole.first_offset, hole.last_offset, hole.key) == (3, 7, None)
    assert "the commit log names k, which does not exist" in hole.problem
    (note,) = leftover_notes(["x"])
    assert note.startswith("x: an uncommitted leftover") and "vacuum" in note

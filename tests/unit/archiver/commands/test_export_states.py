"""export-states' pure parts: what partition states cannot express, a log partition as a
state, and how a log that export-states claimed is told apart."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.commands.export_states import inexpressible, state_of
from kafka_archive.archiver.protocol import core, naming
from kafka_archive.archiver.protocol.log import (
    ObjectRef,
    PartitionRef,
    PartitionState,
    Removed,
    WriterId,
)
from kafka_archive.archiver.state.checkpoint import GAPS_KEPT

REF = PartitionRef("orders", "orders", 1)
WRITER = WriterId("run-a", 3)
OBJECTS = (
    ObjectRef("arch/orders/1/000000000000.e3a1.json", 0, 9, 10, 100, "x"),
    ObjectRef("arch/orders/1/000000000010.g1.json", 10, 24, 15, 150, "y"),
)


def log_of(*parts: tuple[PartitionRef, PartitionState]) -> core.LogState:
    return core.LogState(5, 3, dict(parts))


def test_a_log_without_removals_or_too_many_gaps_is_expressible() -> None:
    st_ = PartitionState(25, WRITER, OBJECTS, gaps=((30, 31),))
    assert inexpressible(log_of((REF, st_))) is None


def test_removed_offsets_are_not_expressible_and_the_line_says_which_partition() -> None:
    removed = (Removed(3, 3, "erased", 1.0), Removed(5, 6, "expired", 2.0))
    why = inexpressible(log_of((REF, PartitionState(25, WRITER, OBJECTS, removed=removed))))
    assert why is not None and "orders-1" in why and "erased and expired" in why, why


@given(st.integers(min_value=0, max_value=2 * GAPS_KEPT))
def test_gaps_are_expressible_while_a_state_keeps_them_all(n: int) -> None:
    gaps = tuple((10 * i, 10 * i + 1) for i in range(n))  # (apart: none merges)
    why = inexpressible(log_of((REF, PartitionState(10 * n + 5, WRITER, (), gaps=gaps))))
    assert (why is None) == (n < GAPS_KEPT), (n, why)


def test_a_partition_as_a_state_keeps_its_end_totals_gaps_and_last_object() -> None:
    st_ = PartitionState(40, WRITER, OBJECTS, gaps=((25, 30), (31, 39)), committed_at=0.0)
    state = state_of(st_, "export-states-r", 1234)
    assert state.next_offset == 40 and state.run_id == "export-states-r"
    assert (state.records, state.bytes, state.objects) == (25, 250, 2)
    assert state.last_objects == (OBJECTS[-1].key,)
    assert state.gaps == ((25, 39),) and state.epoch == 1234
    assert state.committed_at == "1970-01-01T00:00:00Z"


def test_a_log_is_exported_once_the_exporter_claims_it() -> None:
    st_ = PartitionState(25, WRITER, OBJECTS)
    assert not naming.exported(log_of((REF, st_)))
    claim = core.claim_entry(log_of((REF, st_)), naming.exporter("abc"), [REF])
    assert naming.exported(core.fold(log_of((REF, st_)), claim))

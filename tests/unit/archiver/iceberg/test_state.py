"""Where an Iceberg route's state is read from, on a real pyiceberg table (a SQL catalog on
SQLite, files on the local disk): our commits among other writers' compactions, expired
snapshots and rollbacks."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.iceberg.commits import append
from kafka_archive.archiver.iceberg.offsets import (
    EPOCH,
    JOB,
    RECORDS,
    RUN_ID,
    STATE_SEQUENCE,
    STATE_SNAPSHOT,
    STATE_TIME,
    committed_at,
    offset_property,
    offsets_of,
    snapshot_properties,
    table_epoch,
    table_offsets,
    table_properties,
)

TP = TopicPartition("orders", 0)


@pytest.fixture
def table(tmp_path: Path) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("db")
    return catalog.create_table("db.t", Schema(NestedField(1, "id", LongType(), required=False)))


def ours(table: Any, offset: int, run: str = "0123456789abcdef") -> int:
    """A commit of ours moving TP to ``offset`` (no files); its snapshot id."""
    props = {offset_property(TP): str(offset), RUN_ID: run, JOB: "j"}
    append(table, [], props)
    table.refresh()
    return int(table.current_snapshot().snapshot_id)


def foreign(table: Any) -> int:
    """Another writer's commit (rows, no summary of ours), as a compaction's."""
    table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    table.refresh()
    return int(table.current_snapshot().snapshot_id)


def expire_all_but_current(table: Any) -> None:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    table.maintenance.expire_snapshots().older_than(later).commit()
    table.refresh()


def state(table: Any) -> dict[TopicPartition, int]:
    return table_offsets(table)


def test_state_through_foreign_commits_expiry_and_rollback(table: Any) -> None:
    assert state(table) == {}
    foreign(table)
    assert state(table) == {}  # a table of another tool: no state of ours
    ours(table, 10)
    foreign(table)
    foreign(table)
    assert state(table) == {TP: 10}  # from the ancestry
    expire_all_but_current(table)
    assert all(RUN_ID not in s.summary.additional_properties for s in table.snapshots())
    assert state(table) == {TP: 10}  # from the properties
    first = ours(table, 20)
    ours(table, 30)
    assert state(table) == {TP: 30}
    # Rolled back to our commit of 20: that is the table's state (the records of 20..29
    # are no longer in it), although the properties say 30.
    table.manage_snapshots().rollback_to_snapshot(first).commit()
    table.refresh()
    assert table.properties[offset_property(TP)] == "30"
    assert state(table) == {TP: 20}
    # Commits on top of it, then rolled back below our commit of 40: the ancestry's newest
    # of ours is 20 again (the properties say 40).
    foreign(table)
    base = foreign(table)
    ours(table, 40)
    table.manage_snapshots().rollback_to_snapshot(base).commit()
    table.refresh()
    assert table.properties[offset_property(TP)] == "40"
    assert state(table) == {TP: 20}


def test_an_old_versions_commit_after_ours_wins_over_the_properties(table: Any) -> None:
    """A snapshot of ours without the properties (a commit of an earlier version, which
    wrote only the summary) newer than the properties' snapshot: the ancestry's newest."""
    ours(table, 10)
    with table.transaction() as tx:
        props = {offset_property(TP): "25", RUN_ID: "fedcba9876543210"}
        with tx.update_snapshot(snapshot_properties=props).fast_append():
            pass
    table.refresh()
    assert table.properties[offset_property(TP)] == "10"
    assert state(table) == {TP: 25}


@given(
    st.dictionaries(st.tuples(st.sampled_from(["a", "b.c"]), st.integers(0, 99)), st.integers(0)),
    st.integers(0, 10**9),
)
def test_a_snapshots_properties_hold_the_offsets_and_who_committed_them(
    state: dict[tuple[str, int], int], records: int
) -> None:
    offsets = {TopicPartition(t, p): o for (t, p), o in state.items()}
    props = snapshot_properties(offsets, records, "0123456789abcdef", "job")
    assert offsets_of(props) == offsets
    assert (props[RECORDS], props[RUN_ID], props[JOB]) == (str(records), "0123456789abcdef", "job")
    made = SimpleNamespace(snapshot_id=7, sequence_number=None, timestamp_ms=1_700_000_000_000)
    stamped = table_properties(props, made)
    assert offsets_of(stamped) == offsets
    assert {k: v for k, v in stamped.items() if k not in props} == {
        STATE_SNAPSHOT: "7",
        STATE_SEQUENCE: "0",  # format 1: no sequence numbers
        STATE_TIME: "1700000000000",
    }


def test_committed_at_is_our_last_snapshots_time_else_the_current_ones(table: Any) -> None:
    assert committed_at(None) is None
    assert committed_at(table) is None  # no snapshot yet
    foreign(table)
    theirs = table.current_snapshot().timestamp_ms
    assert committed_at(table) == dt.datetime.fromtimestamp(theirs / 1000, dt.UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    ours(table, 10)
    mine = table.current_snapshot().timestamp_ms
    foreign(table)
    assert committed_at(table) == dt.datetime.fromtimestamp(mine / 1000, dt.UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def test_the_tables_epoch_is_its_last_log_mode_commits_even_after_compaction_and_expiry(
    table: Any,
) -> None:
    """commit_protocol=log: the claim's epoch each commit of ours carries (summary and table
    property); another tool's snapshots on top and the expiry of ours keep it."""
    assert table_epoch(None) is None
    assert table_epoch(table) is None  # no snapshot yet
    ours(table, 10)  # states mode: no epoch
    assert table_epoch(table) is None
    props = snapshot_properties({TP: 20}, 0, "0123456789abcdef", "j", epoch=3)
    assert props[EPOCH] == "3"
    append(table, [], props)
    table.refresh()
    assert table_epoch(table) == 3
    assert table.properties[EPOCH] == "3"
    foreign(table)
    assert table_epoch(table) == 3
    expire_all_but_current(table)
    assert table_epoch(table) == 3  # the properties keep it
    append(table, [], snapshot_properties({TP: 30}, 0, "fedcba9876543210", "j", epoch=5))
    table.refresh()
    assert table_epoch(table) == 5
    assert state(table) == {TP: 30}

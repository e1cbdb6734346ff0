"""Where an Iceberg route's state is read from, on a real pyiceberg table (a SQL catalog on
SQLite, files on the local disk): our commits among other writers' compactions, expired
snapshots and rollbacks."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from kafka_archive.archiver import iceberg
from kafka_archive.archiver.core.model import TopicPartition

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
    props = {iceberg.offset_property(TP): str(offset), iceberg.RUN_ID: run, iceberg.JOB: "j"}
    iceberg._append(table, [], props)
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
    return iceberg._table_offsets(table)


def test_state_through_foreign_commits_expiry_and_rollback(table: Any) -> None:
    assert state(table) == {}
    foreign(table)
    assert state(table) == {}  # a table of another tool: no state of ours
    ours(table, 10)
    foreign(table)
    foreign(table)
    assert state(table) == {TP: 10}  # from the ancestry
    expire_all_but_current(table)
    assert all(iceberg.RUN_ID not in s.summary.additional_properties for s in table.snapshots())
    assert state(table) == {TP: 10}  # from the properties
    first = ours(table, 20)
    ours(table, 30)
    assert state(table) == {TP: 30}
    # Rolled back to our commit of 20: that is the table's state (the records of 20..29
    # are no longer in it), although the properties say 30.
    table.manage_snapshots().rollback_to_snapshot(first).commit()
    table.refresh()
    assert table.properties[iceberg.offset_property(TP)] == "30"
    assert state(table) == {TP: 20}
    # Commits on top of it, then rolled back below our commit of 40: the ancestry's newest
    # of ours is 20 again (the properties say 40).
    foreign(table)
    base = foreign(table)
    ours(table, 40)
    table.manage_snapshots().rollback_to_snapshot(base).commit()
    table.refresh()
    assert table.properties[iceberg.offset_property(TP)] == "40"
    assert state(table) == {TP: 20}


def test_an_old_versions_commit_after_ours_wins_over_the_properties(table: Any) -> None:
    """A snapshot of ours without the properties (a commit of an earlier version, which
    wrote only the summary) newer than the properties' snapshot: the ancestry's newest."""
    ours(table, 10)
    with table.transaction() as tx:
        props = {iceberg.offset_property(TP): "25", iceberg.RUN_ID: "fedcba9876543210"}
        with tx.update_snapshot(snapshot_properties=props).fast_append():
            pass
    table.refresh()
    assert table.properties[iceberg.offset_property(TP)] == "10"
    assert state(table) == {TP: 25}

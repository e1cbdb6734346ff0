"""restore's pure decisions: where a (re-)run starts, what a filter admits, batching, and what
it refuses or plans before it starts."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.commands.restore import (
    RestoreFilter,
    RestoreUnit,
    archived_objects,
    batches,
    plan_units,
    replayed_rows,
    require_envelope,
    require_partitions,
    require_timestamps,
    require_values,
    start_offset,
)
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.read.decoding import StoredRecord
from kafka_archive.archiver.read.listing import StoredObject
from kafka_archive.archiver.read.seek import FoundRecord
from kafka_archive.kcql.plan import Envelope, Format, Route, Target


def unit(only: RestoreFilter | None = None) -> RestoreUnit:
    only = only or RestoreFilter()
    route = Route(Target("b", "p"), "orders")
    return RestoreUnit(route, TopicPartition("orders", 3), (), None, "copy", 3, True, only)


def record(offset: int, timestamp: int | None = None) -> FoundRecord:
    stored = StoredRecord(b"v", b"v", timestamp=timestamp)
    return FoundRecord(TopicPartition("orders", 3), offset, True, stored, Format.BYTES, "k")


@pytest.mark.parametrize(
    ("from_offset", "progress", "start"),
    [
        (None, None, 0),  # first run: from the archive's beginning
        (None, 120, 120),  # re-run: right after the last committed batch
        (50, None, 50),
        (50, 120, 120),
        (500, 120, 500),  # a later --from-offset wins over older progress
    ],
)
def test_start_offset(from_offset: int | None, progress: int | None, start: int) -> None:
    assert start_offset(unit(RestoreFilter(from_offset=from_offset)), progress) == start


def test_ids_are_stable_per_source_partition_and_target() -> None:
    assert unit().transactional_id == "kafka-archive.restore.orders.3.to.copy"
    assert unit().progress_group == unit().transactional_id


def test_time_bounds_admit_only_records_with_a_time_inside() -> None:
    only = RestoreFilter(from_ms=100, to_ms=200)
    assert [only.admits(record(1, t)) for t in (None, 99, 100, 200, 201)] == [
        False,
        False,
        True,
        True,
        False,
    ]
    assert RestoreFilter(to_offset=5).admits(record(5))
    assert not RestoreFilter(to_offset=5).admits(record(6))


@given(st.lists(st.integers(0, 10**6)), st.integers(1, 50))
def test_batches_keep_order_and_bound_size(offsets: list[int], size: int) -> None:
    chunks = list(batches((record(o) for o in offsets), size))
    assert [r.offset for chunk in chunks for r in chunk] == offsets
    assert all(1 <= len(chunk) <= size for chunk in chunks)


def test_librdkafka_lines_of_states_it_retries_do_not_reach_stderr(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A first restore on a cluster met its transaction coordinator loading: librdkafka
    logged `GETPID … Coordinator load in progress` on stderr although it retries that by
    itself (an error that lasts comes back from init_transactions, as our one line). Lines
    of other trouble still show, in librdkafka's format."""
    from kafka_archive.archiver.commands import restore

    log = restore.client_log()
    log.log(
        logging.WARNING,
        "%s [%s] %s",
        "GETPID",
        "rdkafka#producer-1",
        "Failed to acquire transactional PID from broker TxnCoordinator/1: Broker: "
        "Coordinator load in progress: retrying",
    )
    log.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", "Connect failed")
    err = capfd.readouterr().err
    assert "Coordinator load in progress" not in err
    assert "|FAIL|rdkafka#producer-1| Connect failed" in err


# -- what restore decides before it starts ---------------------------------------------------


def stored_object(tp: TopicPartition, start: int) -> StoredObject:
    return StoredObject(start, f"p/{tp.topic}/{tp.partition}/{start}.json", tp, (), 1)


def test_the_objects_restored_are_the_topics_below_the_committed_offset() -> None:
    a, b, other = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("x", 0)
    listed = {
        a: (stored_object(a, 0), stored_object(a, 10), stored_object(a, 20)),
        b: (stored_object(b, 5),),  # only a crashed run's, beyond the committed offset
        other: (stored_object(other, 0),),
    }
    committed = {a: 20, b: 5}
    assert archived_objects(listed, committed, "orders") == {a: listed[a][:2]}
    # No state: every object is restored.
    assert archived_objects(listed, {}, "orders") == {a: listed[a], b: listed[b]}


def test_a_values_only_archive_is_restored_only_when_asked() -> None:
    bare, whole = StoredRecord(b"v"), StoredRecord(b"v", has_envelope=True, timestamp=5)
    with pytest.raises(ConfigError, match="stores values only"):
        require_envelope("orders", bare, values_only=False)
    require_envelope("orders", bare, values_only=True)
    require_envelope("orders", whole, values_only=False)


def test_time_bounds_need_the_records_timestamps() -> None:
    untimed = StoredRecord(b"v", has_envelope=True)  # the envelope without its metadata
    timed = StoredRecord(b"v", has_envelope=True, timestamp=5)
    for only in (RestoreFilter(from_ms=1), RestoreFilter(to_ms=1)):
        for stored in (untimed, StoredRecord(b"v")):
            with pytest.raises(ConfigError, match="need record timestamps"):
                require_timestamps(stored, only)
        require_timestamps(timed, only)
    require_timestamps(untimed, RestoreFilter(from_offset=3))


@pytest.mark.parametrize(
    ("fmt", "envelope", "replayed"),
    [
        (Format.JSON, False, None),
        (Format.BYTES, False, None),
        (Format.CSV, False, "its CSV text"),
        (Format.CSV_WITHHEADERS, False, "its CSV text"),
        (Format.AVRO, False, "the row as JSON"),
        (Format.PARQUET, False, "the row as JSON"),
        (Format.PARQUET, True, None),  # the envelope keeps the value as produced
    ],
)
def test_rows_are_replayed_as_cat_prints_them(
    fmt: Format, envelope: bool, replayed: str | None
) -> None:
    route = Route(Target("b", "p"), "orders", format=fmt)
    assert replayed_rows(route, StoredRecord(b"v", has_envelope=envelope)) == replayed


def test_an_archive_without_values_is_refused() -> None:
    route = Route(Target("b", "p"), "orders", envelope=Envelope(enabled=True, value=False))
    with pytest.raises(ConfigError, match="tombstone"):
        require_values(route, "orders")
    require_values(Route(Target("b", "p"), "orders", envelope=Envelope(enabled=True)), "orders")
    require_values(Route(Target("b", "p"), "orders"), "orders")


def test_partition_map_same_needs_every_archived_partition_in_the_target() -> None:
    archived = [TopicPartition("orders", p) for p in (0, 2, 5)]
    with pytest.raises(ConfigError) as info:
        require_partitions("same", "copy", (0, 1, 2), archived)
    assert info.value.message == "copy has 3 partition(s); the archive has partition(s) 5"
    require_partitions("same", "copy", (0, 1, 2, 3, 4, 5), archived)
    require_partitions("hash", "copy", (0,), archived)


@pytest.mark.parametrize(("partition_map", "to_partition"), [("same", 3), ("hash", None)])
def test_one_unit_per_archived_partition_in_order(
    partition_map: str, to_partition: int | None
) -> None:
    route = Route(Target("b", "p"), "orders")
    later, earlier = TopicPartition("orders", 3), TopicPartition("orders", 1)
    objects = {later: (stored_object(later, 0),), earlier: (stored_object(earlier, 0),)}
    only = RestoreFilter(from_offset=2)
    units = plan_units(
        route,
        objects,
        {later: 9},
        "copy",
        partition_map=partition_map,
        values_only=True,
        only=only,
        max_records=100,
    )
    assert [u.tp for u in units] == [earlier, later]
    assert [u.committed for u in units] == [None, 9]
    assert units[1] == RestoreUnit(
        route, later, objects[later], 9, "copy", to_partition, True, only, 100
    )
    assert units[0].to_partition == (1 if partition_map == "same" else None)

"""restore's pure decisions: where a (re-)run starts, what a filter admits, batching."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.commands.restore import (
    RestoreFilter,
    RestoreUnit,
    batches,
    start_offset,
)
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.read.decoding import StoredRecord
from kafka_archive.archiver.read.seek import FoundRecord
from kafka_archive.kcql.plan import Format, Route, Target


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

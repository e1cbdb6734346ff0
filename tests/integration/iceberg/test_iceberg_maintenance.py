"""Iceberg tables maintained by their owner between and during our runs: compaction (a
snapshot with the same rows and none of our summary, as Spark's ``rewrite_data_files``,
Trino's ``optimize`` or a GDPR delete leave) and ``expire_snapshots`` removing the last
snapshot we made. Every record must stay in the table exactly once (pyiceberg's scan).

The records are ``{"id": i}`` produced to partition ``i % 2`` of fresh topics, in order: an
id names one (topic, partition, offset), so ids seen once are offsets seen once.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, process_group, run_args
from iceberg_helpers import kcql_for, reader_table
from pyiceberg.exceptions import NoSuchTableError

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

PARTITIONS = 2
OURS = "kafka-archive.offsets."


def all_ids(table: Any) -> list[int]:
    """Every row's id, duplicates kept, sorted."""
    return sorted(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def compact(uri: str, endpoint: str) -> None:
    """The owner rewrites the table with the same rows (a new snapshot without our summary)."""
    table = reader_table(uri, endpoint)
    table.overwrite(table.scan().to_arrow())
    current = reader_table(uri, endpoint).current_snapshot()
    assert not any(k.startswith(OURS) for k in current.summary.additional_properties)


def expire_all_but_current(uri: str, endpoint: str) -> None:
    table = reader_table(uri, endpoint)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    table.maintenance.expire_snapshots().older_than(later).commit()
    table = reader_table(uri, endpoint)
    assert len(table.snapshots()) == 1
    assert not any(
        k.startswith(OURS) for s in table.snapshots() for k in s.summary.additional_properties
    ), "a snapshot of ours is left"


def test_a_compacted_then_expired_table_resumes_where_we_left_it(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=PARTITIONS), bucket()
    args = run_args(kcql_for(name, bkt, 1000), broker, s3_endpoint)
    produce(name, 3000, partitions=PARTITIONS)
    assert main(args) == 0, capsys.readouterr().err
    table = reader_table(catalog_uri, s3_endpoint)
    assert all_ids(table) == list(range(3000))
    # The tasks wrote under the lease: each file names the epoch they proved.
    for path in table.inspect.files().column("file_path").to_pylist():
        head = s3_client.head_object(Bucket=bkt, Key=path.removeprefix(f"s3://{bkt}/"))
        assert int(head["Metadata"].get("kafka-archive-epoch", "0")) > 0, path

    # Compaction: the current snapshot is not ours; our last one is in its ancestry.
    compact(catalog_uri, s3_endpoint)
    produce(name, 300, first=3000, partitions=PARTITIONS)
    assert main(args) == 0, capsys.readouterr().err
    assert all_ids(reader_table(catalog_uri, s3_endpoint)) == list(range(3300))

    # Compacted twice, then every snapshot but the current one expired: none of ours is
    # left, nor the foreign one after ours (the ancestry breaks before it reaches ours).
    compact(catalog_uri, s3_endpoint)
    compact(catalog_uri, s3_endpoint)
    expire_all_but_current(catalog_uri, s3_endpoint)
    produce(name, 300, first=3300, partitions=PARTITIONS)
    assert main(args) == 0, capsys.readouterr().err
    assert all_ids(reader_table(catalog_uri, s3_endpoint)) == list(range(3600))

    # Our last snapshot is the current one's parent and expired: the ancestry names it.
    compact(catalog_uri, s3_endpoint)
    expire_all_but_current(catalog_uri, s3_endpoint)
    assert main(args) == 0, capsys.readouterr().err  # nothing new: nothing added
    produce(name, 100, first=3600, partitions=PARTITIONS)
    assert main(args) == 0, capsys.readouterr().err
    assert all_ids(reader_table(catalog_uri, s3_endpoint)) == list(range(3700))


def test_follow_meets_a_compaction_and_carries_on(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A follow session whose table is compacted between its batches commits its next
    batch on top of the compaction (no exit 9), and a run after it adds nothing twice."""
    name, bkt = topic(partitions=PARTITIONS), bucket()
    kcql = kcql_for(name, bkt, 1000).replace(")", ", 'flush.interval'=1)")
    args = run_args(kcql, broker, s3_endpoint)
    command = [KAFKA_ARCHIVE, *args, "--follow", "--poll-interval", "0.5", "--master", "local[1]"]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}

    def ids() -> list[int]:
        try:
            return all_ids(reader_table(catalog_uri, s3_endpoint))
        except NoSuchTableError:
            return []

    def wait_for(expected: list[int], process: Any) -> None:
        deadline = time.monotonic() + 120
        while (seen := ids()) != expected:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, f"{len(seen)} rows, {len(set(seen))} ids"
            time.sleep(0.3)

    produce(name, 3000, partitions=PARTITIONS)
    with process_group(command, env) as process:
        wait_for(list(range(3000)), process)
        compact(catalog_uri, s3_endpoint)
        produce(name, 300, first=3000, partitions=PARTITIONS)
        wait_for(list(range(3300)), process)
        compact(catalog_uri, s3_endpoint)
        expire_all_but_current(catalog_uri, s3_endpoint)
        produce(name, 300, first=3300, partitions=PARTITIONS)
        wait_for(list(range(3600)), process)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
    # The run below states 'flush.interval'=1 as the session did: an object whose first
    # record is younger than a second by the driver's clock is held back for a later run
    # (formats.md, Flush interval). Records a minute old are flushed however soon it starts
    # (produced "now", they were held back whenever the run planned within a second).
    old = int(time.time() * 1000) - 60_000
    produce(name, 100, first=3600, partitions=PARTITIONS, timestamp=old)
    assert main(args) == 0, capsys.readouterr().err
    assert all_ids(reader_table(catalog_uri, s3_endpoint)) == list(range(3700))

"""Iceberg routes end to end: a real broker, moto's S3, Spark and a SQL catalog on SQLite.

The table is read with pyiceberg's own scan (a reader we did not write) and its files are
listed with boto3; every record must be in the table exactly once, after appends and after
runs SIGKILLed between writing files and committing them.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from archive_helpers import KAFKA_ARCHIVE, run_args
from confluent_kafka import Producer
from iceberg_helpers import (
    TABLE,
    data_keys,
    kcql_for,
    reader_table,
    referenced,
    table_ids,
)
from pyiceberg.exceptions import NoSuchTableError

from devstack import MOTO_CREDENTIALS
from kafka_archive.cli import main

pytestmark = pytest.mark.integration

PARTITIONS = 2


def test_runs_append_each_record_once_with_offsets_in_the_snapshot(
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
    args = run_args(kcql_for(name, bkt, 100), broker, s3_endpoint)
    produce(name, 500, partitions=PARTITIONS)
    assert main(args) == 0, capsys.readouterr().err
    table = reader_table(catalog_uri, s3_endpoint)
    assert table.location() == f"s3://{bkt}/tables/orders"
    assert table_ids(table) == list(range(500))
    summary = table.current_snapshot().summary
    assert summary[f"kafka-archive.offsets.{name}.0"] == "250"
    assert summary[f"kafka-archive.offsets.{name}.1"] == "250"
    assert summary["kafka-archive.records"] == "500"
    assert len(table.snapshots()) == 1  # one commit for all of the run's tasks and files
    assert data_keys(s3_client, bkt) == referenced(table, bkt)
    assert len(referenced(table, bkt)) == 6  # 250 per partition, 100 per file

    # The new records have a new field: the table gains the column (schema evolution).
    producer = Producer({"bootstrap.servers": broker})
    for i in range(500, 800):
        value = json.dumps({"id": i, "note": f"n{i}"}).encode()
        producer.produce(name, value=value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    assert main(args) == 0, capsys.readouterr().err
    table = reader_table(catalog_uri, s3_endpoint)
    assert table_ids(table) == list(range(800))
    notes = table.scan(selected_fields=("id", "note")).to_arrow().to_pylist()
    assert {r["id"]: r["note"] for r in notes} == {
        i: (f"n{i}" if i >= 500 else None) for i in range(800)
    }
    assert len(table.snapshots()) == 2
    assert table.current_snapshot().summary[f"kafka-archive.offsets.{name}.1"] == "400"

    assert main(args) == 0, capsys.readouterr().err  # nothing new: no commit
    assert len(reader_table(catalog_uri, s3_endpoint).snapshots()) == 2
    capsys.readouterr()

    # status reads the table's offsets; verify says it works on objects archives.
    assert main(["status", *args[1:], "--output", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["partitions"]
    assert {(r["partition"], r["archived_offset"], r["lag"]) for r in rows} == {
        (0, 400, 0),
        (1, 400, 0),
    }
    assert all(r["last_commit"] and r["last_commit"].endswith("Z") for r in rows)
    # Objects and bytes are the table's data files of each partition, as pyiceberg lists
    # them (status said 0 objects and 0 bytes: it read them from state objects only).
    expected: dict[int, tuple[int, int]] = {}
    for file in reader_table(catalog_uri, s3_endpoint).inspect.files().to_pylist():
        partition = int(file["file_path"].split("/data/", 1)[1].split("/")[1])
        count, size = expected.get(partition, (0, 0))
        expected[partition] = (count + 1, size + file["file_size_in_bytes"])
    assert {r["partition"]: (r["objects"], r["bytes"]) for r in rows} == expected
    assert sum(count for count, _ in expected.values()) == 10  # 6 files, then 2 a partition
    assert main(["verify", *args[1:]]) == 2
    err = capsys.readouterr().err
    assert "Iceberg table db.orders" in err and len(err.strip().splitlines()) == 1
    # No state objects: the table is the state.
    page = s3_client.list_objects_v2(Bucket=bkt, Prefix="tables/orders/.kafka-archive/")
    assert not [i["Key"] for i in page.get("Contents", []) if "/state/" in i["Key"]]


@pytest.mark.parametrize(
    ("trials", "prefix"),
    [
        pytest.param(1, "t-", id="once"),
        pytest.param(6, "t-", marks=pytest.mark.full, id="many"),
        # Names a key escapes (`_` and `.` lead no key segment): the files of such a topic
        # are under data/%5F…/ and data/%2E…/, where the next run must look for orphans.
        pytest.param(1, "_orders-", id="underscore-topic"),
        pytest.param(1, ".x-", id="dot-topic"),
    ],
)
def test_a_run_killed_before_its_commit_leaves_no_record_twice(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    trials: int,
    prefix: str,
) -> None:
    """Each trial: produce, start a run, SIGKILL its process group as soon as a file of it
    is in S3 (mid-upload, or between the uploads and the commit), then run to the end: the
    files the killed run left are removed, and every record is in the table once."""
    name, bkt = topic(partitions=PARTITIONS, prefix=prefix), bucket()
    args = run_args(kcql_for(name, bkt, 50), broker, s3_endpoint)
    command = [KAFKA_ARCHIVE, *args, "--master", "local[2]"]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    produced = orphaned = 0
    for _ in range(trials):
        produce(name, 2000, first=produced, partitions=PARTITIONS)
        produced += 2000
        before = data_keys(s3_client, bkt)
        process = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while not data_keys(s3_client, bkt) - before and process.poll() is None:
            assert time.monotonic() < deadline, "the run never wrote a file"
            time.sleep(0.02)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        try:
            committed = referenced(reader_table(catalog_uri, s3_endpoint), bkt)
        except NoSuchTableError:  # killed before the first commit created the table
            committed = set()
        if data_keys(s3_client, bkt) - committed:
            orphaned += 1

        assert main(args) == 0, capsys.readouterr().err
        capsys.readouterr()
        table = reader_table(catalog_uri, s3_endpoint)
        ids = table_ids(table)
        assert len(ids) == len(set(ids)), "a record is in the table twice"
        assert ids == list(range(produced))
        assert data_keys(s3_client, bkt) == referenced(table, bkt), "orphans left"
    assert orphaned >= (trials + 1) // 2, f"only {orphaned} of {trials} kills left orphans"


def test_state_conflict_when_another_writer_moved_the_partitions(
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
    """Two jobs on one table and topic, writing their files under different prefixes (so
    their leases do not exclude each other; one prefix has one lease): the second one's
    commit finds the partitions moved by the first since it planned, and stops (exit 9)
    without adding rows."""
    from kafka_archive.archiver.iceberg import commits

    name, bkt = topic(partitions=1), bucket()
    args = run_args(kcql_for(name, bkt, 100), broker, s3_endpoint)
    produce(name, 100, partitions=1)
    assert main(args) == 0, capsys.readouterr().err
    produce(name, 100, first=100, partitions=1)
    real_commit = commits.commit

    def racing(table: Any, *a: Any, **k: Any) -> None:
        # Another writer commits the same partition first (a whole run of another job).
        commits.commit = real_commit
        try:
            other = kcql_for(name, bkt, 100, prefix="tables/orders-other")
            assert main([*run_args(other, broker, s3_endpoint), "--job-name", "other-writer"]) == 0
        finally:
            commits.commit = racing
        real_commit(table, *a, **k)

    commits.commit = racing
    try:
        code = main(args)
    finally:
        commits.commit = real_commit
    err = capsys.readouterr().err
    assert code == 9, err
    assert "another writer committed" in err
    assert table_ids(reader_table(catalog_uri, s3_endpoint)) == list(range(200))


def test_partitionby_value_fields_become_identity_partitions(
    broker: str,
    s3_endpoint: str,
    spark: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pyiceberg.transforms import IdentityTransform

    name, bkt = topic(partitions=1), bucket()
    countries = ("DE", "FR", "US")
    producer = Producer({"bootstrap.servers": broker})
    for i in range(300):
        value = {"id": i, "country": countries[i % 3]}
        producer.produce(name, value=json.dumps(value).encode(), partition=0)
    assert producer.flush(30) == 0
    kcql = (
        f"INSERT INTO {bkt}:tables/orders SELECT * FROM {name} PARTITIONBY country "
        f"STOREAS PARQUET PROPERTIES('table.format'='iceberg', 'iceberg.table'='{TABLE}')"
    )
    args = run_args(kcql, broker, s3_endpoint)
    assert main(args) == 0, capsys.readouterr().err
    table = reader_table(catalog_uri, s3_endpoint)
    (field,) = table.spec().fields
    assert isinstance(field.transform, IdentityTransform)
    assert table.schema().find_field(field.source_id).name == "country"
    files = table.inspect.files().to_pylist()
    assert sorted(f["partition"]["country"] for f in files) == sorted(countries)
    for country in countries:
        rows = table.scan(row_filter=f"country == '{country}'").to_arrow().to_pylist()
        assert sorted(r["id"] for r in rows) == [
            i for i in range(300) if countries[i % 3] == country
        ]
    assert table_ids(table) == list(range(300))


def test_partitionby_date_becomes_day_and_hour_partitions_of_the_record_time(
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
    """One run, two routes of one topic: daily (Lenses' three-field spelling) and hourly
    with a value field. Each table has the record timestamp as a timestamptz column, the
    declared spec, and every row in the partition of its own timestamp's day or hour."""
    import datetime as dt

    from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform
    from pyiceberg.types import TimestamptzType

    name, bkt = topic(partitions=1), bucket()
    start = int(dt.datetime(2024, 5, 6, 20, 30, tzinfo=dt.UTC).timestamp() * 1000)
    count, step = 60, 17 * 60_000  # 17 minutes apart: 17 hours, across midnight
    countries = ("DE", "FR")
    times = {i: start + i * step for i in range(count)}
    produce(
        name,
        (
            {
                "value": json.dumps({"id": i, "country": countries[i % 2]}).encode(),
                "partition": 0,
                "timestamp": times[i],
            }
            for i in range(count)
        ),
    )
    table = "PROPERTIES('table.format'='iceberg', 'iceberg.table'"
    kcql = (
        f"INSERT INTO {bkt}:tables/daily SELECT * FROM {name} "
        f"PARTITIONBY _date.uuuu, _date.MM, _date.dd STOREAS PARQUET {table}='db.daily'); "
        f"INSERT INTO {bkt}:tables/hourly SELECT * FROM {name} "
        f"PARTITIONBY country, _date.`uuuu-MM-dd-HH` STOREAS PARQUET {table}='db.hourly')"
    )
    assert main(run_args(kcql, broker, s3_endpoint)) == 0, capsys.readouterr().err

    def moment(i: int) -> dt.datetime:
        return dt.datetime.fromtimestamp(times[i] / 1000, dt.UTC)

    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    for ident, transforms, of in [
        ("db.daily", [DayTransform], lambda i: (moment(i).date(),)),
        (
            "db.hourly",
            [IdentityTransform, HourTransform],
            lambda i: (countries[i % 2], int((moment(i) - epoch).total_seconds()) // 3600),
        ),
    ]:
        t = reader_table(catalog_uri, s3_endpoint, ident)
        column = t.schema().find_field("_timestamp")
        assert isinstance(column.field_type, TimestamptzType)
        spec = t.spec().fields
        assert [type(f.transform) for f in spec] == transforms
        assert t.schema().find_field(spec[-1].source_id).name == "_timestamp"
        rows = t.scan().to_arrow().to_pylist()
        assert sorted(r["id"] for r in rows) == list(range(count))
        assert {r["id"]: r["_timestamp"] for r in rows} == {i: moment(i) for i in range(count)}
        # Each file's partition (as the table records it) is that of every row in the file
        # (read with boto3 and pyarrow).
        files = t.inspect.files().to_pylist()
        for f in files:
            key = f["file_path"].removeprefix(f"s3://{bkt}/")
            body = s3_client.get_object(Bucket=bkt, Key=key)["Body"].read()
            ids = [int(i) for i in pq.read_table(io.BytesIO(body)).column("id").to_pylist()]
            assert {of(i) for i in ids} == {tuple(f["partition"].values())}, key
        assert sum(f["record_count"] for f in files) == count
        assert {tuple(f["partition"].values()) for f in files} == {of(i) for i in range(count)}
    # A day's rows through a filter on the time column (partition pruning by pyiceberg).
    daily = reader_table(catalog_uri, s3_endpoint, "db.daily")
    first_day = daily.scan(row_filter="_timestamp < '2024-05-07T00:00:00+00:00'").to_arrow()
    assert sorted(first_day.column("id").to_pylist()) == [
        i for i in range(count) if moment(i).day == 6
    ]


def test_an_existing_tables_column_types_type_its_files(
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
    """A table made by another tool (or an older kafka-archive) with int, float and double
    columns. Without a declared schema the files take the table's types for the fields it
    has: whole JSON numbers in the int column are longs (Iceberg widens int to long), not
    the doubles inference gives (which Iceberg cannot take there); a whole number in a
    double column is a double; the old rows still read. A fractional number for the long
    column does not fit it: exit 10, one line naming the column, nothing committed."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, FloatType, IntegerType, LongType, NestedField

    name, bkt = topic(partitions=1), bucket()
    catalog = SqlCatalog(
        "default",
        uri=catalog_uri,
        **{
            "s3.endpoint": s3_endpoint,
            "s3.access-key-id": MOTO_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": MOTO_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            "s3.region": MOTO_CREDENTIALS["AWS_DEFAULT_REGION"],
        },
    )
    catalog.create_namespace("db")
    made = catalog.create_table(
        TABLE,
        schema=Schema(
            NestedField(1, "id", IntegerType(), required=False),
            NestedField(2, "price", FloatType(), required=False),
            NestedField(3, "rate", DoubleType(), required=False),
        ),
        location=f"s3://{bkt}/tables/orders",
    )
    made.append(
        pa.table(
            {"id": [-1], "price": [0.5], "rate": [0.25]},
            schema=pa.schema([("id", pa.int32()), ("price", pa.float32()), ("rate", pa.float64())]),
        )
    )
    produce(
        name,
        (
            {
                "value": json.dumps({"id": i, "price": i + 0.5, "rate": i // 4}).encode(),
                "partition": 0,
            }
            for i in range(1, 20)  # rate 0, 0, 0, 1, ...: whole numbers for a double column
        ),
    )
    args = run_args(kcql_for(name, bkt, 100), broker, s3_endpoint)
    assert main(args) == 0, capsys.readouterr().err
    table = reader_table(catalog_uri, s3_endpoint)
    types = {f.name: f.field_type for f in table.schema().fields}
    assert types == {"id": LongType(), "price": DoubleType(), "rate": DoubleType()}
    rows = table.scan().to_arrow().to_pylist()
    expected = [(-1, 0.5, 0.25)] + [(i, i + 0.5, i // 4) for i in range(1, 20)]
    assert sorted((r["id"], r["price"], r["rate"]) for r in rows) == expected
    assert all(type(r["id"]) is int for r in rows)
    assert data_keys(s3_client, bkt) == referenced(table, bkt)  # no file left behind
    snapshots = len(table.snapshots())

    produce(name, [{"value": json.dumps({"id": 20.5}).encode(), "partition": 0}])
    capsys.readouterr()
    assert main(args) == 10
    err = capsys.readouterr().err.strip().splitlines()
    assert "does not fit Iceberg table" in err[-1] and "id" in err[-1], err
    assert "Traceback" not in "\n".join(err)
    table = reader_table(catalog_uri, s3_endpoint)
    assert len(table.snapshots()) == snapshots
    rows = table.scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["price"], r["rate"]) for r in rows) == expected


@pytest.mark.full
def test_follow_commits_once_per_micro_batch(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """`run --follow`: each micro-batch with something old enough is one snapshot holding
    every task's files; waves produced while it runs are each in the table exactly once."""
    name, bkt = topic(partitions=PARTITIONS), bucket()
    kcql = (
        f"INSERT INTO {bkt}:tables/orders SELECT * FROM {name} STOREAS PARQUET "
        f"PROPERTIES('table.format'='iceberg', 'iceberg.table'='{TABLE}', "
        "'flush.count'=1000, 'flush.interval'=1)"
    )
    command = [
        KAFKA_ARCHIVE,
        "run",
        "--kcql",
        kcql,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        s3_endpoint,
        "--follow",
        "--poll-interval",
        "0.5",
        "--master",
        "local[1]",
    ]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    produce(name, 100, partitions=PARTITIONS)
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def ids() -> list[int]:
        try:
            return table_ids(reader_table(catalog_uri, s3_endpoint))
        except NoSuchTableError:
            return []

    try:
        for wave in range(3):
            expected = list(range(100 + 50 * wave))
            deadline = time.monotonic() + 90
            while ids() != expected:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, f"wave {wave} not archived: {ids()[-5:]}"
                time.sleep(0.2)
            produce(name, 50, first=100 + 50 * wave, partitions=PARTITIONS)
        deadline = time.monotonic() + 60
        while ids() != list(range(250)):
            assert time.monotonic() < deadline, "the last wave was not archived"
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    snapshots = reader_table(catalog_uri, s3_endpoint).snapshots()
    assert 3 <= len(snapshots) <= 6  # a wave is one batch (two if it straddles a poll)
    assert sum(int(s.summary["kafka-archive.records"]) for s in snapshots) == 250


@pytest.mark.full
def test_an_incompatible_schema_change_stops_the_run_and_adds_nothing(
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
    name, bkt = topic(partitions=1), bucket()
    args = run_args(kcql_for(name, bkt, 100), broker, s3_endpoint)
    produce(name, 10, partitions=1)
    assert main(args) == 0, capsys.readouterr().err
    producer = Producer({"bootstrap.servers": broker})
    producer.produce(name, value=json.dumps({"id": "eleven"}).encode(), partition=0)
    assert producer.flush(30) == 0
    assert main(args) == 10
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "does not fit Iceberg table" in err.strip().splitlines()[-1]
    table = reader_table(catalog_uri, s3_endpoint)
    assert table_ids(table) == list(range(10)) and len(table.snapshots()) == 1
    assert table.current_snapshot().summary[f"kafka-archive.offsets.{name}.0"] == "10"

"""Iceberg routes under commit_protocol=log (issue 37): the claim in the target's commit log
is the table's fence token, the table stays the state. A real broker, moto's S3, Spark and a
SQL catalog on SQLite.

Every check reads the archive independently: the table with pyiceberg's own scan and its
snapshots' summaries, its files and the log's entries with boto3 and json (never our
decoding code). Records are ``{"id": i}`` produced to partition ``i % 2``, in order: an id
names one (partition, offset), so ids seen once are offsets seen once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from archive_helpers import (
    KAFKA_ARCHIVE,
    cli,
    process_env,
    process_group,
    run_args,
    run_command,
    wait_presence_expired,
)
from faultproxy import FaultProxy
from iceberg_helpers import data_keys, kcql_for, reader_table, referenced, table_ids
from pyiceberg.exceptions import NoSuchTableError

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.cli import main
from kafka_archive.kcql.plan import Target

pytestmark = pytest.mark.integration

PARTITIONS = 2
LOG = "tables/orders/.kafka-archive/log/"
EPOCH = "kafka-archive.epoch"
LOG_MODE = {"KAFKA_ARCHIVE_COMMIT_PROTOCOL": "log"}


@pytest.fixture
def log_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")


def entries(s3: Any, bucket: str) -> list[dict[str, Any]]:
    """The log's entries in order, as JSON (checkpoints left out)."""
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=LOG):
        keys += [i["Key"] for i in page.get("Contents", []) if "/checkpoint/" not in i["Key"]]
    return [json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in sorted(keys)]


def claim_epochs(s3: Any, bucket: str) -> list[int]:
    """The epochs of the log's claims, in order; every entry must be a claim (the log names
    no table file: the table's commit is pyiceberg's)."""
    found = entries(s3, bucket)
    assert [e["kind"] for e in found] == ["claim"] * len(found), found
    return [int(e["writer"]["epoch"]) for e in found]


def our_snapshots(table: Any) -> list[tuple[int, int]]:
    """(epoch, records added) of each snapshot of ours, oldest first."""
    out = []
    for snapshot in sorted(table.snapshots(), key=lambda s: s.timestamp_ms):
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if "kafka-archive.run-id" in summary:
            out.append((int(summary.get(EPOCH, "0")), int(summary["kafka-archive.records"])))
    return out


def our_epochs(table: Any) -> list[int]:
    """The epoch each snapshot of ours carries, oldest first (0: none)."""
    out = []
    for snapshot in sorted(table.snapshots(), key=lambda s: s.timestamp_ms):
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if "kafka-archive.run-id" in summary:
            out.append(int(summary.get(EPOCH, "0")))
    return out


def all_ids(table: Any) -> list[int]:
    """Every row's id, duplicates kept, sorted."""
    return sorted(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def compact(uri: str, endpoint: str) -> None:
    """The owner rewrites the table with the same rows (a snapshot without our summary), as
    test_iceberg_maintenance.py's owner does."""
    table = reader_table(uri, endpoint)
    table.overwrite(table.scan().to_arrow())
    current = reader_table(uri, endpoint).current_snapshot()
    assert "kafka-archive.run-id" not in current.summary.additional_properties


def expire_all_but_current(uri: str, endpoint: str) -> None:
    table = reader_table(uri, endpoint)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    table.maintenance.expire_snapshots().older_than(later).commit()
    assert len(reader_table(uri, endpoint).snapshots()) == 1


def missing_files(table: Any, s3: Any, bucket: str) -> list[str]:
    """The files any snapshot of the table references that are not in S3."""
    return [
        key
        for key in referenced(table, bucket)
        if "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix=key)
    ]


def test_runs_append_each_record_once_fenced_by_the_claims_epoch(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    log_mode: None,
) -> None:
    """run, more records, run, a no-op run: each record once, the claim's epoch in our
    snapshots and in each data file's writer metadata, the log holding claims only."""
    name, bkt = topic(partitions=PARTITIONS), bucket()
    args = run_args(kcql_for(name, bkt, 100), broker, s3_endpoint)
    produce(name, 500, partitions=PARTITIONS)
    assert main(args) == 0, capsys.readouterr().err
    table = reader_table(catalog_uri, s3_endpoint)
    assert table_ids(table) == list(range(500))
    summary = table.current_snapshot().summary
    assert summary[f"kafka-archive.offsets.{name}.0"] == "250"
    assert summary[EPOCH] == "1"
    assert table.properties[EPOCH] == "1"
    assert claim_epochs(s3_client, bkt) == [1]
    # The tasks created the files with the claim's writer metadata (log mode's).
    for key in referenced(table, bkt):
        meta = s3_client.head_object(Bucket=bkt, Key=key)["Metadata"]
        assert meta["epoch"] == "1" and meta["partition"] in ("0", "1"), (key, meta)

    produce(name, 300, first=500, partitions=PARTITIONS)
    assert main(args) == 0, capsys.readouterr().err
    table = reader_table(catalog_uri, s3_endpoint)
    assert table_ids(table) == list(range(800))
    assert claim_epochs(s3_client, bkt) == [1, 2]
    # The second run fenced the table (a snapshot without files) before its commit.
    assert our_epochs(table) == [1, 2, 2]
    assert main(args) == 0, capsys.readouterr().err  # nothing new: a fence, no rows
    table = reader_table(catalog_uri, s3_endpoint)
    assert table_ids(table) == list(range(800))
    assert our_epochs(table) == [1, 2, 2, 3]
    assert data_keys(s3_client, bkt) == referenced(table, bkt)
    capsys.readouterr()
    assert main(["status", *args[1:], "--output", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["partitions"]
    assert {(r["partition"], r["archived_offset"], r["lag"]) for r in rows} == {
        (0, 400, 0),
        (1, 400, 0),
    }


def test_a_driver_frozen_inside_its_commit_while_a_newer_run_commits_is_refused(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    log_mode: None,
) -> None:
    """Run A's S3 traffic goes through a proxy that holds A's first write under the table's
    ``metadata/`` after its data files (A is inside its append); A's process group is frozen
    (SIGSTOP) and the write let through. Run B claims (a higher epoch), fences the table,
    removes A's files (of a lower epoch, referenced by no snapshot), archives the same
    records, commits and exits. A is thawed: its commit must be refused (exit 18), the table
    referencing no removed file and holding every record once."""
    name, bkt = topic(partitions=1), bucket()
    kcql = kcql_for(name, bkt, 100)
    produce(name, 300, partitions=1)
    assert main(run_args(kcql, broker, s3_endpoint)) == 0, capsys.readouterr().err
    produce(name, 300, first=300, partitions=1)

    wrote, entered, release = threading.Event(), threading.Event(), threading.Event()

    def hold(method: str, path: str, headers: dict[str, str]) -> bool:
        if method in ("PUT", "POST") and "/tables/orders/data/" in path:
            wrote.set()
        elif (
            method in ("PUT", "POST")
            and "/tables/orders/metadata/" in path
            and wrote.is_set()
            and not entered.is_set()
        ):
            entered.set()
            release.wait(120)
        return False

    with FaultProxy(s3_endpoint, rate=0.0, seed=1) as proxy:
        proxy.drop_response = hold
        command = run_command(kcql, broker, proxy.url)
        # (A short ttl: A's presence expires while it is frozen, and B takes it over.)
        env = process_env(**LOG_MODE, KAFKA_ARCHIVE_LOCK_TTL_SECONDS="6")
        with process_group(command, env) as a:
            assert entered.wait(180), a.communicate()
            os.killpg(a.pid, signal.SIGSTOP)
            release.set()
            wait_presence_expired(s3_client, bkt, "tables/orders")
            b_code = main(run_args(kcql, broker, s3_endpoint))
            b_err = capsys.readouterr().err
            os.killpg(a.pid, signal.SIGCONT)
            _, a_err = a.communicate(timeout=180)
    assert b_code == 0, b_err
    assert a.returncode == 18, a_err[-2000:]
    assert "newer run" in a_err and "Traceback" not in a_err, a_err[-2000:]
    table = reader_table(catalog_uri, s3_endpoint)
    assert not missing_files(table, s3_client, bkt), "the table references removed files"
    assert table_ids(table) == list(range(600))
    assert claim_epochs(s3_client, bkt) == [1, 2, 3]
    # A's only snapshot is its fence at its start (no rows); B's fence, then its rows.
    assert our_snapshots(table) == [(1, 300), (2, 0), (3, 0), (3, 300)]


@contextlib.contextmanager
def killed_at_first_file(args: list[str], s3: Any, bucket: str) -> Iterator[None]:
    """A whole-process log-mode run of ``args`` SIGKILLed (its process group) as soon as a
    data file of it is in S3: mid-upload, or between its uploads and its commit."""
    before = data_keys(s3, bucket)
    command = [KAFKA_ARCHIVE, *args, "--master", "local[2]"]
    process = subprocess.Popen(
        command,
        env=process_env(**LOG_MODE),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not data_keys(s3, bucket) - before and process.poll() is None:
            assert time.monotonic() < deadline, "the run never wrote a file"
            time.sleep(0.02)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)


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
    log_mode: None,
) -> None:
    """SIGKILL as soon as a file is written (first a run that creates the table, then one on
    top of it), then a run: the files the killed run left are removed and each record is in
    the table once."""
    name, bkt = topic(partitions=PARTITIONS), bucket()
    args = run_args(kcql_for(name, bkt, 50), broker, s3_endpoint)
    produced = orphaned = 0
    for _ in range(2):
        produce(name, 2000, first=produced, partitions=PARTITIONS)
        produced += 2000
        with killed_at_first_file(args, s3_client, bkt):
            pass
        try:
            committed = referenced(reader_table(catalog_uri, s3_endpoint), bkt)
        except NoSuchTableError:  # killed before the first commit created the table
            committed = set()
        orphaned += bool(data_keys(s3_client, bkt) - committed)
        assert main(args) == 0, capsys.readouterr().err
        table = reader_table(catalog_uri, s3_endpoint)
        assert table_ids(table) == list(range(produced))
        assert data_keys(s3_client, bkt) == referenced(table, bkt), "orphans left"
    assert orphaned >= 1, "no kill left a file behind"


def test_follow_claims_once_commits_each_batch_and_meets_a_compaction(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    log_mode: None,
) -> None:
    """A log-mode follow session: one claim, a commit per batch (each carrying the claim's
    epoch), the owner's compaction and expiry between batches (snapshots without our
    summary) met without a conflict; a run after it adds nothing twice."""
    name, bkt = topic(partitions=PARTITIONS), bucket()
    kcql = kcql_for(name, bkt, 1000).replace(")", ", 'flush.interval'=1)")
    args = run_args(kcql, broker, s3_endpoint)
    command = [KAFKA_ARCHIVE, *args, "--follow", "--poll-interval", "0.5", "--master", "local[1]"]

    def ids() -> list[int]:
        try:
            return all_ids(reader_table(catalog_uri, s3_endpoint))
        except NoSuchTableError:
            return []

    def wait_for(expected: list[int], process: Any) -> None:
        deadline = time.monotonic() + 180
        while (seen := ids()) != expected:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, f"{len(seen)} rows, {len(set(seen))} ids"
            time.sleep(0.3)

    produce(name, 3000, partitions=PARTITIONS)
    with process_group(command, process_env(**LOG_MODE)) as process:
        wait_for(list(range(3000)), process)
        compact(catalog_uri, s3_endpoint)
        produce(name, 300, first=3000, partitions=PARTITIONS)
        wait_for(list(range(3300)), process)
        compact(catalog_uri, s3_endpoint)
        expire_all_but_current(catalog_uri, s3_endpoint)
        produce(name, 300, first=3300, partitions=PARTITIONS)
        wait_for(list(range(3600)), process)
        table = reader_table(catalog_uri, s3_endpoint)
        assert table.properties[EPOCH] == "1"
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
    assert claim_epochs(s3_client, bkt) == [1]  # one claim for the whole session
    # The run states 'flush.interval'=1 as the session did: records younger than a second
    # at its plan are held back (docs/formats.md, Flush interval); a minute old, never.
    old = int(time.time() * 1000) - 60_000
    produce(name, 100, first=3600, partitions=PARTITIONS, timestamp=old)
    assert main(args) == 0, capsys.readouterr().err
    table = reader_table(catalog_uri, s3_endpoint)
    assert all_ids(table) == list(range(3700))
    assert claim_epochs(s3_client, bkt) == [1, 2]
    assert our_epochs(table)[-2:] == [2, 2]  # the run's fence, then its commit


def test_a_states_run_holding_the_tables_lease_stops_a_log_mode_run(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    spark: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    log_mode: None,
) -> None:
    """An Iceberg target has no partition states to migrate, but a states-mode run may be
    writing it: while its lease is live a log-mode run stops (exit 8) before writing; once
    it is released, the log-mode run takes the lock over (the migrated marker), and a
    states-mode run is then refused."""
    name, bkt = topic(partitions=1), bucket()
    args = run_args(kcql_for(name, bkt, 100), broker, s3_endpoint)
    produce(name, 100, partitions=1)
    store = S3Store(S3Settings(endpoint_url=s3_endpoint, region="us-east-1"))
    with JobLock(store, Target(bkt, "tables/orders"), "other", "run-a", ttl_seconds=600):
        code, _, err = cli(capsys, *args)
        assert code == 8 and "Traceback" not in err, err
        assert len(err.strip().splitlines()) <= 2, err  # the line and its hint
    with pytest.raises(NoSuchTableError):
        reader_table(catalog_uri, s3_endpoint)
    assert main(args) == 0, capsys.readouterr().err
    assert table_ids(reader_table(catalog_uri, s3_endpoint)) == list(range(100))
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "states")
    code, _, err = cli(capsys, *args)
    assert code in (2, 24) and "Traceback" not in err, err

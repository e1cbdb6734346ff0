"""Every failure an operator can cause or meet, with the real components: one line on stderr
with its documented exit code (never a traceback, a Py4J wrapper or "internal error"), on the
driver and on executors alike; nothing uncommitted is counted (the --report), and the next
run archives exactly once.

Faults are real: a 512 KiB tmpfs that fills up, a read-only tmpfs, a missing directory, a
librdkafka property it refuses, the broker SIGSTOPped mid-run, a proxy in front of S3 that
starts answering ExpiredToken mid-run, and the bucket deleted mid-run.
"""

from __future__ import annotations

import contextlib
import functools
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import archived_ids, run_args, wait_lease_expired
from faultproxy import FaultProxy
from kafka_broker import KafkaBroker

from kafka_archive.archiver.config.load import load_settings
from kafka_archive.archiver.core import errors
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.archiver.plan import units as jobs
from kafka_archive.archiver.plan.preflight import Preflight
from kafka_archive.archiver.plan.views import partition_states
from kafka_archive.archiver.spark import driver
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.write.task import UnitFailure, archive_units
from kafka_archive.cli import main
from kafka_archive.kcql import parse

pytestmark = pytest.mark.integration


def padded(pad: int) -> Callable[[int], dict[str, Any]]:
    """Values {"id": i, "pad": "x" * pad}."""
    return lambda i: {"id": i, "pad": "x" * pad}


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["run", *args])
    captured = capsys.readouterr()
    if code:
        with capsys.disabled():  # the line the user sees, for the record (pytest -s)
            print(f"\n[exit {code}] {captured.err.strip().splitlines()[-1]}")
    return code, captured.out, captured.err


def error_line(err: str) -> str:
    """The run's one error line (the last on stderr); no traceback or wrapper anywhere."""
    for noise in ("Traceback", "Py4J", "internal error", "py4j", "PythonException"):
        assert noise not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("kafka-archive: error: "), err[-3000:]
    assert sum(line.startswith("kafka-archive: error") for line in lines) == 1, err[-3000:]
    return lines[-1]


def committed_offsets(s3: Any, bucket: str) -> int:
    """The sum of the committed next offsets in the job's state documents (read with boto3)."""
    total = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            if "/.kafka-archive/" in f"/{item['Key']}" and "/state/" in item["Key"]:
                body = json.loads(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
                total += int(body["next_offset"])
    return total


def report_counts_only_commits(report: Path, s3: Any, bucket: str) -> None:
    document = json.loads(report.read_text())
    assert document["ok"] is False
    assert document["records"] == committed_offsets(s3, bucket)


@contextlib.contextmanager
def tmpfs(path: Path, *options: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(path)], check=True
    )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_spool_fails_in_one_line_and_the_next_run_is_exactly_once(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 6000, value=padded(200))  # ~700 KiB per partition, one object each
    # PARTITIONBY: open objects are spooled (a route with one open object at a time writes
    # it into memory, not the spool).
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} PARTITIONBY _partition "
        "WITH_FLUSH_COUNT = 100000"
    )
    args = run_args(kcql, broker, s3_endpoint, command=None)
    report = tmp_path / "report.json"
    with tmpfs(tmp_path / "small", "size=512k") as small:
        monkeypatch.setenv("KAFKA_ARCHIVE_SPOOL_DIR", str(small))
        code, _, err = cli(capsys, *args, "--report", str(report))
        line = error_line(err)
        assert code == errors.SpoolError.exit_code == 20
        assert f"the spool directory {small} is full (ENOSPC)" in line
        assert list(small.iterdir()) == [], "spool files of the failed unit are removed"
    report_counts_only_commits(report, s3_client, bkt)
    monkeypatch.delenv("KAFKA_ARCHIVE_SPOOL_DIR")
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    assert archived_ids(s3_client, bkt) == list(range(6000))


def test_a_missing_or_read_only_spool_fails_before_the_run(
    broker: str,
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    args = run_args(
        f"INSERT INTO {bkt}:arch SELECT * FROM {name}", broker, s3_endpoint, command=None
    )
    missing = tmp_path / "no-such-dir"
    monkeypatch.setenv("KAFKA_ARCHIVE_SPOOL_DIR", str(missing))
    code, _, err = cli(capsys, *args)
    assert code == 20
    assert f"the spool directory {missing} does not exist (ENOENT)" in error_line(err)
    with tmpfs(tmp_path / "ro", "size=64k", "ro") as read_only:
        monkeypatch.setenv("KAFKA_ARCHIVE_SPOOL_DIR", str(read_only))
        code, _, err = cli(capsys, *args)
    assert code == 20
    assert "is on a read-only file system (EROFS)" in error_line(err)


def _run_units(
    spark: Any, broker: str, endpoint: str, kcql: str, flags: dict[str, Any], env: dict[str, str]
) -> list[Any]:
    """Plan with good settings on the driver, then run the units on Spark's executors with
    the given ones (what an executor meets that the driver did not)."""
    good = load_settings(None, {}, {"bootstrap_servers": broker, "endpoint_url": endpoint})
    plan = parse(kcql)
    store = S3Store(good.settings.s3)
    with KafkaAdmin(good.settings.kafka, "g") as admin:
        work = jobs.plan_work(
            partition_states(Preflight("j", store, plan, admin), legacy=False),
            store=store,
            admin=admin,
            settings=good.settings,
            job="j",
            run_id="r",
            now_ms=0,
        )
    bad = load_settings(None, env, {"bootstrap_servers": broker, "endpoint_url": endpoint, **flags})
    task = functools.partial(archive_units, settings=bad.settings)
    return driver.map_units(driver.SparkOnDemand.running(spark, bad.settings), work.units, task)


@pytest.mark.parametrize(
    ("flags", "env", "error", "message"),
    [
        (
            {},
            {"KAFKA_ARCHIVE_SPOOL_DIR": "/nonexistent/spool"},
            errors.SpoolError,
            "the spool directory /nonexistent/spool does not exist (ENOENT)",
        ),
        (
            {"kafka_properties": {"fetch.wait.max.ms": "soon"}},
            {},
            errors.ConfigError,
            "librdkafka refused the Kafka client configuration: Invalid value for configuration "
            'property "fetch.wait.max.ms"',
        ),
    ],
    ids=["missing-spool", "bad-property"],
)
def test_executor_errors_cross_back_as_ours(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    flags: dict[str, Any],
    env: dict[str, str],
    error: type[errors.ArchiveError],
    message: str,
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 10)
    # PARTITIONBY: objects are spooled (one open object at a time is written into memory).
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PARTITIONBY _partition"
    results = _run_units(spark, broker, s3_endpoint, kcql, flags, env)
    assert len(results) == 2 and all(isinstance(r, UnitFailure) for r in results), results
    for result in results:
        raised = result.to_error()
        assert type(raised) is error and raised.exit_code == error.exit_code
        assert message in str(raised)


def test_a_property_librdkafka_refuses_is_one_line_on_the_driver(
    broker: str,
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    code, _, err = cli(
        capsys,
        *run_args(
            f"INSERT INTO {bkt}:arch SELECT * FROM {name}", broker, s3_endpoint, command=None
        ),
        "-X",
        "no.such.property=1",
    )
    assert code == 2
    assert (
        "librdkafka refused the Kafka client configuration: No such configuration "
        'property: "no.such.property"'
    ) in error_line(err)


def test_the_broker_stopping_mid_run_fails_in_one_line_and_the_next_run_is_exactly_once(
    kafka: KafkaBroker,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 20000, value=padded(300), batch_size=4096)  # ~12 records a batch
    # Objects of 25 records: a unit's first 64 (marked and uploaded together) are out after
    # 1,600 records of each partition, a quarter of a minute into the read below.
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 25"
    args = run_args(kcql, broker, s3_endpoint, command=None)
    monkeypatch.setenv("KAFKA_ARCHIVE_READ_TIMEOUT_SECONDS", "5")
    stopped, returned = threading.Event(), threading.Event()

    def stop_broker_once_objects_appear() -> None:
        # No deadline but the run's own end: under load (35) the first uploads took more
        # than the 120 s this wait had, and the broker was never stopped.
        while not returned.is_set():
            listed = s3_client.list_objects_v2(Bucket=bkt, Prefix=f"arch/{name}/")
            if listed.get("KeyCount", 0) >= 2:
                kafka.freeze()
                stopped.set()
                # Stopped until the run gave up (its read timeout, 5 s, however long that
                # takes under load); a run that needs the broker to give up is let go later.
                returned.wait(timeout=300)
                break
            time.sleep(0.05)
        kafka.freeze(False)

    saboteur = threading.Thread(target=stop_broker_once_objects_appear, daemon=True)
    saboteur.start()
    report = tmp_path / "report.json"
    try:
        # Fetches of 2 KiB, 100 ms apart: the read would take about a minute, so the
        # broker stops in the middle of it.
        code, _, err = cli(
            capsys,
            *args,
            "--report",
            str(report),
            "-X",
            "fetch.max.bytes=2048",
            "-X",
            "message.max.bytes=1000",
            "-X",
            "max.partition.fetch.bytes=2048",
            "-X",
            "queued.max.messages.kbytes=1",
            "-X",
            "fetch.queue.backoff.ms=100",
        )
    finally:
        returned.set()
        saboteur.join(timeout=60)
        kafka.freeze(False)
    assert stopped.is_set(), "the broker was stopped mid-run"
    line = error_line(err)
    assert code == errors.KafkaReadError.exit_code == 11, line
    assert "no data for 5s while reading up to offset 10000" in line
    report_counts_only_commits(report, s3_client, bkt)
    monkeypatch.delenv("KAFKA_ARCHIVE_READ_TIMEOUT_SECONDS")
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    assert archived_ids(s3_client, bkt) == list(range(20000))


class TrippingProxy(FaultProxy):
    """Forwards to S3 until ``trip_after`` PUTs under ``watch`` went through; from then on
    answers every request with ``status``/``code`` (an S3 error document)."""

    def __init__(self, upstream: str, watch: str, trip_after: int, status: int, code: str):
        super().__init__(upstream, rate=0.0, seed=0)
        self.watch, self.trip_after, self.status, self.code = watch, trip_after, status, code
        self.seen = 0
        self.tripped = threading.Event()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        base: Any = super()._handler()
        proxy = self

        class Handler(base):  # type: ignore[misc, valid-type]
            def _forward(self) -> None:
                if proxy.tripped.is_set():
                    self._body()
                    return self._error(proxy.status, proxy.code)  # type: ignore[no-any-return]
                if self.command == "PUT" and proxy.watch in self.path:
                    proxy.seen += 1
                    if proxy.seen >= proxy.trip_after:
                        proxy.tripped.set()
                return base._forward(self)  # type: ignore[no-any-return]

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        return Handler


def test_credentials_expiring_mid_run_fail_in_one_line_and_the_next_run_is_exactly_once(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 2000)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 100"
    monkeypatch.setenv("KAFKA_ARCHIVE_LOCK_TTL_SECONDS", "3")  # its release fails too
    report = tmp_path / "report.json"
    with TrippingProxy(s3_endpoint, f"/arch/{name}/", 3, 400, "ExpiredToken") as proxy:
        code, _, err = cli(
            capsys,
            *run_args(kcql, broker, proxy.url, command=None),
            "--report",
            str(report),
        )
    assert proxy.tripped.is_set()
    line = error_line(err)
    assert code == errors.S3UnavailableError.exit_code == 5, line
    assert "the AWS credentials expired (ExpiredToken)" in line
    report_counts_only_commits(report, s3_client, bkt)
    wait_lease_expired(s3_client, bkt)  # the lock's lease runs out
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command=None))
    assert code == 0, err
    assert archived_ids(s3_client, bkt) == list(range(2000))


def test_the_bucket_deleted_mid_run_fails_in_one_line_and_a_new_one_is_exactly_once(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 4000)
    # 800 small objects: a unit marks and uploads its small objects up to 64 at a time, so
    # with fewer (200) the run could end before the saboteur had emptied the bucket.
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 5"
    args = run_args(kcql, broker, s3_endpoint, command=None)
    deleted, done = threading.Event(), threading.Event()

    def delete_bucket_once_objects_appear() -> None:
        started = False  # once emptying began, go on until the bucket is gone
        deadline = time.monotonic() + 120
        while not deleted.is_set() and (started or not done.is_set()):
            if time.monotonic() > deadline:
                return
            listed = s3_client.list_objects_v2(Bucket=bkt, Prefix=f"arch/{name}/")
            if not started and listed.get("KeyCount", 0) < 2:
                time.sleep(0.05)
                continue
            started = True
            try:  # the run keeps writing while we empty it
                for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bkt):
                    keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                    if keys:
                        s3_client.delete_objects(Bucket=bkt, Delete={"Objects": keys})
                for upload in s3_client.list_multipart_uploads(Bucket=bkt).get("Uploads", []):
                    s3_client.abort_multipart_upload(
                        Bucket=bkt, Key=upload["Key"], UploadId=upload["UploadId"]
                    )
                s3_client.delete_bucket(Bucket=bkt)
                deleted.set()
            except Exception as exc:
                print("saboteur:", type(exc).__name__, exc)

    saboteur = threading.Thread(target=delete_bucket_once_objects_appear, daemon=True)
    saboteur.start()
    try:
        code, _, err = cli(capsys, *args)
    finally:
        done.set()
        saboteur.join(timeout=60)
    assert deleted.is_set(), "the bucket was deleted mid-run"
    line = error_line(err)
    # The saboteur empties the bucket before it can delete it: a commit that lands in between
    # finds its partition state gone (exit 9, the state changed under the run), or the run's
    # lease check finds the target's lock gone first (exit 18, it stops writing).
    expected = {
        errors.BucketNotFoundError.exit_code: f"bucket {bkt!r} does not exist",
        errors.StateConflictError.exit_code: "was changed by another run",
        errors.FencedError.exit_code: "the job's lock is gone",
    }
    assert code in expected, line
    assert expected[code] in line
    s3_client.create_bucket(Bucket=bkt)
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    assert archived_ids(s3_client, bkt) == list(range(4000))


def test_an_unexpected_task_error_is_one_line_not_a_py4j_wrapper(spark: Any) -> None:
    from kafka_archive.archiver.spark.context import task_failure

    def boom(_: Any) -> Any:  # nested: pickled by value, as the workers cannot import us
        raise RuntimeError("boom in a task")

    with pytest.raises(Exception) as raised:
        spark.parallelize([1], 1).map(boom).collect()
    assert type(raised.value).__name__ == "Py4JJavaError"
    error = task_failure(raised.value)
    assert isinstance(error, errors.SparkTaskError) and error.exit_code == 21
    text = str(error)
    assert text.startswith("a Spark task failed") and "RuntimeError: boom in a task" in text
    assert "\n" not in text and "Traceback" not in text and "\tat " not in text

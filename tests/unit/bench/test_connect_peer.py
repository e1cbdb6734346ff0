"""The Kafka Connect peer of the benchmark (``bench/connect_peer.py``): what can be checked
without a JVM — the jars are fetched once, a missing Maven is one clear line and the bench
goes on, the records the sink wrote are counted from its objects, its phases are read from
its log, and no credential is in its configuration; and that whatever fails in it (the
worker, the broker, what it wrote) is its row's one-line reason, with its process group
stopped, while the bench goes on."""

from __future__ import annotations

import datetime
import os
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from hypothesis import given
from hypothesis import strategies as st
from moto import mock_aws

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

import connect_peer  # noqa: E402
import procstat  # noqa: E402
import run  # noqa: E402

from devstack import free_port  # noqa: E402


@given(st.lists(st.integers(min_value=0, max_value=10**9), max_size=50), st.integers(60, 400))
def test_record_ids_finds_every_value_written_back_to_back(ids: list[int], size: int) -> None:
    body = b"".join(run.value_of(i, size) for i in ids)
    assert connect_peer.record_ids(body) == ids


def test_phases_are_read_from_the_worker_log() -> None:
    started = datetime.datetime(2026, 11, 24, 6, 2, 5, 500_000)
    log = (
        "[2026-11-24 06:02:05,781] INFO Kafka Connect worker initializing ... (x)\n"
        "\tsession.timeout.ms = 10000\n"
        "[2026-11-24 06:02:22,550] INFO Kafka Connect started (org.apache.kafka.connect...)\n"
        "[2026-11-24 06:02:27,350] INFO [Consumer clientId=c, groupId=g] Successfully joined "
        "group with generation Generation{generationId=0} (x)\n"
    )
    assert connect_peer.phases(log, started) == (
        "worker started at 17.1 s, task in its group at 21.9 s"
    )
    assert connect_peer.phases("", started) == "worker started at ?, task in its group at ?"


def test_configuration_holds_no_credentials_and_uses_path_style(tmp_path: Path) -> None:
    argv = connect_peer.command(
        tmp_path / "libs",
        tmp_path / "plugins",
        "127.0.0.1:9092",
        "http://127.0.0.1:5000",
        "bench",
        tmp_path / "connect",
        10_000,
    )
    written = "".join(p.read_text() for p in (tmp_path / "connect").glob("*.properties"))
    for text in (" ".join(argv), written):
        assert "accessKey" not in text and "secretKey" not in text and "testing" not in text
    connector = (tmp_path / "connect" / "connector.properties").read_text().splitlines()
    # The dot in the bucket name: the SDK of Camel 3 sends path-style requests. The options
    # are the component's: the URL, parsed once per record, is the bucket alone.
    assert "camel.sink.url=aws2-s3://bench.connect" in connector
    assert "camel.component.aws2-s3.useDefaultCredentialsProvider=true" in connector
    assert "camel.component.aws2-s3.uriEndpointOverride=http://127.0.0.1:5000" in connector
    assert "tasks.max=1" in connector
    worker = (tmp_path / "connect" / "worker.properties").read_text().splitlines()
    assert "consumer.session.timeout.ms=10000" in worker
    assert "plugin.discovery=service_load" in worker
    assert "header.converter=org.apache.kafka.connect.converters.ByteArrayConverter" in worker


def test_jars_are_fetched_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fetched: list[str] = []

    def fake_run(argv: list[str], **_: object) -> object:
        pom = Path(argv[argv.index("-f") + 1])
        out = Path(next(a for a in argv if a.startswith("-DoutputDirectory=")).split("=", 1)[1])
        out.mkdir(parents=True, exist_ok=True)  # as mvn: the directory may exist
        (out / "some.jar").write_bytes(b"")
        fetched.append(pom.read_text())

        class Done:
            returncode, stdout, stderr = 0, "", ""

        return Done()

    monkeypatch.setattr(connect_peer.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(connect_peer.subprocess, "run", fake_run)
    libs, plugins = connect_peer.ensure_jars()
    assert [("connect-runtime" in pom, "camel-aws2-s3" in pom) for pom in fetched] == [
        (True, False),
        (False, True),
    ]
    assert (libs / "some.jar").is_file() and (plugins / "camel-s3-sink" / "some.jar").is_file()
    # The connector's ServiceLoader manifest (plugin.discovery=service_load), in the plugin.
    manifest = plugins / "camel-s3-sink" / "kafka-archive-service-manifest.jar"
    with zipfile.ZipFile(manifest) as jar:
        service = jar.read("META-INF/services/org.apache.kafka.connect.sink.SinkConnector")
    assert service.decode().split() == ["org.apache.camel.kafkaconnector.CamelSinkConnector"]
    assert libs.is_relative_to(tmp_path / "kafka-archive")
    assert connect_peer.ensure_jars() == (libs, plugins)
    assert len(fetched) == 2  # the second call found both in the cache


def test_without_maven_the_bench_records_why_and_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(connect_peer.shutil, "which", lambda tool: None)
    with pytest.raises(connect_peer.ConnectUnavailable, match="Java 17\\+ and Maven"):
        connect_peer.ensure_jars()
    row = run.run_connect_peer("tansu", "b:1", "http://s3", 10, 1000, {}, tmp_path, object())
    assert row.name == run.CONNECT and row.bytes == 0
    assert row.note.startswith("NOT RUN: needs Java 17+ and Maven")
    table = run.render([run.Result("hand-rolled peer", 1.0, 1000, 10), row])
    assert "× Connect" not in table  # no column against a peer that did not run
    assert "NOT RUN" in table


def test_every_row_gets_a_ratio_against_the_connect_peer() -> None:
    rows = [
        run.Result("hand-rolled peer", 10.0, 1000, 10),
        run.Result(run.CONNECT, 40.0, 1000, 10),
        run.Result("kafka-archive JSON", 8.0, 1000, 10),
        run.Result("no-op run (nothing new)", 1.0, 0, 0),
    ]
    lines = run.render(rows).splitlines()
    assert "| × peer | × Connect |" in lines[0]
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in lines]
    assert all(len(row) == len(cells[0]) for row in cells)
    connect = cells[0].index("× Connect")
    assert [row[connect] for row in cells[2:]] == ["4.00", "1.00", "5.00", ""]


# What fails in the peer voids its row, stops its process group and lets the bench go on.
# The worker here is a small Python program standing in for the JVM (same process handling).

_WORKER = """
import os, signal, subprocess, sys, time
child = subprocess.Popen(["sleep", "600"])  # in the worker's process group
print(f"worker {os.getpid()} child {child.pid}", flush=True)
if sys.argv[1] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(600)
"""


def _pids(log: Path) -> list[int]:
    deadline = time.monotonic() + 30
    while "child" not in (text := log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the stand-in worker did not start"
        time.sleep(0.05)
    words = text.split()
    return [int(words[words.index("worker") + 1]), int(words[words.index("child") + 1])]


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True  # dead, not yet reaped by its parent
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def s3() -> Iterator[object]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=connect_peer.BUCKET)
        yield client


@pytest.mark.parametrize("on_sigterm", ["exit", "ignore-term"])
def test_a_broker_that_stops_answering_voids_the_row_and_the_worker_group_is_stopped(
    tmp_path: Path, s3: object, on_sigterm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connect_peer, "FAILED_STOP_GRACE", 1.0)
    # A broker that went away: nothing listens on its port.
    poller = connect_peer.LagPoller(f"127.0.0.1:{free_port()}", "bench", {0: 10}, timeout=0.3)
    log = tmp_path / "worker.log"
    argv = [sys.executable, "-c", _WORKER, on_sigterm]
    seen: list[int] = []

    def lag() -> int | None:
        seen.extend(() if seen else _pids(log))
        return poller.lag()

    done = connect_peer._watch(argv, os.environ, log, lag, 60, 1.0, s3, 10, 1000)
    assert done.usage is not None and not done.valid
    assert done.note.startswith("VOID: lag polling failed for "), done.note
    assert "no answer from the broker within 0.3 s" in done.note
    assert "\n" not in done.note and "|" not in done.note
    # The worker and its child: stopped (SIGTERM, or SIGKILL to the group after the grace).
    assert len(seen) == 2 and all(_gone(pid) for pid in seen)


def test_a_worker_that_exits_voids_the_row_with_its_log(tmp_path: Path, s3: object) -> None:
    program = "print('[t] ERROR no | plugin'); print('[t] INFO stopped'); raise SystemExit(3)"
    argv = [sys.executable, "-c", program]
    done = connect_peer._watch(argv, os.environ, tmp_path / "w.log", lambda: None, 60, 60, s3, 1, 1)
    assert done.note.startswith("VOID: the worker exited before its lag was zero (lag None)")
    # The log's last ERROR line, not its last line; no "|" to break the table.
    assert done.note.endswith("(exit 3); worker log: [t] ERROR no / plugin"), done.note


def test_a_worker_that_cannot_start_is_not_run(tmp_path: Path, s3: object) -> None:
    argv = [str(tmp_path / "no-java")]
    done = connect_peer._watch(argv, os.environ, tmp_path / "w.log", lambda: 0, 60, 60, s3, 1, 1)
    assert done.usage is None
    assert done.note.startswith("NOT RUN: the worker did not start: FileNotFoundError")


def test_a_lag_that_stays_is_a_timeout(tmp_path: Path, s3: object) -> None:
    argv = [sys.executable, "-c", "import time; time.sleep(600)"]
    done = connect_peer._watch(argv, os.environ, tmp_path / "w.log", lambda: 5, 0.5, 60, s3, 1, 1)
    assert done.note.startswith("VOID: lag not zero after 0 s (lag 5)"), done.note


@pytest.mark.parametrize(
    ("objects", "why"),
    [
        ([b'{"id": 0, "x": 1}{"id": 1, "x": 1}'], "every record once"),
        ([b'{"id": 0, "x": 1}'], "VOID: 17 of 34 bytes in S3"),
        ([b'{"id": 0, "x": 1}{"id": 0, "x": 1}'], "VOID: 2 records in S3 (1 distinct) of 2"),
    ],
)
def test_what_the_sink_wrote_is_checked(
    tmp_path: Path, s3: object, objects: list[bytes], why: str
) -> None:
    for n, body in enumerate(objects):
        s3.put_object(Bucket=connect_peer.BUCKET, Key=f"connect/{n}", Body=body)  # type: ignore[attr-defined]
    argv = [sys.executable, "-c", "import time; time.sleep(600)"]
    done = connect_peer._watch(argv, os.environ, tmp_path / "w.log", lambda: 0, 60, 60, s3, 2, 34)
    assert why in done.note and done.valid == (why == "every record once")


def test_a_broker_down_before_the_start_is_a_not_run_row(
    tmp_path: Path, s3: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connect_peer, "ensure_jars", lambda: (tmp_path, tmp_path))
    monkeypatch.setattr(connect_peer, "_BROKER_TIMEOUT", 0.5)
    broker = f"127.0.0.1:{free_port()}"
    row = run.run_connect_peer("kafka", broker, "http://s3", 10, 1000, {}, tmp_path, s3)
    assert row.name == run.CONNECT and row.bytes == 0
    assert row.note.startswith("NOT RUN: could not prepare its run: KafkaException"), row.note


def test_a_void_run_has_no_throughput_and_no_connect_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    usage = procstat.Usage(30.0, 12.0, 10**9, -15, sampled_by_name={"java": 12.0})
    void = connect_peer.ConnectRun(usage, "VOID: lag not zero after 30 s (lag 5)")
    monkeypatch.setattr(connect_peer, "run", lambda *a, **k: void)
    row = run.run_connect_peer("kafka", "b:1", "http://s3", 10, 1000, {}, tmp_path, object())
    assert (row.seconds, row.cpu_seconds, row.bytes, row.mb_s) == (30.0, 12.0, 0, 0.0)
    assert row.note.startswith("VOID: lag not zero")
    table = run.render([run.Result("hand-rolled peer", 1.0, 1000, 10), row])
    assert "× Connect" not in table and "VOID: lag not zero" in table

    def defect(*_: object, **__: object) -> object:
        raise KeyError("ends")

    monkeypatch.setattr(connect_peer, "run", defect)
    row = run.run_connect_peer("kafka", "b:1", "http://s3", 10, 1000, {}, tmp_path, object())
    assert row.note == "VOID: KeyError: 'ends'" and row.bytes == 0

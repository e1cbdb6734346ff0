"""The Kafka Connect peer of the benchmark (``bench/connect_peer.py``): what can be checked
without a JVM — the jars are fetched once, a missing Maven is one clear line and the bench
goes on, the records the sink wrote are counted from its objects, its phases are read from
its log, and no credential is in its configuration."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

import connect_peer  # noqa: E402
import run  # noqa: E402


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
    connector = (tmp_path / "connect" / "connector.properties").read_text()
    # The dot in the bucket name: the SDK of Camel 3 sends path-style requests.
    assert "camel.sink.url=aws2-s3://bench.connect?" in connector
    assert "useDefaultCredentialsProvider=true" in connector
    assert "tasks.max=1" in connector
    worker = (tmp_path / "connect" / "worker.properties").read_text()
    assert "consumer.session.timeout.ms=10000" in worker


def test_jars_are_fetched_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fetched: list[str] = []

    def fake_run(argv: list[str], **_: object) -> object:
        pom = Path(argv[argv.index("-f") + 1])
        out = Path(next(a for a in argv if a.startswith("-DoutputDirectory=")).split("=", 1)[1])
        out.mkdir(parents=True)
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

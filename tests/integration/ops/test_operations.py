"""Operator outputs of `run`: --report, --metrics-file, --reset-state; and bounded runs."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, archived_ids, run_args, run_here
from prometheus_client.parser import text_string_to_metric_families

from kafka_archive.cli import main

pytestmark = pytest.mark.integration


def test_run_from_a_plain_shell_runs_spark_workers_on_its_own_python(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    tmp_path: Path,
) -> None:
    """No PYSPARK_PYTHON and a `python3` on PATH without kafka-archive (pipx, a venv not
    activated): the workers must still run kafka-archive's own interpreter. The run shows
    one line per finished partition on stderr (not a terminal), and none of Spark's
    start-up chatter."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 200)
    decoy = tmp_path / "bin"
    decoy.mkdir()
    (decoy / "python3").write_text("#!/bin/sh\necho 'not the python of kafka-archive'\nexit 3\n")
    (decoy / "python3").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env.update(PATH=f"{decoy}:{env.get('PATH', '')}", SPARK_LOCAL_IP="127.0.0.1")
    command = [
        KAFKA_ARCHIVE,
        *run_args(f"INSERT INTO {bkt}:arch SELECT * FROM {name}", broker, s3_endpoint),
        "--master",
        "local[2]",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert archived_ids(s3_client, bkt) == list(range(200))
    for partition in (0, 1):
        assert f"{name}[{partition}]: offsets 0..99: 100 records" in done.stderr
    assert "Setting default log level" not in done.stderr
    assert "WARN" not in done.stderr  # nor the JVM's incubator-module warning


def test_a_terminal_gets_a_live_progress_display(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """On a terminal, `run` draws units done / total, records, MB/s and what is left to
    read while Spark works, and prints each finished partition above the display."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 400)
    command = [
        KAFKA_ARCHIVE,
        *run_args(f"INSERT INTO {bkt}:arch SELECT * FROM {name}", broker, s3_endpoint),
        "--master",
        "local[1]",
    ]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "COLUMNS": "120", "TERM": "xterm"}
    leader, follower = pty.openpty()
    process = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    screen = b""
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the program closed the terminal
            break
        if not data:
            break
        screen += data
    os.close(leader)
    assert process.wait(timeout=60) == 0, screen.decode(errors="replace")
    text = screen.decode(errors="replace")
    assert "\x1b[" in text  # drawn with terminal control sequences
    assert "units 0/2" in text and "to read 400" in text
    for partition in (0, 1):
        assert f"{name}[{partition}]: offsets 0..199: 200 records" in text
    assert "total: 400 records" in text


def test_report_and_metrics_describe_the_run_without_secrets(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 300)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")  # moto accepts any secret
    report, metrics = tmp_path / "out" / "report.json", tmp_path / "out" / "archive.prom"
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 100"
    started = time.time()
    code = main(
        [
            *run_args(kcql, broker, s3_endpoint),
            "-X",
            "sasl.password=hunter2",
            "--report",
            str(report),
            "--metrics-file",
            str(metrics),
        ]
    )
    assert code == 0, capsys.readouterr().err

    document = json.loads(report.read_text())
    assert document["ok"] is True and document["records"] == 300
    by_partition = {p["partition"]: p for p in document["partitions"]}
    assert {p: (v["start_offset"], v["next_offset"]) for p, v in by_partition.items()} == {
        0: (0, 150),
        1: (0, 150),
    }
    assert [o["first_offset"] for o in by_partition[0]["objects"]] == [0, 100]

    text = metrics.read_text()
    assert "# TYPE kafka_archive_last_run_success gauge" in text
    # Read by Prometheus' parser: the run's end to the millisecond (it was rounded to 6
    # digits, 1.79575e+09: up to ~80 minutes off), the bytes as S3 has them.
    samples = {
        (s.name, s.labels.get("partition")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert started <= samples[("kafka_archive_last_run_timestamp_seconds", None)] <= time.time()
    stored = sum(
        o["Size"]
        for o in s3_client.list_objects_v2(Bucket=bkt, Prefix="arch/")["Contents"]
        if "/.kafka-archive/" not in o["Key"]
    )
    assert (
        samples[("kafka_archive_run_bytes", "0")] + samples[("kafka_archive_run_bytes", "1")]
        == stored
    )
    labels = f'job="{document["job"]}",topic="{name}"'
    assert f'kafka_archive_run_records{{{labels},partition="1"}} 150' in text
    assert f'kafka_archive_lag_records{{{labels},partition="0"}} 0' in text
    for output in (report.read_text(), text, *capsys.readouterr()):
        assert "hunter2" not in output and "testing" not in output


def test_reset_state_starts_over_from_start_and_asks_first(
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
    produce(name, 100)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name}"
    args = run_args(kcql, broker, s3_endpoint)
    assert main(args) == 0
    assert sorted(archived_ids(s3_client, bkt)) == list(range(100))
    capsys.readouterr()

    # Without --yes and without a terminal to answer, nothing is reset and nothing runs.
    assert main([*args, "--reset-state"]) == 2
    out, err = capsys.readouterr()
    assert "pass --yes" in err and out == ""

    produce(name, 20, first=100)
    assert main([*args, "--reset-state", "--yes", "--start", "latest"]) == 0
    out, err = capsys.readouterr()
    assert "reset job" in err
    # From latest: the 20 new records are not archived again (they were before "latest"),
    # and the earlier objects are untouched.
    assert "total: 0 records" in out
    produce(name, 10, first=120)
    assert main(args) == 0
    assert sorted(archived_ids(s3_client, bkt)) == list(range(100)) + list(range(120, 130))


def test_max_records_per_partition_bounds_a_run_and_the_next_resumes(
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
    produce(name, 100)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name}"
    args = run_args(kcql, broker, s3_endpoint)
    assert main([*args, "--max-records-per-partition", "20"]) == 0
    assert sorted(archived_ids(s3_client, bkt)) == list(range(40))
    assert main(args) == 0
    assert sorted(archived_ids(s3_client, bkt)) == list(range(100))


def test_from_star_archives_the_topics_a_regex_selects(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    first, second, other = (topic(partitions=2) for _ in range(3))
    bkt = bucket()
    for name in (first, second, other):
        produce(name, 10)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM `*`"
    args = run_args(kcql, broker, s3_endpoint, command=None)
    assert main(["run", *args]) == 2
    assert "none is given" in capsys.readouterr().err
    regex = f"({first}|{second})"
    assert main(["run", *args, "--topics-regex", regex]) == 0, capsys.readouterr().err
    keys = [item["Key"] for item in s3_client.list_objects_v2(Bucket=bkt)["Contents"]]
    archived = {key.split("/")[1] for key in keys if "/.kafka-archive/" not in key}
    assert archived == {first, second}
    capsys.readouterr()
    assert main(["status", *args, "--topics-regex", regex, "--output", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["partitions"]
    assert sorted((r["topic"], r["lag"]) for r in rows) == sorted(
        (t, 0) for t in (first, second) for _ in range(2)
    )


def test_log_format_json_and_quiet(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 20)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name}"
    args = run_args(kcql, broker, s3_endpoint)
    assert main(["--log-format", "json", *args]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert lines and all({"time", "level", "logger", "message"} <= set(d) for d in lines)
    assert any("with Spark" in d["message"] for d in lines)
    produce(name, 20, first=20)
    assert main(["--quiet", *args]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "total: 20 records" in out


def test_status_reports_what_was_produced_and_archived_and_alerts_on_lag(
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
    produce(name, 60)  # 30 records per partition
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.count'=8)"
    args = run_args(kcql, broker, s3_endpoint, command=None)

    def status(*extra: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["status", *args, *extra])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = status("--output", "json", "--max-lag", "30")
    assert code == 0
    rows = json.loads(out)["partitions"]  # nothing archived yet: the whole partition lags
    assert [(r["archived_offset"], r["end_offset"], r["lag"], r["objects"]) for r in rows] == [
        (None, 30, 30, 0),
        (None, 30, 30, 0),
    ]
    assert main(["run", *args, "--max-records-per-partition", "20"]) == 0
    code, out, err = status("--output", "json", "--max-lag", "9")
    assert code == 1 and err.strip() == "kafka-archive: lag 10 exceeds --max-lag 9"
    rows = json.loads(out)["partitions"]
    for row in rows:
        listing = s3_client.list_objects_v2(Bucket=bkt, Prefix=f"arch/{name}/{row['partition']}/")[
            "Contents"
        ]
        assert (row["topic"], row["archived_offset"], row["end_offset"], row["lag"]) == (
            name,
            20,
            30,
            10,
        )
        assert row["objects"] == len(listing) == 3  # 8 + 8 + 4 records
        assert row["bytes"] == sum(item["Size"] for item in listing)
        assert row["last_commit"].endswith("Z")
    code, out, _ = status("--max-lag", "10")  # text: one line per partition
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"job {json.loads(status('--output', 'json')[1])['job']}"
    for partition in (0, 1):
        (line,) = [line for line in lines if line.split()[0] == f"{name}-{partition}"]
        assert line.split()[1:6] == ["20", "30", "10", "3", str(rows[partition]["bytes"])]


@pytest.mark.parametrize("java", ["missing", "exits"])
def test_spark_that_cannot_start_is_one_clear_line_and_exit_15(
    java: str,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    tmp_path: Path,
) -> None:
    """No Java, or a JVM that dies at start: not an internal error with a traceback."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 5)
    home = tmp_path / "jdk"
    if java == "exits":
        (home / "bin").mkdir(parents=True)
        (home / "bin" / "java").write_text(
            "#!/bin/sh\necho 'Error: could not create the Java Virtual Machine.' >&2\nexit 1\n"
        )
        (home / "bin" / "java").chmod(0o755)
    env = {**os.environ, "JAVA_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    command = [
        KAFKA_ARCHIVE,
        *run_args(f"INSERT INTO {bkt}:arch SELECT * FROM {name}", broker, s3_endpoint),
        "--master",
        "local[1]",
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 15, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("kafka-archive: error:")]
    assert ("no bin/java" if java == "missing" else "JVM exited before it started") in line
    assert archived_ids(s3_client, bkt) == []
    # The lock was released: the next run (in this process, on the session's Spark and its
    # JVM) archives everything.
    assert run_here(command) == 0
    assert archived_ids(s3_client, bkt) == list(range(5))

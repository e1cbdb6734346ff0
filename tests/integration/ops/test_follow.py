"""Continuous mode and start positions: `run --follow` archives what arrives while it runs
and exits 0 on SIGTERM with every record exactly once; `--start latest`, a timestamp and
`group:` pick where a job without state begins, and a job with state ignores --start."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, archived_ids, process_group, run_args, run_here
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from faultproxy import FaultProxy
from prometheus_client.parser import text_string_to_metric_families

from kafka_archive.archiver.plan.naming import group_for, job_name_for
from kafka_archive.cli import main
from kafka_archive.kcql import parse

pytestmark = pytest.mark.integration

# How long a wait for a run's progress may take: they poll, so a passing test never waits it
# out; generous, for a machine under heavy load (Spark's start alone took a minute there, and
# on one core beside a CPU burner at load 30 a first batch took more than 300 s).
DEADLINE = 600


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def scrape(port: int) -> dict[str, float]:
    """/metrics parsed by Prometheus' own parser: sample name -> value (labels dropped)."""
    code, text = get(port, "/metrics")
    assert code == 200, text
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def spark_processes(root: int) -> tuple[set[int], set[int]]:
    """Under process ``root`` (a kafka-archive run): the pids of Spark's JVM, and of the
    Python processes it started (the worker daemon and the workers it forked)."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    head, tail = f.read().rsplit(")", 1)
            except OSError:
                continue
            children.setdefault(int(tail.split()[1]), []).append(int(entry))
            names[int(entry)] = head.split("(", 1)[1]
    jvms = {pid for pid in children.get(root, []) if names.get(pid) == "java"}
    pythons: set[int] = set()
    todo = [child for jvm in jvms for child in children.get(jvm, [])]
    while todo:
        pid = todo.pop()
        pythons.add(pid)
        todo.extend(children.get(pid, []))
    return jvms, pythons


def test_follow_rides_out_an_s3_outage_and_counts_it(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """S3 answers nothing but 503 for a while: --follow keeps running, counts the failed
    batches in kafka_archive_errors_total, /health turns 503 once no batch has succeeded
    for --health-max-age, and when S3 is back every record is archived exactly once."""
    name, bkt = topic(partitions=1), bucket()
    produce(name, 50, partitions=1)
    port = free_port()
    with FaultProxy(s3_endpoint, rate=0.0, seed=3) as proxy:
        kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 10"
        command = [
            KAFKA_ARCHIVE,
            *run_args(kcql, broker, proxy.url),
            "--follow",
            "--poll-interval",
            "0.3",
            "--master",
            "local[1]",
            "--metrics-port",
            str(port),
            "--health-max-age",
            "4",
        ]
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "KAFKA_ARCHIVE_S3_MAX_ATTEMPTS": "2"}
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            deadline = time.monotonic() + DEADLINE
            while archived_ids(s3_client, bkt) != list(range(50)):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "first wave not archived"
                time.sleep(0.3)
            proxy.fail_all = True
            produce(name, 30, first=50, partitions=1)
            deadline = time.monotonic() + DEADLINE
            while (
                get(port, "/health")[0] != 503
                or scrape(port).get("kafka_archive_errors_total", 0) < 1
            ):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "no failed batch counted, or no 503"
                time.sleep(0.3)
            proxy.fail_all = False
            deadline = time.monotonic() + DEADLINE  # the back-off doubles: up to ~10 s here
            while archived_ids(s3_client, bkt) != list(range(80)) or get(port, "/health")[0] != 200:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "not archived after the outage"
                time.sleep(0.3)
            metrics = scrape(port)
            assert metrics["kafka_archive_records_total"] == 80
            assert metrics["kafka_archive_s3_retries_total"] >= 1
            assert metrics["kafka_archive_last_commit_age_seconds"] < 60
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=DEADLINE)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, err
    assert "batch failed:" in err and "trying again in" in err
    assert archived_ids(s3_client, bkt) == list(range(80))


def test_follow_archives_while_running_and_stops_cleanly_on_sigterm(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 100)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Objects roll at 1000 records, or once their first record is 1 s old (an open object
    # is held back until then, so --follow does not write a crop of small files).
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} "
        "PROPERTIES('flush.count'=1000, 'flush.interval'=1)"
    )
    command = [
        KAFKA_ARCHIVE,
        *run_args(kcql, broker, s3_endpoint),
        "--follow",
        "--poll-interval",
        "0.5",
        "--master",
        "local[1]",
        "--metrics-port",
        str(port),
        "--health-max-lag",
        "0",
    ]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lagging: list[str] = []  # /health bodies seen while a wave was produced, not archived
    # After each wave: Spark's JVM, and the Python processes it started.
    spark: list[tuple[set[int], set[int]]] = []
    try:
        for wave in range(3):  # records produced while it runs are archived in later batches
            expected = list(range(100 + 50 * wave))
            deadline = time.monotonic() + DEADLINE
            while archived_ids(s3_client, bkt) != expected:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, f"wave {wave} not archived"
                if wave > 0:
                    code, body = get(port, "/health")
                    if code == 503:
                        lagging.append(body)
                time.sleep(0.1)
            spark.append(spark_processes(process.pid))
            produce(name, 50, first=100 + 50 * wave)
        # A wave is held back for a second (flush.interval): a batch ends in between and
        # reports its lag, past --health-max-lag 0.
        assert any(body.startswith("unhealthy: lag ") for body in lagging), lagging
        # /metrics and /health: healthy once the last wave is archived (lag 0).
        deadline = time.monotonic() + DEADLINE
        while archived_ids(s3_client, bkt) != list(range(250)) or get(port, "/health")[0] != 200:
            assert time.monotonic() < deadline, get(port, "/health")
            time.sleep(0.3)
        code, metrics = get(port, "/metrics")
        assert code == 200 and "kafka_archive_lag_records{job=" in metrics
        assert f'topic="{name}",partition="1"}} 0' in metrics
        # The session's S3 requests by type (issue 38): every object a PUT at least, with
        # its state commit; listings and reads; their price at the list prices.
        families = {f.name: f.samples for f in text_string_to_metric_families(metrics)}
        requests = {s.labels["type"]: s.value for s in families["kafka_archive_s3_requests"]}
        (objects,) = (s.value for s in families["kafka_archive_objects"])
        assert objects >= 2 and requests["PUT"] >= 2 * objects, (objects, requests)
        assert requests["LIST"] > 0 and requests["GET"] + requests["HEAD"] > 0, requests
        assert set(requests) == {"PUT", "COPY", "POST", "LIST", "GET", "HEAD", "DELETE", "OTHER"}
        (cost,) = (s.value for s in families["kafka_archive_s3_cost_usd"])
        tier1 = sum(requests[k] for k in ("PUT", "COPY", "POST", "LIST"))
        tier2 = sum(requests[k] for k in ("GET", "HEAD", "OTHER"))
        assert cost == pytest.approx((tier1 * 0.005 + tier2 * 0.0004) / 1000)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert "SIGTERM: finishing the current batch" in err
    assert "stopped after" in out
    assert re.search(r"stopped after .*\nS3: \d+ requests \(\d+ PUT, .*\), est\. \$", out), out
    assert archived_ids(s3_client, bkt) == list(range(250))
    # One SparkContext and the same Python workers for every batch: the JVM is the one the
    # first batch started, and no Python process was started after the first batch.
    (jvm, workers), *later = spark
    assert len(jvm) == 1 and workers, spark
    for jvms, pythons in later:
        assert jvms == jvm, spark
        assert pythons <= workers, spark
    # Each batch that archived says where its time went (the overhead beside the work).
    batches = re.findall(r"time: plan [0-9.]+ s, Spark job .*; overhead [0-9.]+ s", out)
    assert len(batches) >= 3, out
    assert all("Spark started" not in line for line in batches[1:]), out
    # The consumer group mirrors the commits, for lag tools.
    group = group_for(job_name_for(parse(kcql)))
    reader = Consumer({"bootstrap.servers": broker, "group.id": group})
    try:
        committed = reader.committed([KafkaTopicPartition(name, p) for p in (0, 1)], timeout=30)
    finally:
        reader.close()
    assert [c.offset for c in committed] == [125, 125]


def test_start_positions_for_a_job_without_state(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name = topic(partitions=2)
    base = 1_700_000_000_000
    produce(name, 40, timestamp=base)  # record i at base + i ms

    def run(bkt: str, *extra: str) -> int:
        kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name}"
        return main(
            [
                *run_args(kcql, broker, s3_endpoint),
                *extra,
            ]
        )

    latest = bucket()
    assert run(latest, "--start", "latest") == 0
    assert archived_ids(s3_client, latest) == []
    produce(name, 10, first=40, timestamp=base)
    assert run(latest, "--start", "earliest") == 0  # the job has state: --start is ignored
    assert archived_ids(s3_client, latest) == list(range(40, 50))

    # group:<g> adopts a consumer group's committed offsets (a migrated Connect sink's).
    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"connect-{name}"})
    consumer.commit(
        offsets=[KafkaTopicPartition(name, 0, 10), KafkaTopicPartition(name, 1, 5)],
        asynchronous=False,
    )
    consumer.close()
    adopted = bucket()
    assert run(adopted, "--start", f"group:connect-{name}") == 0
    # Partition 0 holds even ids (offset o is id 2o), partition 1 odd ids (id 2o + 1).
    expected = [2 * o for o in range(10, 25)] + [2 * o + 1 for o in range(5, 25)]
    assert archived_ids(s3_client, adopted) == sorted(expected)


def test_start_at_a_time_begins_at_the_first_record_at_or_after_it(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 50, timestamp=1_700_000_000_000)  # record i at base + i ms
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name}"
    assert main(run_args(kcql, broker, s3_endpoint, "--start", "2023-11-14T22:13:20.030Z")) == 0
    assert archived_ids(s3_client, bkt) == list(range(30, 50))


def test_a_sigterm_to_the_whole_process_group_is_one_clear_line(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """A SIGTERM to the process group (systemd's default KillMode, `kill -TERM -PGID`) also
    reaches Spark's JVM, which exits at once: a run that needed it says so in one line, with
    what to do (exit 21), not an internal error or a py4j traceback; one that was between
    batches stops (exit 0). Either way the next run is exactly once."""
    name, bkt = topic(partitions=1), bucket()
    produce(name, 20, partitions=1)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 10"
    command = [KAFKA_ARCHIVE, *run_args(kcql, broker, s3_endpoint, "--master", "local[1]")]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    with process_group([*command, "--follow", "--poll-interval", "0.3"], env) as process:
        deadline = time.monotonic() + DEADLINE
        while archived_ids(s3_client, bkt) != list(range(20)):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "not archived"
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGTERM)
        _, err = process.communicate(timeout=DEADLINE)
    assert "internal error" not in err and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("kafka-archive: error: ")]
    if process.returncode != 0:
        assert process.returncode == 21, err
        assert len(lines) == 1 and "Spark's JVM stopped" in lines[0], err
    else:
        assert not lines, err
    produce(name, 10, first=20, partitions=1)
    assert run_here(command) == 0  # the next run: in this process, on the session's Spark
    assert archived_ids(s3_client, bkt) == list(range(30))


def exited(pid: int) -> bool:
    """Whether process ``pid`` has exited (gone, or a zombie its parent has not reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_a_sigterm_to_the_process_group_between_batches_stops_it_with_exit_0(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """Between batches, a SIGTERM to the process group stops the run cleanly (exit 0, no
    error line), also when Spark's JVM, which the group's SIGTERM reaches too, has already
    exited by the time the run stops: the run no longer needed it. (Stopping that JVM's
    context failed: exit 21, "Spark's JVM stopped while the run was using it", whenever the
    JVM was quicker than the driver.)"""
    name, bkt = topic(partitions=1), bucket()
    produce(name, 20, partitions=1)
    port = free_port()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 10"
    command = [
        KAFKA_ARCHIVE,
        *run_args(kcql, broker, s3_endpoint, "--master", "local[1]"),
        "--follow",
        "--poll-interval",
        "0.3",
        "--metrics-port",
        str(port),
    ]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    with process_group(command, env) as process:
        deadline = time.monotonic() + DEADLINE
        # The metrics are updated once a batch has ended: the one that archived is done.
        while (
            get(port, "/metrics")[0] != 200 or scrape(port).get("kafka_archive_records_total") != 20
        ):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "not archived"
            time.sleep(0.2)
        jvms, _ = spark_processes(process.pid)
        assert len(jvms) == 1, jvms
        # The group's SIGTERM as the JVM may take it: first, its shutdown hooks, its exit.
        (jvm,) = jvms
        os.kill(jvm, signal.SIGTERM)
        deadline = time.monotonic() + DEADLINE
        while not exited(jvm):
            assert time.monotonic() < deadline, "Spark's JVM did not exit on SIGTERM"
            time.sleep(0.1)
        os.killpg(process.pid, signal.SIGTERM)
        out, err = process.communicate(timeout=DEADLINE)
    assert process.returncode == 0, err
    assert "kafka-archive: error" not in err and "Traceback" not in err, err
    assert "RuntimeWarning" not in err, err
    assert "stopped after" in out
    assert archived_ids(s3_client, bkt) == list(range(20))


def test_a_sigterm_to_the_process_group_while_spark_starts_is_the_jvm_stopped(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """A SIGTERM to the process group while Spark's JVM starts (the first batch with work)
    ends that JVM before it serves: one line, Spark's JVM stopped (exit 21), as for a batch
    in flight, not a failed start with advice about Java (exit 15); nothing is archived."""
    name, bkt = topic(partitions=1), bucket()
    produce(name, 20, partitions=1)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 10"
    command = [
        KAFKA_ARCHIVE,
        *run_args(kcql, broker, s3_endpoint, "--master", "local[1]"),
        "--follow",
        "--poll-interval",
        "0.3",
    ]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    with process_group(command, env) as process:
        deadline = time.monotonic() + DEADLINE
        while not spark_processes(process.pid)[0]:  # Spark's launcher became its JVM
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "Spark's JVM was not started"
            time.sleep(0.02)
        os.killpg(process.pid, signal.SIGTERM)
        _, err = process.communicate(timeout=DEADLINE)
    assert "internal error" not in err and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("kafka-archive: error: ")]
    assert process.returncode == 21, err
    assert len(lines) == 1 and "Spark's JVM stopped" in lines[0], err
    assert archived_ids(s3_client, bkt) == []

"""`/health` of `run --follow --metrics-port`: 200 while fresh and caught up, 503 otherwise;
`/` (the status page) and `/status.json`, and the failed batches the page keeps."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kafka_archive.archiver.commands.metrics_server import ERRORS_KEPT, MetricsServer
from kafka_archive.archiver.commands.status import JobStatus, PartitionStatus
from kafka_archive.archiver.commands.status_page import JobLine, RouteLine
from kafka_archive.archiver.config.secrets import remember
from kafka_archive.archiver.core.errors import (
    ConfigError,
    KafkaUnavailableError,
    S3UnavailableError,
)
from kafka_archive.archiver.core.model import RunResult, TopicPartition, UnitResult


def _get(server: MetricsServer, path: str) -> tuple[int, str]:
    url = f"http://127.0.0.1:{server.port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _batch() -> RunResult:
    unit = UnitResult(0, TopicPartition("orders", 0), 0, 10, 10, 1000, (), 1.0)
    return RunResult("job-1", "run", (unit,), (), 1.0)


def _status(*lags: int) -> JobStatus:
    return JobStatus(
        "job-1",
        tuple(
            PartitionStatus("orders", p, 100 - lag, 100, lag, None, 1, 10)
            for p, lag in enumerate(lags)
        ),
    )


@pytest.fixture
def server() -> Iterator[MetricsServer]:
    running = MetricsServer(0, max_age=60, max_lag=100, host="127.0.0.1").start()
    yield running
    running.stop()


def test_health_turns_503_when_any_partition_lags_past_the_threshold(
    server: MetricsServer,
) -> None:
    server.update(_batch(), _status(0, 100))  # at the threshold: still healthy
    assert _get(server, "/health") == (200, "ok\n")
    server.update(_batch(), _status(0, 101))
    code, body = _get(server, "/health")
    assert (code, body) == (503, "unhealthy: lag 101 records (limit 100)\n")
    server.update(_batch(), _status(3, 2))  # caught up again
    assert _get(server, "/health")[0] == 200


def test_a_failed_batch_keeps_the_last_known_lag(server: MetricsServer) -> None:
    server.update(_batch(), _status(500))
    server.update(_batch(), None, ok=False)
    assert _get(server, "/health")[0] == 503


def test_health_turns_503_when_no_batch_finished_within_max_age() -> None:
    server = MetricsServer(0, max_age=0.2, max_lag=None, host="127.0.0.1").start()
    try:
        assert _get(server, "/health")[0] == 200  # just started: within max_age
        time.sleep(0.3)
        code, body = _get(server, "/health")
        assert code == 503 and body.startswith("unhealthy: start without a micro-batch")
        server.update(_batch(), _status(10**9))  # no max_lag: any lag is healthy
        assert _get(server, "/health")[0] == 200
    finally:
        server.stop()


def test_metrics_serves_the_last_batch_and_unknown_paths_404(server: MetricsServer) -> None:
    assert _get(server, "/metrics") == (200, "# no micro-batch has finished yet\n")
    server.update(_batch(), _status(7))
    code, text = _get(server, "/metrics")
    assert code == 200
    assert 'kafka_archive_lag_records{job="job-1",topic="orders",partition="0"} 7' in text
    assert _get(server, "/nope")[0] == 404


def test_a_port_in_use_is_one_line_not_an_internal_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        with pytest.raises(ConfigError) as caught:
            MetricsServer(port, max_age=60, max_lag=None, host="127.0.0.1")
    assert caught.value.exit_code == 2 and f"port {port}" in str(caught.value)
    assert "--metrics-port" in str(caught.value)


def test_metrics_are_exact_past_six_significant_digits(server: MetricsServer) -> None:
    """`/metrics` read by Prometheus' parser: a byte count and an offset past 999,999 and
    the time of the batch come out as they are, not rounded to 6 digits."""
    big = 1_234_567_891
    unit = UnitResult(0, TopicPartition("orders", 0), 0, 12_345_678, 12_345_678, big, (), 1.0)
    status = JobStatus(
        "job-1", (PartitionStatus("orders", 0, 12_345_678, 12_345_679, 1, None, 1, big),)
    )
    before = time.time()
    server.update(RunResult("job-1", "run", (unit,), (), 1.0), status)
    after = time.time()
    code, body = _get(server, "/metrics")
    assert code == 200
    samples = {
        (s.name, s.labels.get("partition")): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("kafka_archive_run_bytes", "0")] == big
    assert samples[("kafka_archive_bytes_total", None)] == big
    assert samples[("kafka_archive_archived_offset", "0")] == 12_345_678
    assert samples[("kafka_archive_run_records", "0")] == 12_345_678
    assert before <= samples[("kafka_archive_last_run_timestamp_seconds", None)] <= after


def _fetch(server: MetricsServer, path: str) -> tuple[int, str, str]:
    """Status, Content-Type and body of ``path``."""
    url = f"http://127.0.0.1:{server.port}{path}"
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.headers["Content-Type"], response.read().decode()


def test_slash_is_the_status_page_and_status_json_its_data() -> None:
    job = JobLine("job-1", (RouteLine("orders", "b:arch", "JSON"),), time.time())
    server = MetricsServer(0, max_age=60, max_lag=None, host="127.0.0.1", job=job).start()
    try:
        code, kind, body = _fetch(server, "/")
        assert (code, kind) == (200, "text/html; charset=utf-8")
        assert "no micro-batch has finished" in body
        server.update(_batch(), _status(7))
        code, kind, body = _fetch(server, "/status.json")
        assert (code, kind) == (200, "application/json")
        document = json.loads(body)
        assert document["job"]["name"] == "job-1" and document["batches"] == 1
        assert [(p["topic"], p["lag"]) for p in document["partitions"]] == [("orders", 7)]
        assert document["last_archived"]["records"] == 10
        assert _fetch(server, "/")[2].count("<table") >= 3
    finally:
        server.stop()


def test_a_failed_batch_is_kept_as_one_scrubbed_line_in_a_bounded_ring(
    server: MetricsServer,
) -> None:
    remember(["hunter2-is-secret"])
    server.failed(S3UnavailableError("S3 refused\nthe key hunter2-is-secret", hint="wait"))
    (error,) = json.loads(_fetch(server, "/status.json")[2])["errors"]
    assert error["kind"] == "S3UnavailableError"
    assert error["message"] == "S3 refused the key ***. wait"
    for n in range(ERRORS_KEPT + 5):
        server.failed(KafkaUnavailableError(f"no broker {n}"))
    errors = json.loads(_fetch(server, "/status.json")[2])["errors"]
    assert len(errors) == ERRORS_KEPT
    assert errors[0]["message"] == f"no broker {ERRORS_KEPT + 4}"  # newest first
    metrics = _get(server, "/metrics")[1]
    assert "hunter2" not in metrics

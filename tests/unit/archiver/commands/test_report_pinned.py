"""The metrics text and the JSON report of a rich run, byte for byte as they were before the
metrics became one table (issue 36): the golden files were written by the code of that
time (``fixtures/``), and any change to a name, help text, label, order or number format
fails here. (Issue 38 added the S3 requests and their cost: lines added, none changed.)"""

from __future__ import annotations

import json
from pathlib import Path

from kafka_archive.archiver.commands.report import ServiceTotals, prometheus_text, report_json
from kafka_archive.archiver.commands.status import JobStatus, PartitionStatus
from kafka_archive.archiver.core.model import (
    BatchTimings,
    Gap,
    ObjectWritten,
    PartitionSkip,
    RunResult,
    S3Requests,
    TopicPartition,
    UnitResult,
)

FIXTURES = Path(__file__).parent / "fixtures"
NOW = 1_795_751_234.567891


def rich_result() -> RunResult:
    """Two topics, three partitions, objects, refused records, a skip, two gaps, timings and
    label values that need escaping."""
    units = (
        UnitResult(
            0,
            TopicPartition("orders", 0),
            0,
            1_234_567,
            1_234_567,
            1_234_567_891,
            (
                ObjectWritten("arch/orders/0/000000000000.json", 0, 999, 1000, 65_536),
                ObjectWritten("arch/orders/0/000000001000.json", 1000, 1_234_566, 1_233_567, 9),
            ),
            12.345678,
            skipped_records=3,
            dead_letters=4,
            dead_letter_key="arch/dead/orders/0.json",
            s3_retries=2,
            s3_requests=S3Requests.of({"PUT": 5, "POST": 2, "GET": 1}),
        ),
        UnitResult(0, TopicPartition("orders", 1), 7, 7, 0, 0, (), 0.0),
        UnitResult(
            1,
            TopicPartition('we"ird\\topic\nname', 2),
            10,
            20,
            10,
            100,
            (ObjectWritten("x/2/10.avro", 10, 19, 10, 100),),
            0.1 + 0.2,
            s3_retries=1,
            s3_requests=S3Requests.of({"PUT": 2}),
        ),
    )
    return RunResult(
        "job-1",
        "run-42",
        units,
        (PartitionSkip(0, TopicPartition("orders", 3), 55, "locked by another run"),),
        3_601.123456789,
        gaps=(
            Gap(0, TopicPartition("orders", 0), 5, 9, True),
            Gap(1, TopicPartition('we"ird\\topic\nname', 2), 0, 0, False),
        ),
        timings=BatchTimings(plan=0.25, spark_start=3.5, spark_job=1.5, work=1.25, commit=0.125),
        other_s3=S3Requests.of({"PUT": 3, "LIST": 2, "GET": 4, "HEAD": 1, "DELETE": 1}),
    )


def rich_status() -> JobStatus:
    return JobStatus(
        "job-1",
        (
            PartitionStatus("orders", 0, 1_234_567, 1_234_570, 3, "2026-11-25T07:00:00Z", 2, 9),
            PartitionStatus("orders", 1, None, 5, 5, None, 0, 0),
            PartitionStatus("orders", 3, 55, 55, 0, "not a time", 1, 1),
            PartitionStatus('we"ird\\topic\nname', 2, 20, 20, 0, "2026-11-26T01:02:03.5", 1, 100),
        ),
    )


def rich_totals() -> ServiceTotals:
    return ServiceTotals(
        batches=7,
        records=10**12,
        bytes=2**53 + 1,
        objects=12,
        refused_records=5,
        s3_retries=6,
        errors={"S3UnavailableError": 2, "KafkaUnavailableError": 1},
        driver_s3_retries=4,
        overhead_seconds=1.0 / 3.0,
        s3_requests=S3Requests.of({"PUT": 10**9, "LIST": 7, "GET": 3, "DELETE": 2, "OTHER": 1}),
    )


def test_follow_metrics_are_byte_for_byte_as_pinned() -> None:
    text = prometheus_text(rich_result(), rich_status(), ok=True, now=NOW, totals=rich_totals())
    assert text == (FIXTURES / "metrics_follow.prom").read_text(encoding="utf-8")


def test_a_failed_runs_metrics_are_byte_for_byte_as_pinned() -> None:
    text = prometheus_text(rich_result(), None, ok=False, now=NOW)
    assert text == (FIXTURES / "metrics_run.prom").read_text(encoding="utf-8")


def test_an_empty_runs_metrics_are_byte_for_byte_as_pinned() -> None:
    empty = RunResult("job-1", "run-0", (), (), 0.0)
    text = prometheus_text(empty, JobStatus("job-1", ()), ok=True, now=0.0, totals=ServiceTotals())
    assert text == (FIXTURES / "metrics_empty.prom").read_text(encoding="utf-8")


def test_the_json_report_is_as_pinned() -> None:
    for error, name in ((None, "report_ok.json"), ("S3 refused: 500", "report_failed.json")):
        text = json.dumps(report_json(rich_result(), error), indent=2) + "\n"
        assert text == (FIXTURES / name).read_text(encoding="utf-8")

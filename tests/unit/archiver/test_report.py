"""The Prometheus exposition of a run and of a --follow process, read by Prometheus' parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from kafka_archive.archiver.model import RunResult, TopicPartition, UnitResult
from kafka_archive.archiver.report import ServiceTotals, commit_age, prometheus_text
from kafka_archive.archiver.status import JobStatus, PartitionStatus

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def _result(records: int = 10, retries: int = 2, skipped: int = 1) -> RunResult:
    unit = UnitResult(
        0,
        TopicPartition("orders", 0),
        0,
        records,
        records,
        1000,
        (),
        1.0,
        skipped_records=skipped,
        s3_retries=retries,
    )
    return RunResult("job-1", "run", (unit,), (), 2.0)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_follow_metrics_count_batches_errors_retries_and_commit_age() -> None:
    totals = ServiceTotals().after(_result()).after(_result(records=5, retries=1))
    totals = totals.failed("S3UnavailableError").failed("S3UnavailableError")
    totals = totals.after(_result(records=3, retries=0, skipped=0), finished=False)
    status = JobStatus(
        "job-1",
        (
            PartitionStatus("orders", 0, 18, 20, 2, "2027-01-15T07:59:00Z", 3, 3000),
            PartitionStatus("orders", 1, None, 5, 5, None, 0, 0),
        ),
    )
    samples = _samples(prometheus_text(_result(), status, ok=True, now=NOW, totals=totals))
    job = (("job", "job-1"),)
    assert samples[("kafka_archive_batches_total", job)] == 2  # the failed one not counted
    assert samples[("kafka_archive_records_total", job)] == 18  # but what it committed is
    assert samples[("kafka_archive_s3_retries_total", job)] == 3
    assert samples[("kafka_archive_refused_records_total", job)] == 2
    assert samples[("kafka_archive_errors_total", (("error", "S3UnavailableError"), *job))] == 2
    p0 = (*job, ("partition", "0"), ("topic", "orders"))
    assert samples[("kafka_archive_last_commit_age_seconds", p0)] == 60
    assert samples[("kafka_archive_lag_records", p0)] == 2
    # A partition never committed has no age (not a fake 0).
    assert not any(
        name == "kafka_archive_last_commit_age_seconds" and ("partition", "1") in labels
        for name, labels in samples
    )


def test_a_single_run_has_gauges_but_no_process_counters() -> None:
    samples = _samples(prometheus_text(_result(), None, ok=False, now=NOW))
    job = (("job", "job-1"),)
    assert samples[("kafka_archive_last_run_success", job)] == 0
    assert samples[("kafka_archive_run_s3_retries", job)] == 2
    p0 = (*job, ("partition", "0"), ("topic", "orders"))
    assert samples[("kafka_archive_run_refused_records", p0)] == 1
    assert not any(name.endswith("_total") for name, _ in samples)


def test_commit_age_reads_the_state_timestamps() -> None:
    assert commit_age("2027-01-15T07:59:30Z", NOW) == 30
    assert commit_age("2027-01-15T07:59:30+00:00", NOW) == 30
    assert commit_age(None, NOW) is None
    assert commit_age("yesterday", NOW) is None

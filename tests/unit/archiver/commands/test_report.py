"""The Prometheus exposition of a run and of a --follow process, read by Prometheus' parser;
the summary's line of where a batch's time went."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from kafka_archive.archiver.commands.report import (
    METRICS,
    PHASES,
    Scope,
    ServiceTotals,
    Sources,
    _sample,
    commit_age,
    metric_lines,
    prometheus_text,
    scope_items,
)
from kafka_archive.archiver.commands.status import JobStatus, PartitionStatus
from kafka_archive.archiver.core.model import BatchTimings, RunResult, TopicPartition, UnitResult
from kafka_archive.cli.output import render_summary

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


def test_a_batch_reports_where_its_time_went_and_follow_sums_the_overhead() -> None:
    timings = BatchTimings(plan=0.25, spark_start=0.0, spark_job=1.5, work=1.25, commit=0.125)
    timed = dataclasses.replace(_result(), timings=timings)
    assert timings.overhead == 0.625  # plan + Spark job + commit - work
    totals = ServiceTotals().after(timed).after(timed).after(timed, finished=False)
    samples = _samples(prometheus_text(timed, None, ok=True, now=NOW, totals=totals))
    job = (("job", "job-1"),)
    phase = "kafka_archive_last_run_phase_seconds"
    assert samples[(phase, (*job, ("phase", "plan")))] == 0.25
    assert samples[(phase, (*job, ("phase", "work")))] == 1.25
    assert samples[(phase, (*job, ("phase", "overhead")))] == 0.625
    # Two finished batches: the failed one's time is not an overhead of a finished batch.
    assert samples[("kafka_archive_batch_overhead_seconds_total", job)] == 1.25
    assert samples[("kafka_archive_batches_total", job)] == 2
    # A result without timings (a batch that planned nothing to time) has no phase gauges.
    untimed = _samples(prometheus_text(_result(), None, ok=True, now=NOW))
    assert not any(name == phase for name, _ in untimed)


def test_the_summary_says_where_the_time_went() -> None:
    timings = BatchTimings(plan=0.25, spark_start=3.5, spark_job=1.5, work=1.25, commit=0.125)
    text = render_summary(dataclasses.replace(_result(), timings=timings))
    assert text.splitlines()[-1] == (
        "time: plan 0.25 s, Spark job 1.50 s (tasks' work 1.25 s), commit 0.12 s; "
        "overhead 0.62 s; Spark started in 3.50 s"
    )


# A time of day, byte counts and offsets past six significant digits: `{value:g}` printed
# 1.79575e+09 (up to ~80 minutes off), 1.23457e+09 bytes, 1.23457e+07 as an offset.
EXACT_NOW = 1_795_751_234.567891
BIG_BYTES = 1_234_567_891
BIG_OFFSET = 12_345_678


def test_samples_are_exact_as_prometheus_reads_them() -> None:
    unit = UnitResult(0, TopicPartition("orders", 0), 0, BIG_OFFSET, BIG_OFFSET, BIG_BYTES, (), 1.0)
    result = RunResult("job-1", "run", (unit,), (), 3_601.123456789)
    status = JobStatus(
        "job-1",
        (PartitionStatus("orders", 0, BIG_OFFSET, BIG_OFFSET + 7, 7, None, 1_000_001, BIG_BYTES),),
    )
    totals = ServiceTotals(batches=1, records=BIG_OFFSET, bytes=BIG_BYTES * 3)
    samples = _samples(prometheus_text(result, status, ok=True, now=EXACT_NOW, totals=totals))
    job = (("job", "job-1"),)
    p0 = (*job, ("partition", "0"), ("topic", "orders"))
    assert samples[("kafka_archive_last_run_timestamp_seconds", job)] == EXACT_NOW
    assert samples[("kafka_archive_last_run_duration_seconds", job)] == 3_601.123456789
    assert samples[("kafka_archive_run_bytes", p0)] == BIG_BYTES
    assert samples[("kafka_archive_run_records", p0)] == BIG_OFFSET
    assert samples[("kafka_archive_archived_offset", p0)] == BIG_OFFSET
    assert samples[("kafka_archive_archived_bytes_total", p0)] == BIG_BYTES
    assert samples[("kafka_archive_archived_objects_total", p0)] == 1_000_001
    assert samples[("kafka_archive_bytes_total", job)] == BIG_BYTES * 3
    assert samples[("kafka_archive_records_total", job)] == BIG_OFFSET


@given(
    st.one_of(
        st.integers(min_value=-(2**63), max_value=2**63),
        st.floats(allow_nan=False),
    )
)
def test_any_sample_value_reads_back_exactly(value: float) -> None:
    """Integers of any size and every float (both infinities included) reach Prometheus'
    parser as the value they are."""
    text = f"# TYPE m gauge\n{_sample('m', {'job': 'j'}, value)}\n"
    (parsed,) = _samples(text).values()
    # The parser reads a whole number as an int (exactly, past 2**53 too), the rest as floats.
    assert parsed == value and type(parsed) is type(value)
    assert repr(value) in text or value in (float("inf"), float("-inf"))


def _sources(**changes: object) -> Sources:
    status = JobStatus(
        "job-1",
        (
            PartitionStatus("orders", 0, 18, 20, 2, "2027-01-15T07:59:00Z", 3, 3000),
            PartitionStatus("orders", 1, None, 5, 5, None, 0, 0),
        ),
    )
    timed = dataclasses.replace(_result(), timings=BatchTimings(plan=1.0))
    totals = ServiceTotals(errors={"b": 1, "a": 2})
    return dataclasses.replace(Sources(timed, status, True, NOW, totals), **changes)


def test_each_metric_is_one_family_of_the_text_in_the_tables_order() -> None:
    names = [m.name for m in METRICS]
    assert len(set(names)) == len(names)
    sources = _sources()
    text = prometheus_text(sources.result, sources.status, ok=True, now=NOW, totals=sources.totals)
    families = [f.name for f in text_string_to_metric_families(text)]
    # Prometheus' parser names a counter's family without its _total.
    assert families == [
        m.name.removesuffix("_total") if m.kind == "counter" else m.name for m in METRICS
    ]
    for metric in METRICS:
        assert text.count(f"# HELP {metric.name} ") == 1
        assert f"# TYPE {metric.name} {metric.kind}\n" in text


def test_a_scope_without_its_source_has_no_family() -> None:
    assert scope_items(Scope.PHASE, _sources(result=_result())) is None
    assert scope_items(Scope.PROCESS, _sources(totals=None)) is None
    assert scope_items(Scope.ERROR, _sources(totals=None)) is None
    assert scope_items(Scope.PARTITION, _sources(status=None)) is None
    for metric in METRICS:
        if metric.scope is Scope.PARTITION:
            assert metric_lines(metric, _sources(status=None)) == []
    # Otherwise a family is there, even with no sample (no unit, no gap).
    empty = RunResult("job-1", "run", (), (), 0.0)
    assert scope_items(Scope.UNIT, _sources(result=empty)) == []


def test_samples_carry_the_labels_of_their_scope_job_first() -> None:
    sources = _sources()
    assert scope_items(Scope.RUN, sources) == [({"job": "job-1"}, None)]
    assert [labels for labels, _ in scope_items(Scope.ERROR, sources) or []] == [
        {"job": "job-1", "error": "a"},
        {"job": "job-1", "error": "b"},
    ]
    assert [labels for labels, _ in scope_items(Scope.PHASE, sources) or []] == [
        {"job": "job-1", "phase": phase} for phase in PHASES
    ]
    unit_labels = [labels for labels, _ in scope_items(Scope.UNIT, sources) or []]
    assert unit_labels == [{"job": "job-1", "topic": "orders", "partition": "0"}]


def test_a_value_of_none_is_no_sample_but_the_family_stays() -> None:
    (age,) = [m for m in METRICS if m.name == "kafka_archive_last_commit_age_seconds"]
    lines = metric_lines(age, _sources())
    assert lines == [
        "# HELP kafka_archive_last_commit_age_seconds "
        "Seconds since the partition's state was last committed.",
        "# TYPE kafka_archive_last_commit_age_seconds gauge",
        'kafka_archive_last_commit_age_seconds{job="job-1",topic="orders",partition="0"} 60.0',
    ]


def test_a_counters_help_says_since_when() -> None:
    for metric in METRICS:
        (help_line, _type_line, *_) = metric_lines(metric, _sources())
        assert help_line.endswith("Since the process started.") == (metric.kind == "counter")

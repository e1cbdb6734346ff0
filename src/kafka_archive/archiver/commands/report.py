"""What a run leaves for operators: the JSON report (``--report``) and the Prometheus text
exposition (``--metrics-file``, for node_exporter's textfile collector).

Both are written atomically (a temporary file in the same directory, then a rename), so a
collector never reads half a file. Neither holds a secret: only job, topic, partition,
offsets, counts and times.
"""

from __future__ import annotations

import datetime
import math
import os
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_archive.archiver.commands.status import JobStatus
from kafka_archive.archiver.core.model import RunResult


def report_json(result: RunResult, error: str | None = None) -> dict[str, Any]:
    """The run summary as a JSON document (a stable contract, like ``status --output json``)."""
    return {
        "job": result.job,
        "run_id": result.run_id,
        "ok": error is None,
        "error": error,
        "seconds": round(result.seconds, 3),
        "records": result.records,
        "bytes": result.bytes,
        "objects": result.objects,
        "partitions": [
            {
                "topic": u.tp.topic,
                "partition": u.tp.partition,
                "start_offset": u.start,
                "next_offset": u.next_offset,
                "records": u.records,
                "bytes": u.bytes,
                "seconds": round(u.seconds, 3),
                "skipped_records": u.skipped_records,
                "dead_letters": u.dead_letters,
                "dead_letter_key": u.dead_letter_key,
                "objects": [
                    {
                        "key": o.key,
                        "first_offset": o.first_offset,
                        "last_offset": o.last_offset,
                        "records": o.records,
                        "bytes": o.size,
                    }
                    for o in u.objects
                ],
            }
            for u in result.units
        ],
        "skipped": [
            {
                "topic": s.tp.topic,
                "partition": s.tp.partition,
                "next_offset": s.next_offset,
                "reason": s.reason,
            }
            for s in result.skipped
        ],
        # Offsets Kafka deleted before they were archived (retention, delete-records).
        "gaps": [
            {
                "topic": g.tp.topic,
                "partition": g.tp.partition,
                "first_offset": g.first,
                "last_offset": g.last,
                "records": g.records,
                "passed": g.passed,
            }
            for g in result.gaps
        ],
    }


@dataclass(frozen=True, slots=True)
class ServiceTotals:
    """Counters of a ``--follow`` process since it started (Prometheus counters)."""

    batches: int = 0
    records: int = 0
    bytes: int = 0
    objects: int = 0
    refused_records: int = 0
    s3_retries: int = 0
    errors: Mapping[str, int] = field(default_factory=dict)
    # Retried S3 requests of the driver itself (planning, state, locks), not of tasks.
    driver_s3_retries: int = 0
    # Seconds of the finished batches beyond their work (model.BatchTimings.overhead).
    overhead_seconds: float = 0.0

    def after(self, result: RunResult, *, finished: bool = True) -> ServiceTotals:
        """Add what a micro-batch committed (``finished=False``: it failed part way)."""
        overhead = result.timings.overhead if result.timings is not None and finished else 0.0
        return ServiceTotals(
            self.batches + int(finished),
            self.records + result.records,
            self.bytes + result.bytes,
            self.objects + result.objects,
            self.refused_records + result.skipped_records + result.dead_letters,
            self.s3_retries + result.s3_retries,
            self.errors,
            self.driver_s3_retries,
            self.overhead_seconds + overhead,
        )

    def failed(self, kind: str) -> ServiceTotals:
        errors = dict(self.errors)
        errors[kind] = errors.get(kind, 0) + 1
        return ServiceTotals(
            self.batches,
            self.records,
            self.bytes,
            self.objects,
            self.refused_records,
            self.s3_retries,
            errors,
            self.driver_s3_retries,
            self.overhead_seconds,
        )


def commit_age(committed_at: str | None, now: float) -> float | None:
    """Seconds since an ISO-8601 commit time (None when unknown or unreadable)."""
    if not committed_at:
        return None
    try:
        when = datetime.datetime.fromisoformat(committed_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return max(now - when.timestamp(), 0.0)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    """A sample value as it is: integers in full, floats as ``repr`` (the shortest text
    that reads back as the same float), infinities and NaN as Prometheus spells them.
    (``{value:g}`` kept 6 digits: a Unix time 1.79575e+09 was up to ~80 minutes off.)"""
    if isinstance(value, int):
        return str(int(value))  # a bool as 1/0
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _sample(name: str, labels: dict[str, str], value: float) -> str:
    inner = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {_number(value)}"


def prometheus_text(
    result: RunResult,
    status: JobStatus | None,
    *,
    ok: bool,
    now: float | None = None,
    totals: ServiceTotals | None = None,
) -> str:
    """The metrics of one run, of the job's lag when ``status`` is given, and of the
    process since it started when ``totals`` is given (``--follow``)."""
    now = time.time() if now is None else now
    job = {"job": result.job}
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(samples)

    family(
        "kafka_archive_last_run_success",
        "gauge",
        "1 if the last run succeeded, else 0.",
        [_sample("kafka_archive_last_run_success", job, 1 if ok else 0)],
    )
    family(
        "kafka_archive_last_run_timestamp_seconds",
        "gauge",
        "When the last run ended.",
        [_sample("kafka_archive_last_run_timestamp_seconds", job, now)],
    )
    family(
        "kafka_archive_last_run_duration_seconds",
        "gauge",
        "Wall time of the last run.",
        [_sample("kafka_archive_last_run_duration_seconds", job, result.seconds)],
    )
    for metric, attribute, help_text in (
        ("kafka_archive_run_records", "records", "Records archived by the last run."),
        ("kafka_archive_run_bytes", "bytes", "Bytes of objects written by the last run."),
    ):
        family(
            metric,
            "gauge",
            help_text,
            [
                _sample(
                    metric,
                    {**job, "topic": u.tp.topic, "partition": str(u.tp.partition)},
                    getattr(u, attribute),
                )
                for u in result.units
            ],
        )
    family(
        "kafka_archive_run_objects",
        "gauge",
        "Objects written by the last run.",
        [
            _sample(
                "kafka_archive_run_objects",
                {**job, "topic": u.tp.topic, "partition": str(u.tp.partition)},
                len(u.objects),
            )
            for u in result.units
        ],
    )
    family(
        "kafka_archive_run_refused_records",
        "gauge",
        "Records the last run kept out of the archive (error.policy skip/dead-letter).",
        [
            _sample(
                "kafka_archive_run_refused_records",
                {**job, "topic": u.tp.topic, "partition": str(u.tp.partition)},
                u.skipped_records + u.dead_letters,
            )
            for u in result.units
        ],
    )
    family(
        "kafka_archive_run_lost_records",
        "gauge",
        "Offsets Kafka deleted before the last run could archive them (a gap).",
        [
            _sample(
                "kafka_archive_run_lost_records",
                {**job, "topic": g.tp.topic, "partition": str(g.tp.partition)},
                g.records,
            )
            for g in result.gaps
        ],
    )
    family(
        "kafka_archive_run_s3_retries",
        "gauge",
        "S3 requests of the last run that had to be retried.",
        [_sample("kafka_archive_run_s3_retries", job, result.s3_retries)],
    )
    timings = result.timings
    if timings is not None:
        family(
            "kafka_archive_last_run_phase_seconds",
            "gauge",
            "Where the last run's (micro-batch's) time went: plan, spark_start, spark_job, "
            "work (the tasks' own time over the task slots), commit, and overhead (all but "
            "the work and Spark's start).",
            [
                _sample("kafka_archive_last_run_phase_seconds", {**job, "phase": phase}, value)
                for phase, value in (
                    ("plan", timings.plan),
                    ("spark_start", timings.spark_start),
                    ("spark_job", timings.spark_job),
                    ("work", timings.work),
                    ("commit", timings.commit),
                    ("overhead", timings.overhead),
                )
            ],
        )
    if totals is not None:
        for metric, value, help_text in (
            ("kafka_archive_batches_total", totals.batches, "Micro-batches that finished."),
            ("kafka_archive_records_total", totals.records, "Records archived."),
            ("kafka_archive_bytes_total", totals.bytes, "Bytes of objects written."),
            ("kafka_archive_objects_total", totals.objects, "Objects written."),
            (
                "kafka_archive_refused_records_total",
                totals.refused_records,
                "Records kept out of the archive by error.policy skip/dead-letter.",
            ),
            (
                "kafka_archive_s3_retries_total",
                totals.s3_retries + totals.driver_s3_retries,
                "S3 requests that had to be retried.",
            ),
            (
                "kafka_archive_batch_overhead_seconds_total",
                totals.overhead_seconds,
                "Seconds of finished micro-batches beyond their work (divided by "
                "kafka_archive_batches_total: the overhead per batch).",
            ),
        ):
            family(
                metric,
                "counter",
                f"{help_text} Since the process started.",
                [_sample(metric, job, value)],
            )
        family(
            "kafka_archive_errors_total",
            "counter",
            "Micro-batches that failed on a retriable error, by error. Since the process started.",
            [
                _sample("kafka_archive_errors_total", {**job, "error": kind}, count)
                for kind, count in sorted(totals.errors.items())
            ],
        )
    if status is not None:

        def per_partition(metric: str, help_text: str, value: Any) -> None:
            family(
                metric,
                "gauge",
                help_text,
                [
                    _sample(
                        metric, {**job, "topic": p.topic, "partition": str(p.partition)}, value(p)
                    )
                    for p in status.partitions
                ],
            )

        per_partition(
            "kafka_archive_lag_records", "Records in Kafka not yet archived.", lambda p: p.lag
        )
        per_partition(
            "kafka_archive_archived_offset",
            "Next offset to archive (S3 state).",
            lambda p: -1 if p.archived_offset is None else p.archived_offset,
        )
        per_partition(
            "kafka_archive_archived_bytes_total", "Bytes archived, all runs.", lambda p: p.bytes
        )
        per_partition(
            "kafka_archive_archived_objects_total",
            "Objects archived, all runs.",
            lambda p: p.objects,
        )
        ages = [(p, commit_age(p.last_commit, now)) for p in status.partitions]
        family(
            "kafka_archive_last_commit_age_seconds",
            "gauge",
            "Seconds since the partition's state was last committed.",
            [
                _sample(
                    "kafka_archive_last_commit_age_seconds",
                    {**job, "topic": p.topic, "partition": str(p.partition)},
                    age,
                )
                for p, age in ages
                if age is not None
            ],
        )
    return "\n".join(lines) + "\n"


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise

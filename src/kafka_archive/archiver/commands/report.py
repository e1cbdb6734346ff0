"""What a run leaves for operators: the JSON report (``--report``) and the Prometheus text
exposition (``--metrics-file``, for node_exporter's textfile collector).

Both are written atomically (a temporary file in the same directory, then a rename), so a
collector never reads half a file. Neither holds a secret: only job, topic, partition,
offsets, counts and times.
"""

from __future__ import annotations

import datetime
import enum
import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kafka_archive.archiver.commands.status import JobStatus
from kafka_archive.archiver.config.settings import LIST_PRICES, S3Prices, requests_json
from kafka_archive.archiver.core.model import NO_REQUESTS, REQUEST_TYPES, RunResult, S3Requests


def report_json(
    result: RunResult, error: str | None = None, prices: S3Prices = LIST_PRICES
) -> dict[str, Any]:
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
        **requests_json(result.s3_requests, prices),
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
    # S3 requests of the batches, the driver's between them included (failed ones too).
    s3_requests: S3Requests = NO_REQUESTS

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
            self.s3_requests + result.s3_requests,
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
            self.s3_requests,
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


class Scope(enum.Enum):
    """What a metric has one sample of, and so its labels (``job`` first, always)."""

    RUN = "run"  # the run: {job}
    UNIT = "unit"  # each unit the run archived: {job, topic, partition}
    GAP = "gap"  # each gap the run met: {job, topic, partition}
    PHASE = "phase"  # each phase of the run's time, when timed: {job, phase}
    PROCESS = "process"  # the --follow process (with totals): {job}
    ERROR = "error"  # each kind of error the process met (with totals): {job, error}
    PARTITION = "partition"  # each partition of the status (if any): {job, topic, partition}
    REQUEST = "request"  # each S3 request type of the run: {job, type}
    PROCESS_REQUEST = "process_request"  # each S3 request type (with totals): {job, type}


@dataclass(frozen=True, slots=True)
class Sources:
    """What the metrics are read from."""

    result: RunResult
    status: JobStatus | None
    ok: bool
    now: float
    totals: ServiceTotals | None
    prices: S3Prices = LIST_PRICES


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric family: its name, type and help, what it has a sample of (``scope``), and
    how a sample's value is obtained from the sources and the scope's item (a unit, a gap,
    a partition's status, ...); a value of None is no sample."""

    name: str
    kind: str
    help: str
    scope: Scope
    value: Callable[[Sources, Any], float | None]


GAUGE, COUNTER = "gauge", "counter"
PHASES = ("plan", "spark_start", "spark_job", "work", "commit", "overhead")
_SINCE_START = " Since the process started."  # every counter's help ends so

# Every metric, in the order of the exposition.
METRICS: tuple[Metric, ...] = (
    Metric(
        "kafka_archive_last_run_success",
        GAUGE,
        "1 if the last run succeeded, else 0.",
        Scope.RUN,
        lambda s, _: 1 if s.ok else 0,
    ),
    Metric(
        "kafka_archive_last_run_timestamp_seconds",
        GAUGE,
        "When the last run ended.",
        Scope.RUN,
        lambda s, _: s.now,
    ),
    Metric(
        "kafka_archive_last_run_duration_seconds",
        GAUGE,
        "Wall time of the last run.",
        Scope.RUN,
        lambda s, _: s.result.seconds,
    ),
    Metric(
        "kafka_archive_run_records",
        GAUGE,
        "Records archived by the last run.",
        Scope.UNIT,
        lambda _, u: u.records,
    ),
    Metric(
        "kafka_archive_run_bytes",
        GAUGE,
        "Bytes of objects written by the last run.",
        Scope.UNIT,
        lambda _, u: u.bytes,
    ),
    Metric(
        "kafka_archive_run_objects",
        GAUGE,
        "Objects written by the last run.",
        Scope.UNIT,
        lambda _, u: len(u.objects),
    ),
    Metric(
        "kafka_archive_run_refused_records",
        GAUGE,
        "Records the last run kept out of the archive (error.policy skip/dead-letter).",
        Scope.UNIT,
        lambda _, u: u.skipped_records + u.dead_letters,
    ),
    Metric(
        "kafka_archive_run_lost_records",
        GAUGE,
        "Offsets Kafka deleted before the last run could archive them (a gap).",
        Scope.GAP,
        lambda _, g: g.records,
    ),
    Metric(
        "kafka_archive_run_s3_retries",
        GAUGE,
        "S3 requests of the last run that had to be retried.",
        Scope.RUN,
        lambda s, _: s.result.s3_retries,
    ),
    Metric(
        "kafka_archive_run_s3_requests",
        GAUGE,
        "S3 requests of the last run by type, as AWS bills them (PUT, COPY, POST, LIST; GET, "
        "HEAD, OTHER; DELETE free), every attempt of a retried one included.",
        Scope.REQUEST,
        lambda s, kind: s.result.s3_requests.by_type()[kind],
    ),
    Metric(
        "kafka_archive_run_s3_cost_usd",
        GAUGE,
        "Estimated price of the last run's S3 requests in USD (s3_price_put_per_1000, "
        "s3_price_get_per_1000).",
        Scope.RUN,
        lambda s, _: s.prices.cost(s.result.s3_requests),
    ),
    Metric(
        "kafka_archive_last_run_phase_seconds",
        GAUGE,
        "Where the last run's (micro-batch's) time went: plan, spark_start, spark_job, "
        "work (the tasks' own time over the task slots), commit, and overhead (all but "
        "the work and Spark's start).",
        Scope.PHASE,
        lambda s, phase: getattr(s.result.timings, phase),
    ),
    Metric(
        "kafka_archive_batches_total",
        COUNTER,
        "Micro-batches that finished.",
        Scope.PROCESS,
        lambda _, t: t.batches,
    ),
    Metric(
        "kafka_archive_records_total",
        COUNTER,
        "Records archived.",
        Scope.PROCESS,
        lambda _, t: t.records,
    ),
    Metric(
        "kafka_archive_bytes_total",
        COUNTER,
        "Bytes of objects written.",
        Scope.PROCESS,
        lambda _, t: t.bytes,
    ),
    Metric(
        "kafka_archive_objects_total",
        COUNTER,
        "Objects written.",
        Scope.PROCESS,
        lambda _, t: t.objects,
    ),
    Metric(
        "kafka_archive_refused_records_total",
        COUNTER,
        "Records kept out of the archive by error.policy skip/dead-letter.",
        Scope.PROCESS,
        lambda _, t: t.refused_records,
    ),
    Metric(
        "kafka_archive_s3_retries_total",
        COUNTER,
        "S3 requests that had to be retried.",
        Scope.PROCESS,
        lambda _, t: t.s3_retries + t.driver_s3_retries,
    ),
    Metric(
        "kafka_archive_s3_requests_total",
        COUNTER,
        "S3 requests by type, as AWS bills them, every attempt included.",
        Scope.PROCESS_REQUEST,
        lambda _, item: item[0].s3_requests.by_type()[item[1]],
    ),
    Metric(
        "kafka_archive_s3_cost_usd_total",
        COUNTER,
        "Estimated price of the S3 requests in USD.",
        Scope.PROCESS,
        lambda s, t: s.prices.cost(t.s3_requests),
    ),
    Metric(
        "kafka_archive_batch_overhead_seconds_total",
        COUNTER,
        "Seconds of finished micro-batches beyond their work (divided by "
        "kafka_archive_batches_total: the overhead per batch).",
        Scope.PROCESS,
        lambda _, t: t.overhead_seconds,
    ),
    Metric(
        "kafka_archive_errors_total",
        COUNTER,
        "Micro-batches that failed on a retriable error, by error.",
        Scope.ERROR,
        lambda _, count: count,
    ),
    Metric(
        "kafka_archive_lag_records",
        GAUGE,
        "Records in Kafka not yet archived.",
        Scope.PARTITION,
        lambda _, p: p.lag,
    ),
    Metric(
        "kafka_archive_archived_offset",
        GAUGE,
        "Next offset to archive (S3 state).",
        Scope.PARTITION,
        lambda _, p: -1 if p.archived_offset is None else p.archived_offset,
    ),
    Metric(
        "kafka_archive_archived_bytes_total",
        GAUGE,
        "Bytes archived, all runs.",
        Scope.PARTITION,
        lambda _, p: p.bytes,
    ),
    Metric(
        "kafka_archive_archived_objects_total",
        GAUGE,
        "Objects archived, all runs.",
        Scope.PARTITION,
        lambda _, p: p.objects,
    ),
    Metric(
        "kafka_archive_last_commit_age_seconds",
        GAUGE,
        "Seconds since the partition's state was last committed.",
        Scope.PARTITION,
        lambda s, p: commit_age(p.last_commit, s.now),
    ),
)


class _Partition(Protocol):
    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


def _partition_labels(job: str, of: _Partition) -> dict[str, str]:
    return {"job": job, "topic": of.topic, "partition": str(of.partition)}


def scope_items(scope: Scope, sources: Sources) -> list[tuple[dict[str, str], Any]] | None:
    """The labels and item of each sample of a metric of ``scope``; None when the sources
    have nothing of the scope (no timings, totals or status: no family at all)."""
    result, totals, status = sources.result, sources.totals, sources.status
    job = result.job
    match scope:
        case Scope.RUN:
            return [({"job": job}, None)]
        case Scope.UNIT:
            return [(_partition_labels(job, u.tp), u) for u in result.units]
        case Scope.GAP:
            return [(_partition_labels(job, g.tp), g) for g in result.gaps]
        case Scope.PHASE:
            if result.timings is None:
                return None
            return [({"job": job, "phase": phase}, phase) for phase in PHASES]
        case Scope.PROCESS:
            return None if totals is None else [({"job": job}, totals)]
        case Scope.ERROR:
            if totals is None:
                return None
            return [({"job": job, "error": k}, n) for k, n in sorted(totals.errors.items())]
        case Scope.PARTITION:
            if status is None:
                return None
            return [(_partition_labels(job, p), p) for p in status.partitions]
        case Scope.REQUEST:
            return [({"job": job, "type": kind}, kind) for kind in REQUEST_TYPES]
        case Scope.PROCESS_REQUEST:
            if totals is None:
                return None
            return [({"job": job, "type": kind}, (totals, kind)) for kind in REQUEST_TYPES]


def metric_lines(metric: Metric, sources: Sources) -> list[str]:
    """A metric's family in the text exposition: HELP, TYPE and its samples (none when the
    sources have nothing of its scope)."""
    items = scope_items(metric.scope, sources)
    if items is None:
        return []
    suffix = _SINCE_START if metric.kind == COUNTER else ""
    lines = [f"# HELP {metric.name} {metric.help}{suffix}", f"# TYPE {metric.name} {metric.kind}"]
    for labels, item in items:
        value = metric.value(sources, item)
        if value is not None:
            lines.append(_sample(metric.name, labels, value))
    return lines


def prometheus_text(
    result: RunResult,
    status: JobStatus | None,
    *,
    ok: bool,
    now: float | None = None,
    totals: ServiceTotals | None = None,
    prices: S3Prices = LIST_PRICES,
) -> str:
    """The metrics of one run, of the job's lag when ``status`` is given, and of the
    process since it started when ``totals`` is given (``--follow``); S3 costs at
    ``prices``."""
    sources = Sources(result, status, ok, time.time() if now is None else now, totals, prices)
    return "\n".join(line for metric in METRICS for line in metric_lines(metric, sources)) + "\n"


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

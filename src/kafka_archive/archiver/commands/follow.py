"""``run --follow``: one session archiving in micro-batches until it is asked to stop.

The session (:mod:`.session`) holds the job's leases and Spark between batches; this module
is the loop: when a batch starts, how a failed batch is ridden out or ends the session, and
the totals.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

from kafka_archive.archiver.commands.outcome import Outcome
from kafka_archive.archiver.commands.session import Session, session
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import ArchiveError, SparkStartError
from kafka_archive.archiver.core.model import NO_REQUESTS, RunResult, S3Requests
from kafka_archive.archiver.spark.context import jvm_stopped_error
from kafka_archive.archiver.spark.progress import NullProgress, Progress
from kafka_archive.kcql.plan import Plan

FOLLOW_BATCH_LIMIT = 1_000_000
FOLLOW_MAX_BACKOFF = 60.0

OnError = Callable[[ArchiveError, RunResult | None, float], None]
"""Told a batch's retriable error, what the batch committed before it (None: it failed
before its units ran) and the back-off delay before the next batch."""


@dataclasses.dataclass(frozen=True, slots=True)
class FollowResult:
    job: str
    run_id: str
    batches: int
    records: int
    bytes: int
    objects: int
    seconds: float
    # The batch whose error ended the session, with what its units committed (None: the
    # session was stopped).
    failed: Outcome | None = None
    # Every S3 request of the session: its batches' (failed ones too), before and after.
    s3_requests: S3Requests = NO_REQUESTS


@dataclasses.dataclass(slots=True)
class _Totals:
    batches: int = 0
    records: int = 0
    bytes: int = 0
    objects: int = 0
    s3_requests: S3Requests = NO_REQUESTS

    def add(self, result: RunResult) -> None:
        self.batches += 1
        self.records += result.records
        self.bytes += result.bytes
        self.objects += result.objects
        self.s3_requests += result.s3_requests


def backoff(poll_seconds: float, failed_in_a_row: int) -> float:
    """The delay before the batch after ``failed_in_a_row`` failed ones: the poll interval
    doubling per failure in a row, at most FOLLOW_MAX_BACKOFF."""
    return min(poll_seconds * 2.0**failed_in_a_row, FOLLOW_MAX_BACKOFF)


def follow(
    settings: Settings,
    plan: Plan,
    *,
    poll_seconds: float,
    stop: threading.Event,
    on_batch: Callable[[RunResult], None],
    progress: Progress | None = None,
    on_error: OnError | None = None,
    started: Callable[[Session], None] | None = None,
) -> FollowResult:
    """Archive continuously in micro-batches until ``stop`` is set; returns the totals.

    A micro-batch starts every ``poll_seconds`` (start to start; at once after one that
    took longer). Each micro-batch is a bounded run (at most ``max_records_per_partition``
    offsets per partition, default 1,000,000, so a stop request is served soon) that holds
    back young tails (the route's flush interval, default one hour, on the driver's clock):
    objects roll by count and size as records arrive, and by interval even when none do. The
    lock and the SparkContext stay up between batches. Setting ``stop`` lets the current batch
    finish and commit.

    With ``on_error``, a batch failing on a retriable error (S3 or Kafka unavailable, an
    upload or read that ran out of retries) is reported to it with what its units committed
    before the failure and the back-off delay (:func:`backoff`), and tried again. Any other
    error of a batch whose units ran ends the session: the totals' ``failed`` is that
    batch's outcome. One before (the session could not start, or planning failed) is
    raised. ``started`` is told the session once it is open (to cancel its Spark jobs from
    another thread).
    """
    if settings.max_records_per_partition is None:
        settings = dataclasses.replace(settings, max_records_per_partition=FOLLOW_BATCH_LIMIT)
    begun = time.monotonic()
    totals = _Totals()
    ended: Outcome | None = None
    try:
        with session(settings, plan, progress or NullProgress()) as archiver:
            if started is not None:
                started(archiver)
            ended = _batches(archiver, poll_seconds, stop, on_batch, on_error, totals)
            if ended is not None:
                ended.unwrap()  # raised here: the session ends as a failed one does
    except ArchiveError as exc:
        if ended is None or exc is not ended.error:
            raise
    totals.s3_requests += archiver.driver_requests()  # after the last batch
    return FollowResult(
        job=archiver.job,
        run_id=archiver.run_id,
        batches=totals.batches,
        records=totals.records,
        bytes=totals.bytes,
        objects=totals.objects,
        seconds=time.monotonic() - begun,
        failed=ended,
        s3_requests=totals.s3_requests,
    )


def _batches(
    archiver: Session,
    poll_seconds: float,
    stop: threading.Event,
    on_batch: Callable[[RunResult], None],
    on_error: OnError | None,
    totals: _Totals,
) -> Outcome | None:
    """Batches until ``stop`` is set (None), or until one fails in a way the session does
    not ride out: that batch's outcome (an error before its units ran is raised)."""
    failed_in_a_row = 0
    while True:
        batch_started = time.monotonic()
        try:
            archiver.discover()
            outcome = archiver.batch(hold_tails=True)
            error, result = outcome.error, outcome.result
        except ArchiveError as exc:
            error, result = exc, None
        if error is not None:
            if result is not None:  # its requests were sent all the same
                totals.s3_requests += result.s3_requests
            if stop.is_set() and isinstance(error, SparkStartError):
                # The stop signal reached the JVM too as it started (a signal to the
                # whole process group): not a start that failed (no Java), a JVM stopped.
                raise jvm_stopped_error() from error
            # A service rides out an S3 or Kafka outage: what units committed stays
            # committed, the rest is read again by the next batch. Anything else (a bad
            # record under the fail policy, a fenced run, access denied) ends the run.
            if not error.retriable or on_error is None:
                if result is None:
                    raise error
                return Outcome(result, error)
            failed_in_a_row += 1
            delay = backoff(poll_seconds, failed_in_a_row)
            on_error(error, result, delay)
            if stop.wait(delay):
                return None
            continue
        failed_in_a_row = 0
        totals.add(outcome.result)
        on_batch(outcome.result)
        # A batch starts every poll interval (start to start, as Spark's processing-time
        # trigger): one that took longer is followed at once. A record then waits at most
        # max(interval, batch) for its batch to start, not the interval plus the batch.
        if stop.wait(max(poll_seconds - (time.monotonic() - batch_started), 0.0)):
            return None

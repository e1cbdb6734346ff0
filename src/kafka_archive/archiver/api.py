"""Library entry points. The CLI calls these; they never print (progress is passed in)."""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any, Protocol

from kafka_archive.archiver import job as jobs
from kafka_archive.archiver.errors import ArchiveError
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.archiver.model import RunResult, UnitResult
from kafka_archive.archiver.settings import Settings
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan

log = logging.getLogger(__name__)


class Progress(Protocol):
    def step(self, message: str) -> None: ...


class NullProgress:
    def step(self, message: str) -> None:
        return None


def spark_session(settings: Settings, app_name: str) -> tuple[Any, bool]:
    """The active SparkSession, or a new one; the bool says whether we own (must stop) it."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = (
        SparkSession.builder.master(settings.master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.task.maxFailures", "4")
    )
    if settings.master.startswith("local"):
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config(
            "spark.driver.host", "127.0.0.1"
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session, True


@contextlib.contextmanager
def _locks(store: S3Store, plan: Plan, job: str, run_id: str, ttl: int) -> Iterator[None]:
    targets = sorted({r.target for r in plan.routes}, key=lambda t: (t.bucket, t.prefix))
    with contextlib.ExitStack() as stack:
        for target in targets:
            stack.enter_context(JobLock(store, target, job, run_id, ttl))
        yield


def run(settings: Settings, plan: Plan, *, progress: Progress | None = None) -> RunResult:
    """Archive every route of the plan from its committed offset to the current end.

    Raises an :class:`ArchiveError` subclass for every failure a user can act on. Units
    that succeeded before another failed keep their commits (each partition is its own
    exactly-once stream), and the error of the first failed unit is raised.
    """
    progress = progress or NullProgress()
    started = time.monotonic()
    job = jobs.check_job_name(settings.job_name or jobs.job_name_for(plan))
    run_id = jobs.new_run_id()
    store = S3Store(settings.s3)
    for bucket in sorted({r.target.bucket for r in plan.routes}):
        store.check_bucket(bucket)
    with KafkaAdmin(settings.kafka, jobs.group_for(job)) as admin:
        partitions = admin.partitions(tuple(sorted({r.topic for r in plan.routes})))
        with _locks(store, plan, job, run_id, settings.lock_ttl_seconds):
            aborted = jobs.abort_stale_uploads(store, plan.routes)
            if aborted:
                log.info("aborted %d incomplete multipart upload(s) of earlier runs", aborted)
            work = jobs.plan_work(
                plan, partitions, store=store, admin=admin, settings=settings, job=job,
                run_id=run_id, now_ms=int(time.time() * 1000),
            )
            results: list[Any] = []
            if work.units:
                progress.step(
                    f"archiving {len(work.units)} partition(s) with Spark ({settings.master})"
                )
                spark, owned = spark_session(settings, f"kafka-archive {job}")
                try:
                    results = jobs.run_units_on_spark(spark, work.units, settings)
                finally:
                    if owned:
                        spark.stop()
            done, failures = jobs.split_results(results)
            _commit_group(admin, done)
    outcome = RunResult(
        job=job,
        run_id=run_id,
        units=tuple(sorted(done, key=lambda u: (u.route_index, u.tp))),
        skipped=work.skipped,
        seconds=time.monotonic() - started,
    )
    if failures:
        error: ArchiveError = failures[0].to_error()
        error.result = outcome
        raise error
    return outcome


def _commit_group(admin: KafkaAdmin, done: list[UnitResult]) -> None:
    """Mirror the S3 commits into the consumer group, for lag tools. S3 stays the truth."""
    offsets = {u.tp: u.next_offset for u in done if u.next_offset > u.start}
    try:
        admin.commit_group(offsets)
    except Exception as exc:  # the archive is committed; a lag-tool mirror must not fail it
        log.warning("could not commit offsets to the consumer group: %s", exc)

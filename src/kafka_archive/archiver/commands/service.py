"""``run --follow`` as a service: signals, a bounded shutdown, metrics and health.

SIGTERM or SIGINT asks the current micro-batch to finish and commit; after
``shutdown_timeout`` seconds its Spark jobs are cancelled. With a metrics port, ``/metrics``,
``/health`` and the status page ``/`` are served (:mod:`.metrics_server`), updated after
every batch with the job's lag (:mod:`.status`). The library never prints: what the user
should read goes to ``notify``.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafka_archive.archiver.commands import follow, report, session
from kafka_archive.archiver.commands.metrics_server import MetricsServer
from kafka_archive.archiver.commands.status import JobStatus, status
from kafka_archive.archiver.commands.status_page import JobLine, routes_of
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import ArchiveError
from kafka_archive.archiver.core.model import RunResult
from kafka_archive.archiver.plan.naming import job_name_for
from kafka_archive.archiver.spark.progress import Progress
from kafka_archive.kcql.plan import Plan

log = logging.getLogger("kafka_archive")


@dataclass(frozen=True, slots=True)
class FollowOptions:
    poll_seconds: float = 5.0
    shutdown_timeout: float = 60.0
    metrics_port: int | None = None
    health_max_lag: int | None = None
    health_max_age: float | None = None  # default: 3 poll intervals + 5 minutes


def lag_or_none(settings: Settings, plan: Plan) -> JobStatus | None:
    """The job's lag for metrics; None when it cannot be read (the run's metrics still are
    worth writing)."""
    try:
        return status(settings, plan)
    except ArchiveError:
        return None


def serve(
    settings: Settings,
    plan: Plan,
    options: FollowOptions,
    *,
    on_batch: Callable[[RunResult], None],
    notify: Callable[[str], None],
    progress: Progress | None = None,
) -> follow.FollowResult:
    """Follow until SIGTERM/SIGINT (see :func:`.follow.follow`); returns the totals (and the
    batch that ended the session on its error, if one did)."""
    server = None
    if options.metrics_port is not None:
        max_age = options.health_max_age or 3 * options.poll_seconds + 300
        job = JobLine(settings.job_name or job_name_for(plan), routes_of(plan), time.time())
        server = MetricsServer(
            options.metrics_port,
            max_age=max_age,
            max_lag=options.health_max_lag,
            job=job,
            prices=settings.prices,
        ).start()
        notify(f"serving /metrics, /health and the status page / on port {server.port}")
    stop = threading.Event()
    running: list[session.Session] = []

    def cancel_spark_jobs() -> None:  # the bounded shutdown gave up on the current batch
        for each in running:
            if each.spark is not None:
                each.spark.cancel_jobs()

    def request_stop(signum: int, frame: object) -> None:
        if stop.is_set():
            return
        notify(
            f"{signal.Signals(signum).name}: finishing the current batch "
            f"(at most {options.shutdown_timeout:.0f}s)"
        )
        stop.set()
        timer = threading.Timer(options.shutdown_timeout, cancel_spark_jobs)
        timer.daemon = True
        timer.start()

    def batch_done(result: RunResult) -> None:
        on_batch(result)
        if server is not None:
            server.update(result, lag_or_none(settings, plan))

    def on_error(error: ArchiveError, committed: RunResult | None, delay: float) -> None:
        log.warning("batch failed: %s; trying again in %.0f s", error, delay)
        if server is not None:
            server.failed(error)
            if committed is not None:
                server.update(committed, None, ok=False)

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return follow.follow(
            settings,
            plan,
            poll_seconds=options.poll_seconds,
            stop=stop,
            on_batch=batch_done,
            progress=progress,
            on_error=on_error,
            started=running.append,
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if server is not None:
            server.stop()


def write_outputs(
    settings: Settings,
    plan: Plan,
    result: RunResult | None,
    error: str | None,
    report_path: Path | None,
    metrics_file: Path | None,
) -> None:
    """``--report`` (the run as JSON) and ``--metrics-file`` (Prometheus text, with the
    job's lag), also for a failed run (``error``: its scrubbed message)."""
    if result is None or (report_path is None and metrics_file is None):
        return
    if report_path is not None:
        report.write_atomically(
            report_path,
            json.dumps(report.report_json(result, error, settings.prices), indent=2) + "\n",
        )
    if metrics_file is not None:
        lag = lag_or_none(settings, plan)
        text = report.prometheus_text(result, lag, ok=error is None, prices=settings.prices)
        report.write_atomically(metrics_file, text)

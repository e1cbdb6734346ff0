"""``run --follow --metrics-port N``: ``/metrics`` (Prometheus text exposition of the last
micro-batch and the job's lag), ``/health`` for Kubernetes probes, and the status page ``/``
with its data ``/status.json`` (rendered by :mod:`.status_page`), from a daemon thread.

``/health`` answers 200 while the last batch finished less than ``max_age`` seconds ago and
(when ``max_lag`` is set) no partition lags by more than ``max_lag`` records; 503 with the
reason otherwise — a stuck or falling-behind archiver gets restarted or paged.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kafka_archive.archiver.commands.report import ServiceTotals, prometheus_text
from kafka_archive.archiver.commands.status import JobStatus
from kafka_archive.archiver.commands.status_page import (
    BatchLine,
    ErrorLine,
    JobLine,
    PageData,
    page_json,
    render_html,
)
from kafka_archive.archiver.config.secrets import scrub
from kafka_archive.archiver.config.settings import LIST_PRICES, S3Prices
from kafka_archive.archiver.core.errors import ArchiveError, ConfigError
from kafka_archive.archiver.core.model import RunResult
from kafka_archive.archiver.store.s3 import S3Store


def _with_driver_retries(totals: ServiceTotals) -> ServiceTotals:
    """``totals`` with the S3 requests the driver's own stores retried (this process's)."""
    return dataclasses.replace(totals, driver_s3_retries=S3Store.process_retries)


ERRORS_KEPT = 100  # the failed batches the status page can show (newest)


def one_line(text: str) -> str:
    """``text`` on one line (a message may quote a multi-line answer)."""
    return " ".join(text.split())


class MetricsServer:
    def __init__(
        self,
        port: int,
        *,
        max_age: float,
        max_lag: int | None,
        host: str = "0.0.0.0",
        job: JobLine | None = None,
        prices: S3Prices = LIST_PRICES,
    ) -> None:
        self.max_age = max_age
        self.prices = prices
        self.max_lag = max_lag
        self._lock = threading.Lock()
        self._text = "# no micro-batch has finished yet\n"
        self._last_batch: float | None = None
        self._lag: int | None = None
        self._totals = ServiceTotals()
        self._last: tuple[RunResult, JobStatus | None] | None = None
        self._started = time.monotonic()
        self._job = job if job is not None else JobLine("", (), time.time())
        self._last_line: BatchLine | None = None
        self._last_archived: BatchLine | None = None
        self._errors: collections.deque[ErrorLine] = collections.deque(maxlen=ERRORS_KEPT)
        try:
            self._server = ThreadingHTTPServer((host, port), self._handler())
        except OSError as exc:  # in use, or a privileged port
            raise ConfigError(
                f"cannot serve /metrics on port {port}: {exc.strerror}",
                hint="Pick a free port with --metrics-port (or stop what listens there)",
            ) from None
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="metrics"
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def update(self, result: RunResult, status: JobStatus | None, *, ok: bool = True) -> None:
        """A micro-batch ended (``ok=False``: it failed after committing ``result``)."""
        with self._lock:
            if status is None and not ok and self._last is not None:
                status = self._last[1]  # a failed batch keeps the last known lag
            self._totals = _with_driver_retries(self._totals.after(result, finished=ok))
            self._last = (result, status)
            self._text = prometheus_text(
                result, status, ok=ok, totals=self._totals, prices=self.prices
            )
            if ok:
                self._last_batch = time.monotonic()
            self._lag = None if status is None else status.max_lag
            self._last_line = BatchLine.of(result, time.time(), ok=ok)
            if result.records or result.objects:
                self._last_archived = self._last_line

    def failed(self, error: ArchiveError) -> None:
        """A micro-batch failed on this retriable error: counted by its kind (the errors
        counter) and kept, scrubbed and on one line, for the status page."""
        kind = type(error).__name__
        with self._lock:
            self._errors.append(ErrorLine(time.time(), kind, one_line(scrub(str(error)))))
            self._totals = _with_driver_retries(self._totals.failed(kind))
            if self._last is not None:
                result, status = self._last
                self._text = prometheus_text(
                    result, status, ok=False, totals=self._totals, prices=self.prices
                )

    def page(self) -> PageData:
        """What the status page shows, now."""
        with self._lock:
            last = self._last
            return PageData(
                job=self._job,
                now=time.time(),
                batches=self._totals.batches,
                failed_batches=sum(self._totals.errors.values()),
                last=self._last_line,
                last_archived=self._last_archived,
                status=None if last is None else last[1],
                errors=tuple(self._errors),
            )

    def health(self) -> tuple[int, str]:
        with self._lock:
            last, lag = self._last_batch, self._lag
        now = time.monotonic()
        age = now - (last if last is not None else self._started)
        if age > self.max_age:
            what = "last micro-batch" if last is not None else "start without a micro-batch"
            return 503, f"unhealthy: {what} {age:.0f}s ago (limit {self.max_age:.0f}s)\n"
        if self.max_lag is not None and lag is not None and lag > self.max_lag:
            return 503, f"unhealthy: lag {lag} records (limit {self.max_lag})\n"
        return 200, "ok\n"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                if self.path == "/metrics":
                    with server._lock:
                        status, body = 200, server._text
                    kind = "text/plain; version=0.0.4; charset=utf-8"
                elif self.path == "/health":
                    status, body = server.health()
                    kind = "text/plain; charset=utf-8"
                elif self.path in ("/", "/index.html"):
                    status, body = 200, render_html(server.page())
                    kind = "text/html; charset=utf-8"
                elif self.path == "/status.json":
                    status, body = 200, json.dumps(page_json(server.page()), indent=2) + "\n"
                    kind = "application/json"
                else:
                    status, body, kind = 404, "not found\n", "text/plain"
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

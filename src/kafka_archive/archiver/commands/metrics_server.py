"""``run --follow --metrics-port N``: ``/metrics`` (Prometheus text exposition of the last
micro-batch and the job's lag) and ``/health`` for Kubernetes probes, from a daemon thread.

``/health`` answers 200 while the last batch finished less than ``max_age`` seconds ago and
(when ``max_lag`` is set) no partition lags by more than ``max_lag`` records; 503 with the
reason otherwise — a stuck or falling-behind archiver gets restarted or paged.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kafka_archive.archiver.commands.report import ServiceTotals, prometheus_text
from kafka_archive.archiver.commands.status import JobStatus
from kafka_archive.archiver.config.settings import LIST_PRICES, S3Prices
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.core.model import RunResult
from kafka_archive.archiver.store.s3 import S3Store


def _with_driver_retries(totals: ServiceTotals) -> ServiceTotals:
    """``totals`` with the S3 requests the driver's own stores retried (this process's)."""
    return dataclasses.replace(totals, driver_s3_retries=S3Store.process_retries)


class MetricsServer:
    def __init__(
        self,
        port: int,
        *,
        max_age: float,
        max_lag: int | None,
        host: str = "0.0.0.0",
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

    def failed(self, kind: str) -> None:
        """A micro-batch failed on a retriable error of this kind (the errors counter)."""
        with self._lock:
            self._totals = _with_driver_retries(self._totals.failed(kind))
            if self._last is not None:
                result, status = self._last
                self._text = prometheus_text(
                    result, status, ok=False, totals=self._totals, prices=self.prices
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
                else:
                    status, body, kind = 404, "not found\n", "text/plain"
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

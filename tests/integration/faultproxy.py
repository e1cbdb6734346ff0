"""A small fault-injecting HTTP proxy of our own, between the archiver and the S3 endpoint.

Each request is forwarded to the upstream unless the seeded schedule picks a fault for it:
``503`` (an S3 ``SlowDown`` error document), ``500`` (``InternalError``), ``reset`` (the
connection is closed without a response) or ``stall`` (the response comes after a delay).
``fail_all`` turns every request into a 503, for a budget that cannot be met.
``strip_headers`` (lower-case names) are removed from every request before it is forwarded
(an endpoint that ignores them); ``drop_response`` picks requests that are applied upstream
but whose response never arrives (the connection is closed instead). ``hold`` picks requests
that wait (unforwarded) until ``release`` is set: ``held`` is set when the first arrives,
``landed`` once a held one was applied upstream (a create that lands late).
``strip_when`` removes headers from the requests it picks only (an endpoint that ignores a
header on one kind of request). ``serialize`` picks requests forwarded one at a time (moto
checks a condition and then writes, unlocked, in a threaded server: two creates If-None-Match
of one key at once can both succeed; S3 evaluates each atomically).
"""

from __future__ import annotations

import contextlib
import http.client
import random
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

FAULTS = ("503", "500", "reset", "stall")
_ERROR = (
    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
    "<Message>injected</Message></Error>"
)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        return  # a client that hung up on an injected fault is not news


class FaultProxy:
    def __init__(self, upstream: str, rate: float, seed: int, stall_seconds: float = 1.0) -> None:
        target = urlsplit(upstream)
        self.upstream = (target.hostname or "127.0.0.1", target.port or 80)
        self.rate = rate
        self.fail_all = False
        self.stall_seconds = stall_seconds
        self.injected: dict[str, int] = dict.fromkeys(FAULTS, 0)
        self.forwarded = 0
        self.requests: list[tuple[str, str, str | None]] = []  # method, path, Range header
        self.strip_headers: set[str] = set()
        # (method, path, headers) -> True: apply the request, then hang up without answering.
        self.drop_response: Callable[[str, str, dict[str, str]], bool] | None = None
        self.dropped = 0
        # (method, path, headers) -> True: wait for ``release`` before forwarding.
        self.hold: Callable[[str, str, dict[str, str]], bool] | None = None
        self.held, self.release, self.landed = (threading.Event() for _ in range(3))
        # (method, path, headers) -> lower-case names of headers to remove from that request.
        self.strip_when: Callable[[str, str, dict[str, str]], set[str]] | None = None
        # (method, path, headers) -> True: forward it while no other picked one is in flight.
        self.serialize: Callable[[str, str, dict[str, str]], bool] | None = None
        self._serial = threading.Lock()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _pick(self) -> str | None:
        with self._lock:
            if self.fail_all:
                self.injected["503"] += 1
                return "503"
            if self._rng.random() >= self.rate:
                self.forwarded += 1
                return None
            fault = self._rng.choice(FAULTS)
            self.injected[fault] += 1
            return fault

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def _body(self) -> bytes:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    data = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            self.rfile.readline()
                            return data
                        data += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _error(self, status: int, code: str) -> None:
                body = _ERROR.format(code=code).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self) -> None:
                body = self._body()
                proxy.requests.append((self.command, self.path, self.headers.get("Range")))
                fault = proxy._pick()
                if fault == "503":
                    return self._error(503, "SlowDown")
                if fault == "500":
                    return self._error(500, "InternalError")
                if fault == "reset":
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                    )
                    self.close_connection = True
                    self.connection.close()
                    return None
                if fault == "stall":
                    time.sleep(proxy.stall_seconds)
                seen = dict(self.headers.items())
                held = proxy.hold is not None and proxy.hold(self.command, self.path, seen)
                if held:
                    proxy.held.set()
                    proxy.release.wait()
                strip = {*proxy.strip_headers}
                if proxy.strip_when is not None:
                    strip |= proxy.strip_when(self.command, self.path, seen)
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in ("transfer-encoding", "content-length", *strip)
                }
                headers["Content-Length"] = str(len(body))
                drop = proxy.drop_response is not None and proxy.drop_response(
                    self.command, self.path, dict(self.headers.items())
                )
                serial = proxy.serialize is not None and proxy.serialize(
                    self.command, self.path, seen
                )
                upstream = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    with proxy._serial if serial else contextlib.nullcontext():
                        upstream.request(self.command, self.path, body=body, headers=headers)
                        response = upstream.getresponse()
                        data = response.read()
                    if held:
                        proxy.landed.set()
                    if drop:
                        proxy.dropped += 1
                        self.close_connection = True
                        self.connection.close()
                        return None
                    self.send_response(response.status)
                    for key, value in response.getheaders():
                        if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                            self.send_header(key, value)
                    # A HEAD's length is the object's (pyarrow's S3 reads it as the size).
                    length = response.getheader("Content-Length") or "0"
                    self.send_header(
                        "Content-Length", length if self.command == "HEAD" else str(len(data))
                    )
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    upstream.close()
                return None

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        return Handler

"""Live progress of a run: tasks say how far they got, the driver shows it as it happens.

Spark hands task results back only when the whole job ends, so each task also sends small
JSON lines over TCP to a listener on the driver (as PySpark's own accumulator server does):
at most every :data:`SEND_EVERY` seconds while it reads, and once when its unit ends.
Progress is best effort and never holds payload or settings: a task that cannot reach the
listener archives all the same, and a listener that receives garbage ignores it.

A worker keeps its connections to the listener from one unit to the next (:data:`LINKS`):
a run of 10,000 small units opened 10,000 connections, each a thread on the driver, and
with a backlog of 5 some connects timed out and their units' lines were lost. A listener
that stops closes the connections it accepted, so a kept one to it is not used again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from kafka_archive.archiver.core.pooling import Pool

SEND_EVERY = 0.5
_CONNECT_TIMEOUT = 2.0
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UnitProgress:
    """Where one unit (route × partition) stands. ``offset`` is the next offset to read."""

    route_index: int
    topic: str
    partition: int
    start: int
    stop: int
    offset: int
    records: int = 0
    size: int = 0
    objects: int = 0
    done: bool = False
    failed: bool = False

    @property
    def remaining(self) -> int:
        return 0 if self.done and not self.failed else max(self.stop - self.offset, 0)

    def to_line(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode() + b"\n"

    @classmethod
    def from_line(cls, line: bytes) -> UnitProgress | None:
        try:
            data = json.loads(line)
            return cls(**{k: data[k] for k in cls.__dataclass_fields__})
        except (ValueError, TypeError, KeyError):
            return None


Listener = Callable[[UnitProgress], None]


def _connect(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    return socket.create_connection((host, int(port)), _CONNECT_TIMEOUT)


def _check_open(sock: socket.socket) -> None:
    """Raises when the listener closed ``sock`` (it never sends: anything readable is its
    end of the stream, or an error)."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return  # nothing to read: open
    finally:
        sock.settimeout(_CONNECT_TIMEOUT)
    raise ConnectionResetError("the progress listener closed the connection")


# A worker's connections to the driver's listener, by address, kept from unit to unit.
LINKS: Pool[str, socket.socket] = Pool(
    _connect,
    lambda address: address,
    reset=lambda sock: True,
    close=lambda sock: sock.close(),
    reuse=_check_open,
    max_idle=16,
    max_idle_seconds=60.0,
)


class ProgressListener:
    """The driver's end: accepts task connections and passes each update to ``on_update``."""

    def __init__(self, host: str, on_update: Listener) -> None:
        self._on_update = on_update
        self._lock = threading.Lock()
        listener = self

        self._accepted: set[socket.socket] = set()

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                with listener._lock:
                    listener._accepted.add(self.request)
                for line in self.rfile:
                    update = UnitProgress.from_line(line)
                    if update is not None:
                        with listener._lock:
                            listener._on_update(update)

        self._server = _Server((host, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True, name="progress"
        )

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> ProgressListener:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with self._lock:  # workers keep connections (LINKS): this listener's end them
            accepted, self._accepted = self._accepted, set()
        for sock in accepted:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Server(socketserver.ThreadingTCPServer):
    request_queue_size = 128  # (5 by default: a worker's threads connect at once)


@contextlib.contextmanager
def listening(host: str, on_update: Listener) -> Iterator[str | None]:
    """A listener for one Spark job; yields its address, or None if it cannot listen."""
    try:
        listener = ProgressListener(host, on_update).start()
    except OSError as exc:
        log.debug("no live progress: cannot listen on %s (%s)", host, exc)
        yield None
        return
    try:
        yield listener.address
    finally:
        listener.stop()


class ProgressSender:
    """A task's end: sends its unit's progress to the driver, at most every SEND_EVERY s."""

    def __init__(self, address: str | None, initial: UnitProgress) -> None:
        self._state = initial
        self._address = address
        self._sock: socket.socket | None = None
        self._last = 0.0
        if address:
            try:
                self._sock = LINKS.take(address)
            except (OSError, ValueError):
                self._sock = None
        self._send()

    def due(self) -> bool:
        """Whether an update would be sent now (callers skip computing one otherwise)."""
        return self._sock is not None and time.monotonic() - self._last >= SEND_EVERY

    def update(self, *, force: bool = False, **changes: Any) -> None:
        now = time.monotonic()
        self._state = replace(self._state, **changes)
        if force or now - self._last >= SEND_EVERY:
            self._last = now
            self._send()

    def finish(self, **changes: Any) -> None:
        self.update(force=True, done=True, **changes)
        self.close()

    def close(self) -> None:
        """The connection back to :data:`LINKS` for the worker's next unit."""
        if self._sock is not None and self._address:
            LINKS.give(self._address, self._sock)
        self._sock = None

    def _send(self) -> None:
        if self._sock is None:
            return
        try:
            self._sock.sendall(self._state.to_line())
        except OSError:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None


class Progress(Protocol):
    """What a command tells the user while it works (the CLI draws it; the library never
    prints).

    ``units_started`` names the units of one Spark job before it runs; ``unit_update`` is
    called from a listener thread as tasks report (:mod:`.progress`), ``units_ended`` once
    the job is over.
    """

    def step(self, message: str) -> None: ...

    def units_started(self, units: Sequence[UnitProgress]) -> None: ...

    def unit_update(self, update: UnitProgress) -> None: ...

    def units_ended(self) -> None: ...


class NullProgress:
    def step(self, message: str) -> None:
        return None

    def units_started(self, units: Sequence[UnitProgress]) -> None:
        return None

    def unit_update(self, update: UnitProgress) -> None:
        return None

    def units_ended(self) -> None:
        return None

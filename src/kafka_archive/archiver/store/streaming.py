"""Upload a spool file as multipart parts while it is still being written.

Reading from Kafka and uploading to S3 then overlap: when the object rolls, only its last
part is left to send. The object stays invisible until :meth:`StreamingUpload.complete`
(S3 shows a multipart upload only once completed), so the commit protocol is unchanged:
the intent marker is written before ``complete``; a crash leaves an incomplete upload that
the next run aborts (``job.abort_stale_uploads``).

Memory: at most ``max_in_flight`` parts are read into memory at once (the writer waits for
the oldest part when that many are in flight), into buffers reused from part to part, so a
unit holds at most ``max_in_flight * part_size`` bytes of upload buffers. A finished spool
file above the multipart threshold is uploaded the same way (``S3Store.upload_file``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from kafka_archive.archiver.core.errors import UploadError

MAX_IN_FLIGHT = 2


class PartStore(Protocol):
    """The requests of an upload (:class:`~kafka_archive.archiver.store.s3.S3Store`'s)."""

    def upload_bytes(self, bucket: str, key: str, body: bytes | bytearray) -> None: ...

    def start_multipart(self, bucket: str, key: str) -> str: ...

    def upload_part(
        self, bucket: str, key: str, upload_id: str, number: int, body: bytes | bytearray
    ) -> str: ...

    def complete_multipart(
        self, bucket: str, key: str, upload_id: str, etags: list[str]
    ) -> None: ...

    def abort_upload(self, bucket: str, key: str, upload_id: str) -> None: ...


class PartsInFlight:
    """One object's multipart upload, its parts sent on at most ``max_in_flight`` threads:
    started by the first part, completed with every part's ETag in order, or aborted. Both
    uploads below feed it, from a spool file or from memory."""

    def __init__(self, store: PartStore, bucket: str, key: str, max_in_flight: int) -> None:
        self._store = store
        self._bucket = bucket
        self._key = key
        self._max_in_flight = max_in_flight
        self.upload_id: str | None = None
        self._parts: list[Future[str]] = []
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, send: Callable[[int, str], str]) -> None:
        """Send the next part: ``send(number, upload_id)`` (its ETag) on a part thread, once
        fewer than ``max_in_flight`` are in flight (the caller waits for the oldest:
        backpressure). A part that failed fails the object now, not at its end."""
        if self.upload_id is None:
            self.upload_id = self._store.start_multipart(self._bucket, self._key)
            self._pool = ThreadPoolExecutor(self._max_in_flight, "kafka-archive-part")
        assert self._pool is not None
        in_flight = [p for p in self._parts if not p.done()]
        if len(in_flight) >= self._max_in_flight:
            in_flight[0].result()  # raises the part's error, if any
        for part in self._parts:
            if part.done() and part.exception() is not None:
                part.result()
        self._parts.append(self._pool.submit(send, len(self._parts) + 1, self.upload_id))

    def complete(self) -> None:
        """Wait for every part and make the object visible."""
        assert self.upload_id is not None, "complete() of an upload that never started"
        etags = [part.result() for part in self._parts]
        self._store.complete_multipart(self._bucket, self._key, self.upload_id, etags)
        self.close()

    def abort(self) -> None:
        """Drop the upload (the object never appears); safe to call more than once."""
        for part in self._parts:
            part.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self.upload_id is not None:
            # What cannot be aborted now, the next run aborts (job.abort_stale_uploads).
            with contextlib.suppress(Exception):
                self._store.abort_upload(self._bucket, self._key, self.upload_id)
            self.upload_id = None
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class StreamingUpload:
    """One object's multipart upload fed from its growing spool file."""

    def __init__(
        self,
        store: PartStore,
        bucket: str,
        key: str,
        path: Path,
        *,
        part_size: int,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        self._store = store
        self._bucket = bucket
        self._key = key
        self._path = path
        self._part_size = part_size
        self._multipart = PartsInFlight(store, bucket, key, max_in_flight)
        self._sent = 0  # bytes of the file handed to parts so far
        self._fd: int | None = None
        # Part buffers not in use (reused: see _upload).
        self._buffers: list[bytearray] = []
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self._multipart.upload_id is not None

    def next_boundary(self) -> int:
        """The file size at which the next full part can be sent."""
        return self._sent + self._part_size

    def advance(self, flushed: int) -> None:
        """Send every full part that lies within the first ``flushed`` bytes (on disk)."""
        while flushed - self._sent >= self._part_size:
            self._send(self._sent, self._part_size)

    def complete(self, size: int) -> None:
        """Send the rest of the finished file (``size`` bytes) and make the object visible."""
        while self._sent < size:
            self._send(self._sent, min(self._part_size, size - self._sent))
        try:
            self._multipart.complete()
        finally:
            self._close()

    def abort(self) -> None:
        """Drop the upload (the object never appears); safe to call more than once."""
        self._multipart.abort()
        self._close()

    def _send(self, offset: int, length: int) -> None:
        if self._fd is None:
            self._fd = os.open(self._path, os.O_RDONLY)
        self._multipart.submit(functools.partial(self._upload, offset, length))
        self._sent = offset + length

    def _upload(self, offset: int, length: int, number: int, upload_id: str) -> str:
        assert self._fd is not None
        # A full part is read into a buffer of an earlier part (fresh memory for every part
        # cost ~0.15 CPU-s per GB in page faults, measured); at most max_in_flight exist.
        with self._lock:
            buffer = self._buffers.pop() if self._buffers else bytearray(self._part_size)
        try:
            with memoryview(buffer) as view:
                got = os.preadv(self._fd, [view[:length]], offset)
            if got != length:
                raise OSError(f"spool file {self._path} is shorter than expected")
            body = buffer if length == len(buffer) else bytes(memoryview(buffer)[:length])
            return self._store.upload_part(self._bucket, self._key, upload_id, number, body)
        finally:
            with self._lock:
                self._buffers.append(buffer)

    def _close(self) -> None:
        self._multipart.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


# Part buffers of one object at most: the one being filled and two parts in flight (as a
# streamed spool file has, MAX_IN_FLIGHT). Parts go while the object is still written, at
# the pace it is read: two in flight keep up unless a part takes longer to send than two to
# fill (~0.3 s each at the ~100 MB/s a task reads here). Peak RSS of the 512 MB keyed bench
# run was +21 to +28 MB with four (measured, bench/RESULTS.md).
MAX_BUFFERS = 3


class PartBuffers:
    """Full-size part buffers not in use, by size, kept for the process's next objects: a
    new 16 MiB buffer costs ~9 ms of CPU in page faults (0.55 CPU-s per GiB touched,
    measured here; a unit that streams uses up to :data:`MAX_BUFFERS`), a kept one
    nothing. At most ``max_idle`` per size; :data:`PARTS` is forgotten by a forked child."""

    def __init__(self, max_idle: int = MAX_BUFFERS) -> None:
        self.max_idle = max_idle
        self._fresh()

    def _fresh(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[int, list[bytearray]] = {}

    def take(self, size: int) -> bytearray | None:
        """An idle buffer of ``size`` bytes, or None."""
        with self._lock:
            idle = self._idle.get(size)
            return idle.pop() if idle else None

    def give(self, buffer: bytearray) -> None:
        with self._lock:
            idle = self._idle.setdefault(len(buffer), [])
            if len(idle) < self.max_idle:
                idle.append(buffer)

    def __len__(self) -> int:
        return sum(map(len, self._idle.values()))


# The process's idle part buffers (a Spark worker archives unit after unit).
PARTS = PartBuffers()
os.register_at_fork(after_in_child=PARTS._fresh)


class MemoryUpload:
    """One object written into memory and uploaded from there: no spool file.

    A write-only file for the format's writer. An object that ends within ``part_size``
    bytes is one PUT (:meth:`complete`); from then on it is a multipart upload whose parts
    are sent while the object is written, each from a buffer of ``part_size`` bytes. At
    most ``max_buffers`` buffers hold this object at once (the one being filled, the rest in
    flight; a writer that needs another waits for the oldest part), reused from part to part
    and, through ``buffers``, from object to object of the process: writing to a spool file and
    reading it back cost ~0.3 CPU-s per GB in the kernel (~1.3 where its page cache was new
    memory: measured, ``bench/RESULTS.md``), the copy into a reused buffer ~0.1.
    """

    def __init__(
        self,
        store: PartStore,
        bucket: str,
        key: str,
        *,
        part_size: int,
        max_buffers: int = MAX_BUFFERS,
        buffers: PartBuffers = PARTS,
    ) -> None:
        assert max_buffers >= 2
        self._store = store
        self._bucket = bucket
        self._key = key
        self._part_size = part_size
        self._multipart = PartsInFlight(store, bucket, key, max_buffers - 1)
        self._buffers = buffers
        # The object's first bytes: an idle part buffer, else one that grows as it is written
        # (a small object then takes only what it holds); once full, a part like the others.
        self._buffer = buffers.take(part_size) or bytearray()
        self._fill = 0
        self._size = 0
        self._last_sent = False
        self._completed = False
        self.closed = False

    # -- the file the writer writes to ---------------------------------------------------

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        total = n = len(view)
        while True:
            room = self._part_size - self._fill
            if n <= room:
                self._put(view, n)
                break
            self._put(view[:room], room)
            view, n = view[room:], n - room
            self._ship()
        self._size += total
        return total

    def _put(self, view: memoryview, n: int) -> None:
        buffer, fill = self._buffer, self._fill
        if fill == len(buffer):
            buffer += view  # the first buffer, still growing
        else:
            buffer[fill : fill + n] = view
        self._fill = fill + n

    def tell(self) -> int:
        return self._size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True  # the bytes stay until complete() or abort()

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    # -- the upload ----------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether parts were sent (a multipart upload is open until complete or abort)."""
        return self._multipart.upload_id is not None

    @property
    def size(self) -> int:
        return self._size

    def complete(self, size: int | None = None) -> None:
        """Make the object visible, whole: one PUT of what is held, or its last part sent
        and the multipart upload completed. A completion that failed (a create refused:
        the key exists) can be called again and sends the same object (the bytes or the
        parts are kept until it succeeds, or :meth:`abort`). Once it succeeded, the bytes
        are gone: called again, UploadError, never an empty object."""
        assert size is None or size == self._size, (size, self._size)
        if self._completed:
            raise UploadError(
                f"s3://{self._bucket}/{self._key} was completed: it cannot be sent again"
            )
        if self._multipart.upload_id is None:
            del self._buffer[self._fill :]  # a part buffer cut short is not reused
            self._store.upload_bytes(self._bucket, self._key, self._buffer)
        else:
            if not self._last_sent:
                last, self._buffer = self._buffer, bytearray()
                del last[self._fill :]
                self._fill, self._last_sent = 0, True
                self._multipart.submit(functools.partial(self._send, last))
            self._multipart.complete()
        self._completed = True
        self._release()

    def abort(self) -> None:
        """Drop the upload (the object never appears) and the bytes; safe to call again."""
        self._multipart.abort()
        if len(self._buffer) == self._part_size:  # being filled, not in flight
            self._buffers.give(self._buffer)
        self._release()

    def _ship(self) -> None:
        """Send the full buffer as the next part; continue in a free one."""
        self._multipart.submit(functools.partial(self._send, self._buffer))
        self._buffer = self._buffers.take(self._part_size) or bytearray(self._part_size)
        self._fill = 0

    def _send(self, buffer: bytearray, number: int, upload_id: str) -> str:
        try:
            return self._store.upload_part(self._bucket, self._key, upload_id, number, buffer)
        finally:
            if len(buffer) == self._part_size:
                self._buffers.give(buffer)

    def _release(self) -> None:
        self._multipart.close()
        self._buffer = bytearray()
        self._fill = 0

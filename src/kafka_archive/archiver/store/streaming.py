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
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from kafka_archive.archiver.store.s3 import S3Store

MAX_IN_FLIGHT = 2


class StreamingUpload:
    """One object's multipart upload fed from its growing spool file."""

    def __init__(
        self,
        store: S3Store,
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
        self._max_in_flight = max_in_flight
        self._upload_id: str | None = None
        self._parts: list[Future[str]] = []
        self._sent = 0  # bytes of the file handed to parts so far
        self._pool: ThreadPoolExecutor | None = None
        self._fd: int | None = None
        # Part buffers not in use (reused: see _upload).
        self._buffers: list[bytearray] = []
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self._upload_id is not None

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
        assert self._upload_id is not None, "complete() of an upload that never started"
        etags = [part.result() for part in self._parts]
        self._store.complete_multipart(self._bucket, self._key, self._upload_id, etags)
        self._close()

    def abort(self) -> None:
        """Drop the upload (the object never appears); safe to call more than once."""
        for part in self._parts:
            part.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._upload_id is not None:
            # What cannot be aborted now, the next run aborts (job.abort_stale_uploads).
            with contextlib.suppress(Exception):
                self._store.abort_upload(self._bucket, self._key, self._upload_id)
        self._close()

    def _send(self, offset: int, length: int) -> None:
        if self._upload_id is None:
            self._upload_id = self._store.start_multipart(self._bucket, self._key)
            self._pool = ThreadPoolExecutor(self._max_in_flight, "kafka-archive-part")
            self._fd = os.open(self._path, os.O_RDONLY)
        assert self._pool is not None
        in_flight = [p for p in self._parts if not p.done()]
        if len(in_flight) >= self._max_in_flight:
            in_flight[0].result()  # backpressure; raises the part's error, if any
        number = len(self._parts) + 1
        self._parts.append(self._pool.submit(self._upload, number, offset, length))
        self._sent = offset + length

    def _upload(self, number: int, offset: int, length: int) -> str:
        assert self._fd is not None and self._upload_id is not None
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
            return self._store.upload_part(self._bucket, self._key, self._upload_id, number, body)
        finally:
            with self._lock:
                self._buffers.append(buffer)

    def _close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

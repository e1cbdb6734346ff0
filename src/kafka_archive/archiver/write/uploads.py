"""Closed objects of one unit on their way to S3: they wait to be marked together (one intent
marker for up to :data:`MARK_OBJECTS` objects or :data:`MARK_BYTES` bytes, or all a unit's
objects when they are small: a follow batch rolling an object a second per partition), then
each is uploaded, create-only (the stages of :mod:`.lifecycle`), and its spool file, if any,
removed. An object whose multipart upload started goes at once, with those before it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.store.streaming import MemoryUpload, StreamingUpload
from kafka_archive.archiver.write import objects
from kafka_archive.archiver.write.lifecycle import Lifecycle, Stage
from kafka_archive.archiver.write.objects import Closed

# Closed objects marked together (one intent marker, one request) at most, and their bytes:
# what waits (in memory or the spool) before its upload stays bounded.
MARK_OBJECTS = 64
MARK_BYTES = 8 * 1024 * 1024


def due(waiting: int, waiting_bytes: int, streaming: bool) -> bool:
    """Whether the closed objects waiting are marked and uploaded now: one of them started
    its multipart upload, or they reached :data:`MARK_OBJECTS` or :data:`MARK_BYTES`."""
    return streaming or waiting >= MARK_OBJECTS or waiting_bytes >= MARK_BYTES


class Uploads:
    """The closed objects of one unit waiting for their marker, in roll order."""

    def __init__(self, bucket: str, store: S3Store, lifecycle: Lifecycle) -> None:
        self._bucket = bucket
        self._store = store
        self._lifecycle = lifecycle
        self._waiting: list[Closed] = []
        self.bytes = 0  # of the objects waiting

    def add(self, closed: Closed) -> None:
        """Queue a closed object; mark and upload the queue when :func:`due`."""
        self._waiting.append(closed)
        self.bytes += closed.written.size
        streaming = closed.upload is not None and closed.upload.started
        if due(len(self._waiting), self.bytes, streaming):
            self.send()

    def last_offsets(self) -> Iterator[int]:
        """The last offset of each object waiting."""
        return (c.written.last_offset for c in self._waiting)

    def send(self) -> None:
        """Mark the waiting objects (one marker for all), then upload each, create-only."""
        waiting, self._waiting, self.bytes = self._waiting, [], 0
        try:
            self._lifecycle.mark_all(
                [(key, c.written.first_offset) for c in waiting for key in c.keys]
            )
            for c in waiting:
                self._lifecycle.create(c.key, self._sender(c), c.written)
                if c.index is not None:
                    put = functools.partial(self._store.put_bytes, self._bucket, c.keys[1], c.index)
                    self._lifecycle.create(c.keys[1], put, of=c.written)
                if c.path is not None:
                    c.path.unlink(missing_ok=True)
        except BaseException:
            for c in waiting:
                drop(self._lifecycle, c.key, c.path, c.upload)
            raise

    def discard(self) -> None:
        """Drop every object waiting (held back, or a failed unit)."""
        waiting, self._waiting, self.bytes = self._waiting, [], 0
        for c in waiting:
            drop(self._lifecycle, c.key, c.path, c.upload)

    def _sender(self, c: Closed) -> Callable[[], None]:
        """What uploads ``c``: completes its multipart upload, or sends its spool file."""
        upload = c.upload
        if upload is not None and (c.path is None or upload.started):
            return functools.partial(upload.complete, c.written.size)
        assert c.path is not None
        return functools.partial(self._store.upload_file, self._bucket, c.key, c.path)


def drop(
    lifecycle: Lifecycle,
    key: str,
    path: Path | None,
    upload: StreamingUpload | MemoryUpload | None,
    file: BinaryIO | None = None,
) -> None:
    """An object that will not be uploaded: its multipart upload aborted (its bytes in
    memory let go), dropped if still being written (a marked one stays marked:
    recovery's), its spool file (``file``, when still open) closed and removed."""
    stage = lifecycle.stage(key)
    if upload is not None and stage is not Stage.UPLOADED:
        upload.abort()
    if stage is Stage.WRITING:
        lifecycle.discard(key)
    objects.release(path, None, file)

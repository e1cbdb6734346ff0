"""The open objects of one work unit: each record goes to one open object (chunk) per path.

A chunk is written into memory when the unit has one open at a time (no PARTITIONBY, no
time in the layout: :class:`~.store.streaming.MemoryUpload`, its parts sent while it is
written once it outgrows one part), else into a local spool file (many may be open at
once: memory stays flat). When it is rolled it is closed, its intent marker is written, it
is uploaded whole, and its spool file, if any, is removed (the stages of
:mod:`.lifecycle`). Closed chunks wait to be marked together: one marker for up to
:data:`MARK_OBJECTS` objects or :data:`MARK_BYTES` bytes, or all a unit's objects when they
are small (a follow batch rolling an object a second per partition), then uploaded; a chunk
whose multipart upload started goes at once, with those before it. Chunk boundaries depend
only on the records and the flush policy, so every attempt of a unit writes the same keys.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import os
import tempfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from kafka_archive.archiver.core.model import ObjectWritten, WorkUnit
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import compression, evolution
from kafka_archive.archiver.formats.base import (
    BadRecordError,
    BatchWriter,
    EncodedBatch,
    FormatWriter,
    WriterFactory,
)
from kafka_archive.archiver.formats.blocks import BlockGzipSink, index_document, index_key
from kafka_archive.archiver.formats.writers import batch_encoder_for, writer_for
from kafka_archive.archiver.kafka.reader import Batch
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry
from kafka_archive.archiver.partition.fields import reader_for
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.store.s3 import PART_SIZE, S3Store
from kafka_archive.archiver.store.streaming import MemoryUpload, StreamingUpload
from kafka_archive.archiver.write import flush
from kafka_archive.archiver.write.lifecycle import Lifecycle, Stage
from kafka_archive.archiver.write.transforms import TransformedBatch

# Small: with PARTITIONBY many chunks are open at once, each with its own buffer.
_SPOOL_BUFFER = 64 * 1024
# Open objects per task at most (settings.max_open_writers): memory and file descriptors
# stay flat however many distinct PARTITIONBY values a partition holds.
MAX_OPEN = 64
# Closed objects marked together (one intent marker, one request) at most, and their bytes:
# what waits (in memory or the spool) before its upload stays bounded.
MARK_OBJECTS = 64
MARK_BYTES = 8 * 1024 * 1024


@dataclass
class OpenChunk:
    """An object being written. Mutable, and local to one executor task."""

    key: str
    first_offset: int
    first_timestamp: int | None
    path: Path | None  # its spool file; None when written into memory (upload)
    file: BinaryIO
    writer: FormatWriter
    compressor: BinaryIO | None
    upload: StreamingUpload | MemoryUpload | None
    last_offset: int = -1
    records: int = 0

    def stats(self) -> flush.ChunkStats:
        return flush.ChunkStats(self.records, self.writer.bytes_written(), self.first_timestamp)


@dataclass(frozen=True, slots=True)
class _Closed:
    """A rolled chunk waiting (in its spool file or in memory) to be marked and uploaded:
    only what that needs (its writer, compressor and file are let go: up to
    :data:`MARK_OBJECTS` of these wait, and a worker's memory must stay flat however many
    objects it rolls)."""

    key: str
    path: Path | None
    upload: StreamingUpload | MemoryUpload | None
    keys: tuple[str, ...]  # the object, and its block index when it has one
    written: ObjectWritten
    index: bytes | None


class ChunkSet:
    """Routes records into open chunks and rolls them by the flush policy."""

    def __init__(
        self,
        unit: WorkUnit,
        store: S3Store,
        spool_dir: str | None,
        registry: SchemaRegistry | None = None,
        part_bytes: int | None = None,
        max_open: int = MAX_OPEN,
        memory: bool = True,
        confirm_topic: Callable[[], None] = lambda: None,
    ) -> None:
        """``memory``: write the object into memory when the route has one open at a time
        (False: always spool it). ``confirm_topic``: see :class:`.lifecycle.Lifecycle`."""
        self._unit = unit
        self._max_open = max_open
        # Where each object is between its spool file and the commit.
        self.lifecycle = Lifecycle(unit, store, confirm_topic=confirm_topic)
        self._part_bytes = part_bytes
        self._registry = registry
        self._store = store
        self._spool_dir = spool_dir
        self._factory = writer_for(unit.route.format)
        if unit.value_schema is not None:  # 'avro.schema.file' (AVRO, PARQUET: KCQL checks)
            structured: Any = self._factory
            self._factory = cast(
                WriterFactory, functools.partial(structured, user_schema=unit.value_schema)
            )
        elif unit.table_schema is not None:  # an existing Iceberg table (PARQUET)
            seeded: Any = self._factory
            self._factory = cast(
                WriterFactory, functools.partial(seeded, table_schema=unit.table_schema)
            )
        self._layout = layout_for(unit.route)
        self._codec = compression.codec_of(unit.route)
        blocks = unit.route.codecs.gzip_block_bytes
        self._block_bytes = int(blocks) if blocks else None
        self._fields = reader_for(unit.route)
        # Without PARTITIONBY or time in the layout, every record shares the one group ().
        self._grouped = bool(unit.route.partition_by) or self._layout.uses_time
        # One object open at a time: written into memory, not the spool.
        self._in_memory = memory and not self._grouped
        # In least recently written order: at most ``max_open`` open at once (each holds a
        # spool file descriptor and its writer's buffers), the oldest rolled to make room.
        self._open: OrderedDict[tuple[str | None, ...], OpenChunk] = OrderedDict()
        # Rolled chunks not yet marked (in roll order), and their bytes.
        self._closed: list[_Closed] = []
        self._closed_bytes = 0
        # The latest writer of each group: the next object starts from its schema.
        self._previous: dict[tuple[str | None, ...], FormatWriter] = {}
        self._evolves = evolution.evolves(unit.route)
        # Pass-through routes into one object at a time take whole batches (add_batch).
        self._encode = (
            batch_encoder_for(unit.route)
            if registry is None and not self._grouped and self._block_bytes is None
            else None
        )

    def add(self, record: Record) -> None:
        """Write one record into the open object of its group (PARTITIONBY values, time).

        Raises the format's BadRecordError with nothing of the record written (also when
        its PARTITIONBY values cannot be read).
        """
        values: tuple[str | None, ...] = ()
        if self._grouped:
            raw, time_ms = self._fields.place(record, self._registry)
            values = self._layout.group(raw, time_ms)
        policy = self._unit.route.flush
        chunk = self._open.get(values)
        if chunk is not None and (
            flush.interval_elapsed(policy, chunk.stats(), record.timestamp)
            or not chunk.writer.accepts(record)  # a new schema: a new object
        ):
            self._roll(values)
            chunk = None
        if chunk is None:
            if len(self._open) >= self._max_open:
                # Bounded open writers: roll (upload) the least recently written object.
                # Like a count roll, it depends on the records alone; its marker makes it
                # uncommitted until the unit commits, and the commit cut stays after it.
                self._roll(next(iter(self._open)))
            chunk = self._open_chunk(record.offset, record.timestamp, values)
            evolution.carry(self._previous.get(values), chunk.writer)  # schema.compatibility
        elif self._grouped:
            self._open.move_to_end(values)
        if self._evolves:
            self._previous[values] = chunk.writer
        try:
            chunk.writer.write(record)
        except Exception:
            if chunk.records == 0:
                # The object was opened for this record, and its key names its offset: drop
                # it, so the next record opens one named for itself.
                self._discard(values)
            raise
        if isinstance(chunk.compressor, BlockGzipSink):
            chunk.compressor.record_done(record.offset)
        chunk.records += 1
        chunk.last_offset = record.offset
        if flush.is_full(policy, chunk.stats()):
            self._roll(values)
        elif chunk.records % 256 == 0:
            self._stream(chunk)

    def add_batch(self, batch: Batch | TransformedBatch) -> bool:
        """Write a whole batch through the route's batch encoder; False when the route has
        none or a value is refused (nothing of the batch is written: take it record by
        record with :meth:`add`, which applies the error policy).

        Objects roll exactly where :meth:`add` would roll them: after the record that
        reaches the count or size, before the record a full interval after the first.
        """
        if self._encode is None:
            return False
        try:
            encoded = self._encode(batch.values())
        except BadRecordError:
            return False
        if self._add_whole(batch, encoded):
            return True
        # ends[k]: encoded bytes of the first k records; objects get slices, not copies.
        ends, data = encoded.ends, memoryview(encoded.data)
        offsets = batch.offsets()
        policy = self._unit.route.flush
        interval_ms = flush.rolling_interval_ms(policy)
        timestamps = batch.timestamps()
        n, i = len(ends) - 1, 0
        while i < n:
            chunk = self._open.get(())
            if chunk is None:
                chunk = self._open_chunk(offsets[i], timestamps[i], ())
            # Roll after index `last` (count or size reached), or before `cut` (interval).
            last = i + (policy.count - chunk.records) - 1
            room = policy.size - chunk.writer.bytes_written()
            last = min(last, bisect.bisect_left(ends, ends[i] + room, lo=i + 1) - 1)
            full = last < n
            end = min(last + 1, n)
            cut = (
                None
                if interval_ms is None
                else _interval_cut(timestamps, i, end, chunk, interval_ms)
            )
            if cut is not None:
                end, full = cut, True
            if end > i:
                writer = cast(BatchWriter, chunk.writer)
                writer.write_encoded(data[ends[i] : ends[end]])
                chunk.records += end - i
                chunk.last_offset = offsets[end - 1]
            if full:
                self._roll(())
            elif end > i:
                self._stream(chunk)
            i = end
        return True

    def _add_whole(self, batch: Batch | TransformedBatch, encoded: EncodedBatch) -> bool:
        """Write the whole batch into the open object when no roll falls inside it (the
        common case: an object spans many batches), as :meth:`add_batch`'s cuts would, but
        decided from the batch's record count, bytes and latest timestamp alone, without its
        per-record columns (offsets, ends, timestamps: ~0.1 CPU-s per million records).
        False, with nothing written, when a roll may fall inside (an object it opened stays
        open, as the general path would have opened it)."""
        n = encoded.count
        if n == 0:
            return False
        policy = self._unit.route.flush
        chunk = self._open.get(())
        if chunk is None:
            chunk = self._open_chunk(batch.offset_at(0), batch.timestamp_at(0), ())
        if chunk.records + n >= policy.count:
            return False
        if chunk.writer.bytes_written() + len(encoded.data) >= policy.size:
            return False
        first, interval_ms = chunk.first_timestamp, flush.rolling_interval_ms(policy)
        if (
            first is not None
            and interval_ms is not None
            and batch.latest_timestamp() - first >= interval_ms
        ):
            return False
        cast(BatchWriter, chunk.writer).write_encoded(memoryview(encoded.data))
        chunk.records += n
        chunk.last_offset = batch.offset_at(n - 1)
        self._stream(chunk)
        return True

    def bytes_so_far(self) -> int:
        """Bytes of the objects written so far, and encoded into the open ones (progress)."""
        return (
            sum(o.size for o in self.lifecycle.uploaded())
            + self._closed_bytes
            + sum(c.writer.bytes_written() for c in self._open.values())
        )

    def _stream(self, chunk: OpenChunk) -> None:
        """Send the parts of the spool file that are complete (reading and upload overlap;
        an object in memory sends its parts as it is written)."""
        if not isinstance(chunk.upload, StreamingUpload):
            return
        size = chunk.file.tell()
        if size >= chunk.upload.next_boundary():
            chunk.file.flush()
            chunk.upload.advance(size)

    def _open_chunk(
        self, offset: int, timestamp: int | None, values: tuple[str | None, ...]
    ) -> OpenChunk:
        unit = self._unit
        key = self._layout.key(unit.tp, offset, values)
        upload: StreamingUpload | MemoryUpload | None = None
        path: Path | None = None
        file: BinaryIO
        if self._in_memory:
            upload = MemoryUpload(
                self._store,
                unit.route.target.bucket,
                key,
                part_size=self._part_bytes or PART_SIZE,
            )
            file = cast(BinaryIO, upload)
        else:
            fd, name = tempfile.mkstemp(
                prefix="kafka-archive-", suffix=".spool", dir=self._spool_dir
            )
            file = os.fdopen(fd, "wb", buffering=_SPOOL_BUFFER)
            path = Path(name)
            if self._part_bytes is not None:
                upload = StreamingUpload(
                    self._store, unit.route.target.bucket, key, path, part_size=self._part_bytes
                )
        compressor: BinaryIO | None
        if self._block_bytes is not None:
            compressor = cast(BinaryIO, BlockGzipSink(file, self._block_bytes))
        else:
            compressor = compression.compressing(file, self._codec)
        chunk = OpenChunk(
            key=key,
            first_offset=offset,
            first_timestamp=timestamp,
            path=path,
            file=file,
            writer=self._factory(compressor or file, unit.route, self._registry),
            compressor=compressor,
            upload=upload,
        )
        self.lifecycle.open(key)
        self._open[values] = chunk
        return chunk

    def _roll(self, values: tuple[str | None, ...]) -> None:
        """Close the chunk of ``values``; it waits with the other closed ones to be marked
        and uploaded (:meth:`_upload_closed`, at once when the batch is full or its
        multipart upload started)."""
        chunk = self._open.pop(values)
        try:
            if chunk.records == 0:
                self._drop(chunk.key, chunk.path, chunk.upload, chunk.file)
                return
            chunk.writer.close()
            if chunk.compressor is not None:
                chunk.compressor.close()  # writes the trailer; leaves the file open
            chunk.file.close()
            keys = [chunk.key]
            index = None
            if isinstance(chunk.compressor, BlockGzipSink):
                keys.append(index_key(chunk.key))
                index = index_document(chunk.compressor.blocks)
            written = ObjectWritten(
                key=chunk.key,
                first_offset=chunk.first_offset,
                last_offset=chunk.last_offset,
                records=chunk.records,
                size=chunk.file.tell() if chunk.path is None else chunk.path.stat().st_size,
            )
        except BaseException:
            self._drop(chunk.key, chunk.path, chunk.upload, chunk.file)
            raise
        self._closed.append(
            _Closed(chunk.key, chunk.path, chunk.upload, tuple(keys), written, index)
        )
        self._closed_bytes += written.size
        streaming = chunk.upload is not None and chunk.upload.started
        if streaming or len(self._closed) >= MARK_OBJECTS or self._closed_bytes >= MARK_BYTES:
            self._upload_closed()

    def _upload_closed(self) -> None:
        """Mark the closed chunks (one marker for all), then upload each, create-only."""
        closed, self._closed, self._closed_bytes = self._closed, [], 0
        bucket = self._unit.route.target.bucket
        try:
            self.lifecycle.mark_all(
                [(key, c.written.first_offset) for c in closed for key in c.keys]
            )
            for c in closed:
                upload = c.upload
                if upload is not None and (c.path is None or upload.started):
                    send = functools.partial(upload.complete, c.written.size)
                else:
                    assert c.path is not None
                    send = functools.partial(self._store.upload_file, bucket, c.key, c.path)
                self.lifecycle.create(c.key, send, c.written)
                if c.index is not None:
                    put = functools.partial(self._store.put_bytes, bucket, c.keys[1], c.index)
                    self.lifecycle.create(c.keys[1], put, of=c.written)
                if c.path is not None:
                    c.path.unlink(missing_ok=True)
        except BaseException:
            for c in closed:
                self._drop(c.key, c.path, c.upload)
            raise

    def _drop(
        self,
        key: str,
        path: Path | None,
        upload: StreamingUpload | MemoryUpload | None,
        file: BinaryIO | None = None,
    ) -> None:
        """A chunk that will not be uploaded: its multipart upload aborted (its bytes in
        memory let go), dropped if still being written (a marked one stays marked:
        recovery's), its spool file (``file``, when still open) closed and removed."""
        stage = self.lifecycle.stage(key)
        if upload is not None and stage is not Stage.UPLOADED:
            upload.abort()
        if stage is Stage.WRITING:
            self.lifecycle.discard(key)
        if file is not None:
            with contextlib.suppress(OSError):
                file.close()
        if path is not None:
            path.unlink(missing_ok=True)

    def flush_all(self) -> None:
        """Roll every open chunk, oldest first, and upload them (the end of a bounded run)."""
        self._roll_before(None)
        self._upload_closed()

    def _roll_before(self, cut: int | None) -> None:
        """Roll the open chunks whose first offset is before ``cut`` (all with None), oldest
        first."""
        for values in sorted(self._open, key=lambda v: self._open[v].first_offset):
            if cut is None or self._open[values].first_offset < cut:
                self._roll(values)

    def finish(self, stop: int, young_after_ms: int | None) -> int:
        """End the unit: upload what may be committed and return the commit offset.

        With ``young_after_ms`` set, open chunks whose first record is newer than it are held
        back (not uploaded; the next run reads them again) to avoid a crop of small files;
        :func:`flush.commit_cut` picks the clean cut.
        """
        cut = stop
        if young_after_ms is not None:
            spans = [
                flush.OpenSpan(c.first_offset, c.last_offset, c.first_timestamp)
                for c in self._open.values()
            ]
            # The last offset in any object rolled so far (start - 1 before the first).
            written_end = max(
                (
                    *(o.last_offset for o in self.lifecycle.uploaded()),
                    *(c.written.last_offset for c in self._closed),
                ),
                default=self._unit.start - 1,
            )
            cut = flush.commit_cut(spans, written_end, stop, young_after_ms)
        self._roll_before(cut)
        self._upload_closed()
        self.discard_all()  # what is left starts at or after the cut: held back
        return cut

    def _discard(self, values: tuple[str | None, ...]) -> None:
        chunk = self._open.pop(values)
        if chunk.upload is not None:
            chunk.upload.abort()
        with contextlib.suppress(OSError):  # a full disk refuses the buffered tail
            chunk.file.close()
        if chunk.path is not None:
            chunk.path.unlink(missing_ok=True)
        self.lifecycle.discard(chunk.key)

    def discard_all(self) -> None:
        """Drop every open or closed chunk not uploaded yet (held back, or a failed unit)."""
        for values in list(self._open):
            self._discard(values)
        closed, self._closed, self._closed_bytes = self._closed, [], 0
        for c in closed:
            self._drop(c.key, c.path, c.upload)


def _interval_cut(
    timestamps: list[int | None], start: int, end: int, chunk: OpenChunk, interval_ms: int
) -> int | None:
    """The first index in ``[start, end)`` whose record lies a full interval after the
    chunk's first record (it starts the next object), or None. Same rule as
    :func:`flush.interval_elapsed`."""
    first = chunk.first_timestamp
    if first is None:
        return None
    window = timestamps[start:end]
    if None not in window:
        latest = max(cast(list[int], window), default=first)
        if latest - first < interval_ms:
            return None  # the common case, decided without a Python step per record
    for k in range(start, end):
        ts = timestamps[k]
        if ts is not None and ts - first >= interval_ms and (k > start or chunk.records > 0):
            return k
    return None

"""The objects of one work unit as bytes: open one (a spool file, or memory when the route has
one open at a time), encode records into it through its format's writer and compressor,
close it into what waits to be marked and uploaded, or let it go. No lifecycle, no S3
request of its own but the parts of a streaming upload: :mod:`.chunks` decides which object
a record goes to and when one rolls, :mod:`.uploads` marks and uploads the closed ones.

A chunk is written into memory when the unit has one open at a time (no PARTITIONBY, no
time in the layout: :class:`~.store.streaming.MemoryUpload`, its parts sent while it is
written once it outgrows one part), else into a local spool file (many may be open at
once: memory stays flat).

Under commit_protocol=log each attempt's objects are its own (:class:`.protocol.tasks.Stamp`):
the stamp goes into the bytes where the format has a place (:mod:`.formats.stamp`), else
:meth:`Objects.key` gives the attempt's own key.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from kafka_archive.archiver.core.model import ObjectWritten, WorkUnit
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import compression, schema
from kafka_archive.archiver.formats.base import BatchWriter, FormatWriter, WriterFactory
from kafka_archive.archiver.formats.blocks import BlockGzipSink, index_document, index_key
from kafka_archive.archiver.formats.stamp import has_place
from kafka_archive.archiver.formats.writers import writer_for
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry
from kafka_archive.archiver.protocol.tasks import Stamp
from kafka_archive.archiver.store.s3 import PART_SIZE, S3Store
from kafka_archive.archiver.store.streaming import MemoryUpload, StreamingUpload
from kafka_archive.archiver.write import flush
from kafka_archive.kcql.plan import Format

# Small: with PARTITIONBY many chunks are open at once, each with its own buffer.
_SPOOL_BUFFER = 64 * 1024


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
    # Its records' time bounds (epoch ms) while every one has a time and the route stores
    # it (``timed``); once one has none, or records come encoded ahead, unknown for good.
    timed: bool = False
    min_time: int | None = None
    max_time: int | None = None

    def stats(self) -> flush.ChunkStats:
        return flush.ChunkStats(self.records, self.writer.bytes_written(), self.first_timestamp)


@dataclass(frozen=True, slots=True)
class Closed:
    """A rolled chunk waiting (in its spool file or in memory) to be marked and uploaded:
    only what that needs (its writer, compressor and file are let go: up to
    :data:`.uploads.MARK_OBJECTS` of these wait, and a worker's memory must stay flat however
    many objects it rolls)."""

    key: str
    path: Path | None
    upload: StreamingUpload | MemoryUpload | None
    keys: tuple[str, ...]  # the object, and its block index when it has one
    written: ObjectWritten
    index: bytes | None


class Objects:
    """Opens and closes the objects of one unit: their storage (spool file or memory), their
    compression and their format's writer."""

    def __init__(
        self,
        unit: WorkUnit,
        store: S3Store,
        spool_dir: str | None,
        registry: SchemaRegistry | None,
        part_bytes: int | None,
        in_memory: bool,
        stamp: Stamp | None = None,
    ) -> None:
        """``in_memory``: write each object into memory (the unit has one open at a time);
        ``stamp``: the attempt's (commit_protocol=log; None: the bytes and keys as planned)."""
        self._unit = unit
        self._store = store
        self._spool_dir = spool_dir
        self._registry = registry
        self._part_bytes = part_bytes
        self._in_memory = in_memory
        self._codec = compression.codec_of(unit.route)
        in_bytes = stamp is not None and has_place(unit.route)
        self._stamp = stamp.text if stamp is not None and in_bytes else None
        self._keyed = stamp if stamp is not None and not in_bytes else None
        self._factory = _factory_of(unit, self._stamp)
        # Record-time bounds are kept where the records store their time (what expire reads).
        self._timed = unit.route.envelope.enabled and unit.route.envelope.metadata
        blocks = unit.route.codecs.gzip_block_bytes
        self._block_bytes = int(blocks) if blocks else None

    @property
    def blocked(self) -> bool:
        """Whether objects are gzip blocks with an index (written record by record)."""
        return self._block_bytes is not None

    def key(self, planned: str) -> str:
        """The key of the object planned at ``planned``: the attempt's own when its stamp
        has no place in the bytes, else ``planned``."""
        return self._keyed.key(planned) if self._keyed is not None else planned

    def open(self, key: str, offset: int, timestamp: int | None) -> OpenChunk:
        """A new, empty object at ``key`` whose first record is at ``offset``."""
        bucket = self._unit.route.target.bucket
        upload: StreamingUpload | MemoryUpload | None = None
        path: Path | None = None
        file: BinaryIO
        if self._in_memory:
            part_size = self._part_bytes or PART_SIZE
            upload = MemoryUpload(self._store, bucket, key, part_size=part_size)
            file = cast(BinaryIO, upload)
        else:
            fd, name = tempfile.mkstemp(
                prefix="kafka-archive-", suffix=".spool", dir=self._spool_dir
            )
            file = os.fdopen(fd, "wb", buffering=_SPOOL_BUFFER)
            path = Path(name)
            if self._part_bytes is not None:
                upload = StreamingUpload(self._store, bucket, key, path, part_size=self._part_bytes)
        compressor: BinaryIO | None
        if self._block_bytes is not None:
            compressor = cast(BinaryIO, BlockGzipSink(file, self._block_bytes))
        else:
            compressor = compression.compressing(file, self._codec, self._stamp)
        writer = self._factory(compressor or file, self._unit.route, self._registry)
        chunk = OpenChunk(key, offset, timestamp, path, file, writer, compressor, upload)
        chunk.timed = self._timed
        return chunk


def write(chunk: OpenChunk, record: Record) -> None:
    """Encode ``record`` into the chunk; raises the format's BadRecordError with nothing of
    it written."""
    chunk.writer.write(record)
    if isinstance(chunk.compressor, BlockGzipSink):
        chunk.compressor.record_done(record.offset)
    chunk.records += 1
    chunk.last_offset = record.offset
    if chunk.timed:
        t = record.timestamp
        if t is None:
            chunk.timed = False
        elif chunk.min_time is None or chunk.max_time is None:
            chunk.min_time = chunk.max_time = t
        elif t < chunk.min_time:
            chunk.min_time = t
        elif t > chunk.max_time:
            chunk.max_time = t


def write_encoded(
    chunk: OpenChunk, data: bytes | memoryview, records: int, last_offset: int
) -> None:
    """Append ``records`` records encoded ahead by the format's batch encoder (a route with
    one, :func:`.formats.writers.batch_encoder_for`), the last at ``last_offset``."""
    cast(BatchWriter, chunk.writer).write_encoded(data)
    chunk.timed = False  # (pass-through routes: their records store no time)
    chunk.records += records
    chunk.last_offset = last_offset


def stream(chunk: OpenChunk) -> None:
    """Send the parts of the spool file that are complete (reading and upload overlap; an
    object in memory sends its parts as it is written)."""
    if not isinstance(chunk.upload, StreamingUpload):
        return
    size = chunk.file.tell()
    if size >= chunk.upload.next_boundary():
        chunk.file.flush()
        chunk.upload.advance(size)


def close(chunk: OpenChunk) -> Closed:
    """Finish a chunk that holds records (its footer and the compressor's trailer written,
    its file closed): what waits for its marker and upload."""
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
        columns=_columns_of(chunk.writer),
        min_time_ms=chunk.min_time if chunk.timed else None,
        max_time_ms=chunk.max_time if chunk.timed else None,
    )
    return Closed(chunk.key, chunk.path, chunk.upload, tuple(keys), written, index)


def release(
    path: Path | None,
    upload: StreamingUpload | MemoryUpload | None,
    file: BinaryIO | None = None,
) -> None:
    """Let an object's bytes go: its multipart upload aborted (its bytes in memory let go),
    its spool file (``file``, when still open) closed and removed."""
    if upload is not None:
        upload.abort()
    if file is not None:
        with contextlib.suppress(OSError):  # a full disk refuses the buffered tail
            file.close()
    if path is not None:
        path.unlink(missing_ok=True)


def _factory_of(unit: WorkUnit, stamp: str | None) -> WriterFactory:
    """The route's writer, seeded with the schema the unit was given, if any, and the
    stamp for its bytes (AVRO, PARQUET)."""
    factory = writer_for(unit.route.format)
    if stamp is not None and unit.route.format in (Format.AVRO, Format.PARQUET):
        stamped: Any = factory
        factory = cast(WriterFactory, functools.partial(stamped, stamp=stamp))
    if unit.value_schema is not None:  # 'avro.schema.file' (AVRO, PARQUET: KCQL checks)
        structured: Any = factory
        return cast(WriterFactory, functools.partial(structured, user_schema=unit.value_schema))
    if unit.table_schema is not None:  # an existing Iceberg table (PARQUET)
        seeded: Any = factory
        return cast(WriterFactory, functools.partial(seeded, table_schema=unit.table_schema))
    if unit.columns is not None:  # the route's committed objects (AVRO, PARQUET)
        recorded: Any = factory
        return cast(WriterFactory, functools.partial(recorded, columns=unit.columns))
    return factory


def _columns_of(writer: FormatWriter) -> str | None:
    """The inferred columns of an AVRO or PARQUET object (:func:`.schema.to_json`), if any."""
    columns = getattr(writer, "columns", None)
    inferred = columns() if columns is not None else None
    if inferred is None:
        return None
    return json.dumps(schema.to_json(inferred), separators=(",", ":"))

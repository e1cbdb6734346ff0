"""Archived records by offset: what ``cat`` prints and ``restore`` replays.

The object holding offset N is found from the keys alone (one listing, then a binary search
over start offsets); only the objects that hold the requested records are read. Where the
format stores offsets (the envelope), they are exact. Otherwise a record's offset is derived
as the object's start offset plus its position, which is exact when the object's records
fill its offsets without gaps: when the next object (or the committed offset) starts right
after them. Each derived record says whether that check held.
"""

from __future__ import annotations

import bisect
import heapq
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kafka_archive.archiver.core.errors import DamagedObjectError, NotInArchiveError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.formats.blocks import index_key, parse_index
from kafka_archive.archiver.formats.compression import decompress
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.read.decoding import (
    StoredRecord,
    read_object,
    read_parquet_table,
)
from kafka_archive.archiver.read.listing import StoredObject, partition_objects
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Format, Route

RANGE_READ_BYTES = 256 * 1024
"""Parquet objects from this size on are read by row group (smaller ones whole)."""


@dataclass(frozen=True, slots=True)
class FoundRecord:
    """One record read back; ``offset_exact`` is False where the offset could not be proven."""

    tp: TopicPartition
    offset: int
    offset_exact: bool
    stored: StoredRecord
    fmt: Format
    key: str


def partition_records(
    store: S3Store,
    route: Route,
    objects: tuple[StoredObject, ...],
    committed: int | None,
    start: int = 0,
) -> Iterator[FoundRecord]:
    """Every record of one partition's objects from offset ``start`` on, in offset order.

    In a layout with one group the objects follow each other; otherwise (PARTITIONBY, time
    folders) the groups are merged by offset, which needs the offsets the envelope stores.

    Raises:
        NotInArchiveError: several groups and a format that stores no offsets.
    """
    layout = layout_for(route)
    if not (layout.fields or layout.times):
        starts = [o.start_offset for o in objects]
        first = max(bisect.bisect_right(starts, start) - 1, 0)
        for position in range(first, len(objects)):
            obj = objects[position]
            bound = objects[position + 1].start_offset if position + 1 < len(objects) else committed
            part = _part(store, route, obj, bound, start) if position == first else None
            for record in part if part is not None else _read(store, route, obj, bound):
                if record.offset >= start:
                    yield record
        return
    groups: dict[tuple[str | None, ...], list[StoredObject]] = {}
    for obj in objects:
        groups.setdefault(obj.group, []).append(obj)
    streams = [_group_records(store, route, objs, start) for objs in groups.values()]
    yield from heapq.merge(*streams, key=lambda r: r.offset)


def _group_records(
    store: S3Store, route: Route, objects: list[StoredObject], start: int
) -> Iterator[FoundRecord]:
    for obj in objects:
        for record in _read(store, route, obj, None):
            if record.stored.offset is None:  # no envelope, or one without its metadata
                raise NotInArchiveError(
                    f"the objects of {obj.tp} are spread over several folders and store no "
                    "offsets, so their records cannot be put back in offset order",
                    tp=obj.tp,
                    hint="Archive with PROPERTIES('store.envelope'=true) (with its metadata) "
                    "to keep offsets",
                )
            if record.offset >= start:
                yield record


def _removed_up_to(
    removed: tuple[tuple[int, int], ...], offset: int, objects: tuple[StoredObject, ...]
) -> bool:
    """Whether every offset from ``offset`` up to the first object's start was removed."""
    at, start = offset, objects[0].start_offset
    for first, last in sorted(removed):
        if first <= at <= last:
            at = last + 1
    return at >= start


def find_records(
    store: S3Store,
    route: Route,
    tp: TopicPartition,
    offset: int,
    count: int,
    *,
    committed: int | None = None,
    objects: tuple[StoredObject, ...] | None = None,
    removed: tuple[tuple[int, int], ...] = (),
) -> Iterator[FoundRecord]:
    """Yield up to ``count`` records of ``tp`` from ``offset`` on, in offset order, from
    ``objects`` (the committed ones, :mod:`.committed`) or those listed below ``committed``.
    Offsets ``removed`` (erase, expire: ``(first, last)`` ranges) hold no record: an
    ``offset`` among those before the first object starts at the first one.

    Raises:
        NotInArchiveError: no object holds ``offset``.
        DamagedObjectError: the object that should hold it is empty.
    """
    if objects is None:
        objects = partition_objects(store, route, tp, committed)
    if objects and offset < objects[0].start_offset and _removed_up_to(removed, offset, objects):
        offset = objects[0].start_offset
    if not objects or objects[0].start_offset > offset:
        where = f"starts at offset {objects[0].start_offset}" if objects else "is empty"
        raise NotInArchiveError(
            f"offset {offset} is not archived: the archive of {tp} {where}", tp=tp, offset=offset
        )
    left = count
    for record in partition_records(store, route, objects, committed, offset):
        yield record
        left -= 1
        if left == 0:
            return
    if left == count:
        # Nothing at or after it. kafka-archive never writes an empty object: the one that
        # should hold the offset being empty means it was damaged or replaced.
        holder = objects[bisect.bisect_right([o.start_offset for o in objects], offset) - 1]
        if holder.size == 0:
            raise DamagedObjectError(
                f"offset {offset} of {tp} is not readable: s3://{route.target.bucket}/"
                f"{holder.key} is empty (0 bytes), so it was damaged or replaced",
                tp=tp,
                offset=offset,
                hint="Run kafka-archive verify on this archive to see which objects differ",
            )
        raise NotInArchiveError(
            f"offset {offset} is beyond the archive of {tp}", tp=tp, offset=offset
        )


def _part(
    store: S3Store, route: Route, obj: StoredObject, bound: int | None, start: int
) -> Iterable[FoundRecord] | None:
    """The records from ``start`` on of the object holding ``start``, read without the
    records before it where the object allows (gzip blocks with an index, Parquet row
    groups); None: read it whole."""
    if route.format is Format.PARQUET:
        # A small object costs less in one GET than its footer and a row group.
        big = obj.size >= RANGE_READ_BYTES
        return _row_groups(store, route, obj, bound, start) if big else None
    return _indexed(store, route, obj, bound, start)


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of an S3 object: every read is one range GET."""

    def __init__(self, store: S3Store, bucket: str, key: str, size: int) -> None:
        super().__init__()
        self._store, self._bucket, self._key, self._size = store, bucket, key, size
        self._pos = 0
        self.fetched = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(base + offset, 0)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        wanted = min(len(buffer), self._size - self._pos)
        if wanted <= 0:
            return 0
        data = self._store.get_bytes(self._bucket, self._key, (self._pos, wanted))
        if data is None:
            raise OSError(f"{self._key} disappeared while reading it")
        buffer[: len(data)] = data
        self._pos += len(data)
        self.fetched += len(data)
        return len(data)


def _row_groups(
    store: S3Store, route: Route, obj: StoredObject, bound: int | None, start: int
) -> Iterator[FoundRecord]:
    """The records from ``start`` on of a Parquet object, reading its footer, then one row
    group at a time from the one holding ``start`` (range GETs): a row group is skipped
    when its rows all come before ``start`` — by position without the envelope (the records
    fill the object's offsets), by the stored offsets' statistics with it."""
    # Heavy to import (pyarrow): loaded only when a PARQUET object is read.
    import pyarrow as pa
    import pyarrow.parquet as pq

    bucket = route.target.bucket
    envelope = route.envelope if route.envelope.enabled else None
    try:
        parquet = pq.ParquetFile(_RangeFile(store, bucket, obj.key, obj.size))
        meta = parquet.metadata
        rows = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        schema_meta = parquet.schema_arrow.metadata or {}
        enveloped = schema_meta.get(b"kafka_archive.envelope") == b"true"
        exact = bound is not None and bound == obj.start_offset + sum(rows)
        first = obj.start_offset
        for index, count in enumerate(rows):
            if not _before(meta.row_group(index), enveloped, start - first, start):
                stored = read_parquet_table(
                    parquet.read_row_group(index, use_threads=False), envelope
                )
                for i, record in enumerate(stored):
                    yield FoundRecord(
                        tp=obj.tp,
                        offset=record.offset if record.offset is not None else first + i,
                        offset_exact=record.offset is not None or exact,
                        stored=record,
                        fmt=route.format,
                        key=obj.key,
                    )
            first += count
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise DamagedObjectError(
            f"s3://{bucket}/{obj.key} cannot be read as {route.format.value}: {exc}",
            tp=obj.tp,
            hint="Run kafka-archive verify to list damaged objects",
        ) from None


def _before(group: Any, enveloped: bool, position: int, start: int) -> bool:
    """Whether every row of a row group comes before ``start``: ``position`` is where
    ``start`` would be counting from the group's first row (without the envelope)."""
    if not enveloped:
        return bool(group.num_rows <= position)
    for index in range(group.num_columns):
        column = group.column(index)
        if column.path_in_schema == "metadata.offset":
            stats = column.statistics
            return bool(stats is not None and stats.has_min_max and stats.max < start)
    return False


def _indexed(
    store: S3Store, route: Route, obj: StoredObject, bound: int | None, start: int
) -> Iterator[FoundRecord] | None:
    """The records from ``start`` on of a block-GZIP object, read block by block with range
    GETs from the block holding ``start``; None when the object has no block index."""
    if not obj.key.endswith(".gz"):
        return None
    bucket = route.target.bucket
    data = store.get_bytes(bucket, index_key(obj.key))
    if data is None:
        return None
    try:
        blocks = parse_index(data)
    except ValueError as exc:
        raise DamagedObjectError(
            f"s3://{bucket}/{index_key(obj.key)}: {exc}", tp=obj.tp, hint="Run kafka-archive verify"
        ) from None
    first = max(bisect.bisect_right([b.first_offset for b in blocks], start) - 1, 0)

    def records() -> Iterator[FoundRecord]:
        for position in range(first, len(blocks)):
            block = blocks[position]
            after = blocks[position + 1].first_offset if position + 1 < len(blocks) else bound
            raw = store.get_bytes(bucket, obj.key, (block.byte_offset, block.length)) or b""
            where = f"s3://{bucket}/{obj.key}: block at byte {block.byte_offset}"
            yield from _found(route, obj, raw, where, block.first_offset, after)

    return records()


def _read(store: S3Store, route: Route, obj: StoredObject, bound: int | None) -> list[FoundRecord]:
    data = store.get_bytes(route.target.bucket, obj.key) or b""
    where = f"s3://{route.target.bucket}/{obj.key}"
    return _found(route, obj, data, where, obj.start_offset, bound)


def _found(
    route: Route, obj: StoredObject, data: bytes, where: str, first: int, bound: int | None
) -> list[FoundRecord]:
    """The records of ``data`` (an object, or one block of it, whose records start at offset
    ``first``; ``bound``: where the next records start, if known)."""
    try:
        envelope = route.envelope if route.envelope.enabled else None
        stored = read_object(route.format, decompress(obj.key, data), envelope)
    except ValueError as exc:  # UnreadableObject, or damaged compression
        raise DamagedObjectError(
            f"{where} cannot be read as {route.format.value}: {exc}",
            tp=obj.tp,
            hint="Run kafka-archive verify to list damaged objects",
        ) from None
    exact = bound is not None and bound == first + len(stored)
    return [
        FoundRecord(
            tp=obj.tp,
            offset=record.offset if record.offset is not None else first + i,
            offset_exact=record.offset is not None or exact,
            stored=record,
            fmt=route.format,
            key=obj.key,
        )
        for i, record in enumerate(stored)
    ]

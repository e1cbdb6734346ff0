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
from collections.abc import Iterator
from dataclasses import dataclass

from kafka_archive.archiver.errors import DamagedObjectError, NotInArchiveError
from kafka_archive.archiver.formats.blocks import index_key, parse_index
from kafka_archive.archiver.formats.compression import decompress
from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.reading.decoding import StoredRecord, read_object
from kafka_archive.archiver.reading.listing import StoredObject, partition_objects
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Format, Route


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
            bound = (
                objects[position + 1].start_offset if position + 1 < len(objects) else committed
            )
            indexed = _indexed(store, route, obj, bound, start) if position == first else None
            for record in indexed if indexed is not None else _read(store, route, obj, bound):
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
            if not record.stored.has_envelope:
                raise NotInArchiveError(
                    f"the objects of {obj.tp} are spread over several folders and store no "
                    "offsets, so their records cannot be put back in offset order",
                    tp=obj.tp,
                    hint="Archive with PROPERTIES('store.envelope'=true) to keep offsets",
                )
            if record.offset >= start:
                yield record


def find_records(
    store: S3Store,
    route: Route,
    tp: TopicPartition,
    offset: int,
    count: int,
    *,
    committed: int | None = None,
) -> Iterator[FoundRecord]:
    """Yield up to ``count`` records of ``tp`` from ``offset`` on, in offset order.

    Raises:
        NotInArchiveError: no object holds ``offset``.
    """
    objects = partition_objects(store, route, tp, committed)
    if not objects or objects[0].start_offset > offset:
        where = f"starts at offset {objects[0].start_offset}" if objects else "is empty"
        raise NotInArchiveError(f"offset {offset} is not archived: the archive of {tp} {where}",
                                tp=tp, offset=offset)  # fmt: skip
    left = count
    for record in partition_records(store, route, objects, committed, offset):
        yield record
        left -= 1
        if left == 0:
            return
    if left == count:
        raise NotInArchiveError(f"offset {offset} is beyond the archive of {tp}", tp=tp,
                                offset=offset)  # fmt: skip


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
        raise DamagedObjectError(f"s3://{bucket}/{index_key(obj.key)}: {exc}", tp=obj.tp,
                                 hint="Run kafka-archive verify") from None  # fmt: skip
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
            f"{where} cannot be read as {route.format.value}: {exc}", tp=obj.tp,
            hint="Run kafka-archive verify to list damaged objects",
        ) from None  # fmt: skip
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

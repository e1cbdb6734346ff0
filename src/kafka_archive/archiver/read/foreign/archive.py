"""A foreign archive as stored: its objects by partition, and their records by offset.

Listing is one paginated listing of the prefix (keys only), each key read by the layout's
``parse``. Offsets come from the records where the format keeps them, else from the name:
the start offset plus the position (Confluent, Aiven, Secor), or, where the name holds the
last offset (Lenses), counted back from it. A derived offset is exact when the neighbours
agree: the next object starts right after (or the previous one ends right before).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from kafka_archive.archiver.core.errors import BucketNotFoundError, DamagedObjectError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.read.foreign.model import (
    ForeignFormatError,
    ForeignLayout,
    ForeignObject,
    ForeignRecord,
    Kept,
)
from kafka_archive.archiver.state.paths import STATE_DIR
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Target


@dataclass(frozen=True, slots=True)
class PlacedRecord:
    """A record of a foreign object with its offset (``exact``: proven, not derived)."""

    tp: TopicPartition
    offset: int
    exact: bool
    record: ForeignRecord
    obj: ForeignObject


def _order(obj: ForeignObject) -> tuple[int, int, str]:
    last = obj.last_offset if obj.last_offset is not None else -1
    return (obj.first_offset if obj.first_offset >= 0 else last, last, obj.key)


class ForeignArchive:
    """The objects of one foreign archive under ``target``, read with ``layout``."""

    def __init__(self, store: S3Store, target: Target, layout: ForeignLayout) -> None:
        self.store, self.target, self.layout = store, target, layout
        self._decoded: set[str] = set()

    def check_bucket(self) -> None:
        try:
            self.store.check_bucket(self.target.bucket)
        except BucketNotFoundError as exc:
            raise BucketNotFoundError(
                exc.message, hint="Check --from (the bucket and prefix the sink wrote to)"
            ) from None

    def objects(self, topics: set[str] | None = None) -> dict[TopicPartition, list[ForeignObject]]:
        """Every data object by topic-partition, in offset order."""
        head = self.target.head
        own = f"{head}{STATE_DIR}/"
        found: dict[TopicPartition, list[ForeignObject]] = defaultdict(list)
        for key, size in self.store.list_objects(self.target.bucket, head):
            if key.startswith(own):
                continue
            obj = self.layout.parse(key[len(head) :], size)
            if obj is None or (topics is not None and obj.tp.topic not in topics):
                continue
            found[obj.tp].append(obj)
        return {tp: sorted(objs, key=_order) for tp, objs in sorted(found.items())}

    def kept(self, obj: ForeignObject) -> Kept:
        """What the records of ``obj`` keep; where the sink's format decides it per object
        (Lenses: the envelope, or values alone), ``obj`` is read first."""
        if getattr(self.layout, "content_decides", False) and obj.key not in self._decoded:
            self.read(obj)
        return self.layout.kept(obj)

    def full_key(self, obj: ForeignObject) -> str:
        return f"{self.target.head}{obj.key}"

    def read(self, obj: ForeignObject) -> list[ForeignRecord]:
        """The records of ``obj`` (DamagedObjectError when they do not decode)."""
        key = self.full_key(obj)
        data = self.store.get_bytes(self.target.bucket, key)
        if data is None:
            raise DamagedObjectError(
                f"s3://{self.target.bucket}/{key} disappeared while reading it", tp=obj.tp
            )
        try:
            records = self.layout.decode(obj, data)
            self._decoded.add(obj.key)
            return records
        except ForeignFormatError as exc:
            raise DamagedObjectError(
                f"s3://{self.target.bucket}/{key} cannot be read as the {self.layout.name} "
                f"sink writes it: {exc}",
                tp=obj.tp,
                hint="Run kafka-archive verify --layout ... to list damaged objects",
            ) from None

    def placed(self, objects: list[ForeignObject], start: int = 0) -> Iterator[PlacedRecord]:
        """The records of one partition's ``objects`` (in offset order) from ``start`` on."""
        previous_end: int | None = None
        for index, obj in enumerate(objects):
            nxt = objects[index + 1] if index + 1 < len(objects) else None
            if obj.last_offset is not None and obj.last_offset < start:
                previous_end = obj.last_offset
                continue
            if obj.first_offset >= 0 and nxt is not None and 0 <= nxt.first_offset <= start:
                continue
            records = self.read(obj)
            for placed in place(obj, records, previous_end, nxt):
                if placed.offset >= start:
                    yield placed
            if records:
                previous_end = (
                    obj.last_offset if obj.last_offset is not None else place_end(obj, records)
                )


def place_end(obj: ForeignObject, records: list[ForeignRecord]) -> int:
    """The last offset ``records`` of ``obj`` hold (stored, else derived)."""
    last = records[-1].offset
    if last is not None:
        return last
    if obj.first_offset >= 0:
        return obj.first_offset + len(records) - 1
    assert obj.last_offset is not None
    return obj.last_offset


def place(
    obj: ForeignObject,
    records: list[ForeignRecord],
    previous_end: int | None,
    nxt: ForeignObject | None,
) -> list[PlacedRecord]:
    """``records`` of ``obj`` with their offsets (see the module doc)."""
    count = len(records)
    if obj.first_offset >= 0:
        first = obj.first_offset
        exact = nxt is not None and nxt.first_offset == first + count
    else:
        assert obj.last_offset is not None
        first = obj.last_offset - count + 1
        exact = previous_end is not None and previous_end + 1 == first
    return [
        PlacedRecord(
            obj.tp,
            r.offset if r.offset is not None else first + i,
            r.offset is not None or exact,
            r,
            obj,
        )
        for i, r in enumerate(records)
    ]


def grouped(objects: list[ForeignObject], kept: Kept) -> bool:
    """Whether a partition's records are spread over several partitioner folders (a field
    or time partitioner) in a format that keeps no offsets: only each object's first
    offset is known then, not where its other records were in the partition."""
    return not kept.offset and len({o.group for o in objects}) > 1

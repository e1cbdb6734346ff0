"""Find and read archived records by offset: what ``kafka-archive cat`` prints.

The object holding offset N is found from the keys alone (one listing, then a binary search
over start offsets); only the objects that hold the requested records are read. Where the
format stores offsets (the envelope), they are exact. Otherwise a record's offset is derived
as the object's start offset plus its position, which is exact when the object's records
fill its offsets without gaps: when the next object (or the committed offset) starts right
after them. Each derived record says whether that check held.
"""

from __future__ import annotations

import base64
import bisect
import heapq
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kafka_archive.archiver import envelope as env
from kafka_archive.archiver.errors import ConfigError, DamagedObjectError, NotInArchiveError
from kafka_archive.archiver.formats.blocks import index_key, parse_index
from kafka_archive.archiver.formats.compression import SUFFIXES, decompress
from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.readback import StoredRecord, read_object
from kafka_archive.archiver.state.paths import STATE_DIR
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.stored import StoredObject, list_partition_objects
from kafka_archive.kcql.plan import Format, Route, Target

_EXTENSION_FORMATS = {fmt.extension: fmt for fmt in Format if fmt is not Format.CSV_WITHHEADERS}
_LENSES_NAME = re.compile(r"^[0-9]+/[0-9]+\.(?P<ext>[A-Za-z]+)(?P<suffix>\.gz|\.bz2|\.zst)?$")
_SUFFIX_CODECS = {suffix: codec for codec, suffix in SUFFIXES.items()}
_STATE_NAME = re.compile(r"/state/(?P<topic>[^/]+)/(?P<partition>[0-9]+)\.json$")


@dataclass(frozen=True, slots=True)
class FoundRecord:
    """One record read back; ``offset_exact`` is False where the offset could not be proven."""

    tp: TopicPartition
    offset: int
    offset_exact: bool
    stored: StoredRecord
    fmt: Format
    key: str

    def to_json(self) -> dict[str, Any]:
        stored = self.stored
        if stored.has_envelope:  # key, value and header values are Kafka bytes
            value, encoding = _bytes(stored.raw)
        else:
            value, encoding = _encode(stored.value, self.fmt)
        key, key_encoding = _bytes(stored.key)
        return {
            "topic": self.tp.topic,
            "partition": self.tp.partition,
            "offset": self.offset,
            "offset_exact": self.offset_exact,
            "timestamp": stored.timestamp,
            "key": key,
            "key_encoding": key_encoding,
            "headers": None
            if stored.headers is None
            else [[name, *_bytes(v)] for name, v in stored.headers],
            "value": value,
            "value_encoding": encoding,
            "object": self.key,
        }


def _bytes(data: bytes | None) -> tuple[Any, str | None]:
    return (None, None) if data is None else env.encode_bytes(data)


def _encode(value: Any, fmt: Format) -> tuple[Any, str]:
    if fmt is Format.JSON:
        return value, "json"
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8"), "utf8"
        except UnicodeDecodeError:
            return base64.b64encode(value).decode("ascii"), "base64"
    return value, "utf8"


def parse_location(text: str) -> Target:
    """``bucket`` or ``bucket:prefix`` (a ``/`` at either end of the prefix is dropped)."""
    bucket, _, prefix = text.partition(":")
    prefix = prefix.strip("/")
    bad_segment = any(s in ("", ".", "..") for s in prefix.split("/")) if prefix else False
    if not bucket or "/" in bucket or bad_segment:
        raise ConfigError(f"--from expects bucket or bucket:prefix, not {text!r}",
                          hint="For example --from my-bucket:archive")  # fmt: skip
    return Target(bucket, prefix)


def default_route(store: S3Store, target: Target, topic: str) -> Route:
    """The route of a default-layout archive (``<prefix>/<topic>/<partition>/<offset>.<ext>``),
    its format told by the objects' extension."""
    head = f"{target.prefix}/" if target.prefix else ""
    folder = f"{head}{topic}/"
    for key, _ in store.list_objects(target.bucket, folder):
        match = _LENSES_NAME.match(key[len(folder) :])
        if match and match["ext"] in _EXTENSION_FORMATS:
            codec = _SUFFIX_CODECS.get(match["suffix"] or "")
            properties = (("store.compression", codec),) if codec else ()
            return Route(target=target, topic=topic, format=_EXTENSION_FORMATS[match["ext"]],
                         properties=properties)  # fmt: skip
    raise NotInArchiveError(
        f"no archived objects of {topic} under s3://{target.bucket}/{folder}",
        hint="Check --from and --topic; for an archive written with PARTITIONBY or another "
        "layout, pass the KCQL that wrote it with --kcql",
    )


def committed_offsets(store: S3Store, target: Target) -> dict[TopicPartition, int]:
    """Committed offsets of the partitions that exactly one job archives under ``target``."""
    head = f"{target.prefix}/" if target.prefix else ""
    found: dict[TopicPartition, list[int]] = {}
    for key, _ in store.list_objects(target.bucket, f"{head}{STATE_DIR}/"):
        match = _STATE_NAME.search(key)
        if match is None:
            continue
        doc = store.get_document(target.bucket, key)
        if doc is not None:
            tp = TopicPartition(match["topic"], int(match["partition"]))
            found.setdefault(tp, []).append(int(doc.body["next_offset"]))
    return {tp: offsets[0] for tp, offsets in found.items() if len(offsets) == 1}


def partition_objects(
    store: S3Store, route: Route, tp: TopicPartition, committed: int | None
) -> tuple[StoredObject, ...]:
    """The committed objects of ``tp`` (listing only its folder where the layout allows)."""
    layout = layout_for(route)
    head = f"{route.target.prefix}/" if route.target.prefix else ""
    keys = (
        store.list_objects(route.target.bucket, f"{head}{tp.topic}/{tp.partition}/")
        if layout.template.startswith("{prefix}/{topic}/{partition}/")
        else None
    )
    objects = list_partition_objects(store, route, keys).get(tp, ())
    return tuple(o for o in objects if committed is None or o.start_offset < committed)


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
            try:
                envelope = route.envelope if route.envelope.enabled else None
                stored = read_object(route.format, decompress(obj.key, raw), envelope)
            except ValueError as exc:
                raise DamagedObjectError(
                    f"s3://{bucket}/{obj.key}: block at byte {block.byte_offset} cannot be read "
                    f"as {route.format.value}: {exc}", tp=obj.tp,
                    hint="Run kafka-archive verify to list damaged objects",
                ) from None
            exact = after is not None and after == block.first_offset + len(stored)
            for i, record in enumerate(stored):
                yield FoundRecord(
                    tp=obj.tp,
                    offset=record.offset if record.offset is not None else block.first_offset + i,
                    offset_exact=record.offset is not None or exact,
                    stored=record,
                    fmt=route.format,
                    key=obj.key,
                )

    return records()


def _read(store: S3Store, route: Route, obj: StoredObject, bound: int | None) -> list[FoundRecord]:
    data = store.get_bytes(route.target.bucket, obj.key) or b""
    try:
        data = decompress(obj.key, data)
        stored = read_object(route.format, data, route.envelope if route.envelope.enabled else None)
    except ValueError as exc:  # UnreadableObject, or damaged compression
        raise DamagedObjectError(
            f"s3://{route.target.bucket}/{obj.key} cannot be read as {route.format.value}: {exc}",
            tp=obj.tp,
            hint="Run kafka-archive verify to list damaged objects",
        ) from None
    exact = bound is not None and bound == obj.start_offset + len(stored)
    return [
        FoundRecord(
            tp=obj.tp,
            offset=record.offset if record.offset is not None else obj.start_offset + i,
            offset_exact=record.offset is not None or exact,
            stored=record,
            fmt=route.format,
            key=obj.key,
        )
        for i, record in enumerate(stored)
    ]


def to_jsonl(record: FoundRecord) -> str:
    return json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":"))

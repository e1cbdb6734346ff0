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
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kafka_archive.archiver.errors import ConfigError, NotInArchiveError
from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.readback import read_object
from kafka_archive.archiver.state.paths import STATE_DIR
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.stored import StoredObject, list_partition_objects
from kafka_archive.kcql.plan import Format, Route, Target

_EXTENSION_FORMATS = {fmt.extension: fmt for fmt in Format if fmt is not Format.CSV_WITHHEADERS}
_LENSES_NAME = re.compile(r"^[0-9]+\.(?P<ext>[A-Za-z]+)$")
_STATE_NAME = re.compile(r"/state/(?P<topic>[^/]+)/(?P<partition>[0-9]+)\.json$")


@dataclass(frozen=True, slots=True)
class FoundRecord:
    """One record read back; ``offset_exact`` is False where the offset could not be proven."""

    tp: TopicPartition
    offset: int
    offset_exact: bool
    value: Any
    fmt: Format
    key: str

    def to_json(self) -> dict[str, Any]:
        value, encoding = _encode(self.value, self.fmt)
        return {
            "topic": self.tp.topic,
            "partition": self.tp.partition,
            "offset": self.offset,
            "offset_exact": self.offset_exact,
            "timestamp": None,
            "key": None,
            "headers": None,
            "value": value,
            "value_encoding": encoding,
            "object": self.key,
        }


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


def default_route(store: S3Store, target: Target, tp: TopicPartition) -> Route:
    """The route of a default-layout archive (``<prefix>/<topic>/<partition>/<offset>.<ext>``),
    its format told by the objects' extension."""
    head = f"{target.prefix}/" if target.prefix else ""
    folder = f"{head}{tp.topic}/{tp.partition}/"
    for key, _ in store.list_objects(target.bucket, folder):
        match = _LENSES_NAME.match(key[len(folder) :])
        if match and match["ext"] in _EXTENSION_FORMATS:
            return Route(target=target, topic=tp.topic, format=_EXTENSION_FORMATS[match["ext"]])
    raise NotInArchiveError(
        f"no archived objects of {tp} under s3://{target.bucket}/{folder}",
        tp=tp,
        hint="Check --from, --topic and --partition; for an archive written with PARTITIONBY "
        "or another layout, pass the KCQL that wrote it with --kcql",
    )


def committed_offset(store: S3Store, target: Target, tp: TopicPartition) -> int | None:
    """The committed offset of ``tp`` when exactly one job archives it under ``target``."""
    head = f"{target.prefix}/" if target.prefix else ""
    found: list[int] = []
    for key, _ in store.list_objects(target.bucket, f"{head}{STATE_DIR}/"):
        match = _STATE_NAME.search(key)
        if match and (match["topic"], int(match["partition"])) == (tp.topic, tp.partition):
            doc = store.get_document(target.bucket, key)
            if doc is not None:
                found.append(int(doc.body["next_offset"]))
    return found[0] if len(found) == 1 else None


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
    layout = layout_for(route)
    if layout.fields or layout.times:
        raise NotInArchiveError(
            f"cat reads archives whose objects follow each other in offset order; this "
            f"route's layout ({layout.template}) spreads {tp} over several folders",
            tp=tp,
            hint="Read the objects of one folder with your own tools, or archive with a "
            "layout without PARTITIONBY or time folders",
        )
    head = f"{route.target.prefix}/" if route.target.prefix else ""
    keys = (
        store.list_objects(route.target.bucket, f"{head}{tp.topic}/{tp.partition}/")
        if layout.template.startswith("{prefix}/{topic}/{partition}/")
        else None
    )
    objects = list_partition_objects(store, route, keys).get(tp, ())
    objects = tuple(o for o in objects if committed is None or o.start_offset < committed)
    starts = [o.start_offset for o in objects]
    index = bisect.bisect_right(starts, offset) - 1
    if index < 0:
        where = f"starts at offset {starts[0]}" if starts else "is empty"
        raise NotInArchiveError(f"offset {offset} is not archived: the archive of {tp} {where}",
                                tp=tp, offset=offset)  # fmt: skip
    left = count
    for position in range(index, len(objects)):
        obj = objects[position]
        bound = objects[position + 1].start_offset if position + 1 < len(objects) else committed
        for record in _read(store, route, obj, bound):
            if record.offset < offset:
                continue
            yield record
            left -= 1
            if left == 0:
                return
    if left == count:
        raise NotInArchiveError(f"offset {offset} is beyond the archive of {tp}", tp=tp,
                                offset=offset)  # fmt: skip


def _read(store: S3Store, route: Route, obj: StoredObject, bound: int | None) -> list[FoundRecord]:
    data = store.get_bytes(route.target.bucket, obj.key) or b""
    stored = read_object(route.format, data)
    exact = bound is not None and bound == obj.start_offset + len(stored)
    return [
        FoundRecord(
            tp=obj.tp,
            offset=record.offset if record.offset is not None else obj.start_offset + i,
            offset_exact=record.offset is not None or exact,
            value=record.value,
            fmt=route.format,
            key=obj.key,
        )
        for i, record in enumerate(stored)
    ]


def to_jsonl(record: FoundRecord) -> str:
    return json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":"))

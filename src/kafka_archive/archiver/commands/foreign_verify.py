"""``verify`` of a foreign archive: each partition's archived records against Kafka's.

It runs on the driver (one listing, a GET per object, one read of each partition's archived
range from Kafka), as ``adopt`` does with :func:`scan`.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kafka_archive.archiver.commands.foreign import ForeignSpec, open_archive
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core import errors
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.archiver.kafka.reader import KafkaReader
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry, decoded
from kafka_archive.archiver.read.foreign import _common
from kafka_archive.archiver.read.foreign.archive import (
    ForeignArchive,
    PlacedRecord,
    grouped,
    place,
    place_end,
)
from kafka_archive.archiver.read.foreign.model import ForeignLayout, ForeignObject, Kept

log = logging.getLogger(__name__)
_GROUP = "kafka-archive.verify"


@dataclass(frozen=True, slots=True)
class Finding:
    """A discrepancy of a foreign archive (offsets inclusive; ``key``: the object's)."""

    first_offset: int | None
    last_offset: int | None
    key: str | None
    problem: str


@dataclass(frozen=True, slots=True)
class ForeignVerdict:
    tp: TopicPartition
    objects: int
    records: int
    first_offset: int | None
    last_offset: int | None
    checked_from: int | None
    checked_to: int | None  # exclusive
    kept: Kept
    findings: tuple[Finding, ...]
    notes: tuple[str, ...]

    @property
    def clean(self) -> bool:
        return not self.findings


@dataclass(frozen=True, slots=True)
class ForeignVerifyResult:
    location: str
    layout: str
    partitions: tuple[ForeignVerdict, ...]
    seconds: float

    @property
    def clean(self) -> bool:
        return all(p.clean for p in self.partitions)


class _Ranges:
    """Offsets with one problem, merged into ranges."""

    def __init__(self) -> None:
        self.spans: list[list[int]] = []

    def add(self, offset: int) -> None:
        if self.spans and self.spans[-1][1] + 1 == offset:
            self.spans[-1][1] = offset
        else:
            self.spans.append([offset, offset])


def scan(
    archive: ForeignArchive, objects: list[ForeignObject]
) -> tuple[dict[int, list[PlacedRecord]], list[Finding], int]:
    """Every record of a partition's objects by offset, what could not be read, and how
    many records were read."""
    by_offset: dict[int, list[PlacedRecord]] = {}
    findings: list[Finding] = []
    records = 0
    previous_end: int | None = None
    for index, obj in enumerate(objects):
        nxt = objects[index + 1] if index + 1 < len(objects) else None
        try:
            decoded = archive.read(obj)
        except errors.DamagedObjectError as exc:
            findings.append(
                Finding(
                    obj.first_offset if obj.first_offset >= 0 else None,
                    obj.last_offset,
                    archive.full_key(obj),
                    exc.message,
                )
            )
            previous_end = obj.last_offset
            continue
        if not decoded:
            findings.append(Finding(None, None, archive.full_key(obj), "empty object"))
            continue
        records += len(decoded)
        for placed in place(obj, decoded, previous_end, nxt):
            by_offset.setdefault(placed.offset, []).append(placed)
        previous_end = place_end(obj, decoded)
    return by_offset, findings, records


def _same(stored: Any, expected: Any) -> bool:
    return bool(stored == expected) or bool(expected == stored)


def verify_partition(
    settings: Settings,
    archive: ForeignArchive,
    tp: TopicPartition,
    objects: list[ForeignObject],
    marks: Any | None,
) -> ForeignVerdict:
    """Compare one partition's foreign objects with each other and with Kafka."""
    kept = archive.kept(objects[0])
    if grouped(objects, kept):
        return _verify_grouped(settings, archive, tp, objects, marks, kept)
    by_offset, findings, count = scan(archive, objects)
    notes: list[str] = []
    for offset, placed in sorted(by_offset.items()):
        if len(placed) > 1:
            keys = ", ".join(archive.full_key(p.obj) for p in placed)
            findings.append(
                Finding(
                    offset,
                    offset,
                    archive.full_key(placed[1].obj),
                    f"archived {len(placed)} times (duplicate): in {keys}",
                )
            )
    if not by_offset:
        return ForeignVerdict(
            tp, len(objects), count, None, None, None, None, kept, tuple(findings), tuple(notes)
        )
    first, last = min(by_offset), max(by_offset)
    checked_from = checked_to = None
    if marks is not None:
        low, high = marks.low, marks.high
        if last >= high:
            findings.append(
                Finding(
                    high,
                    last,
                    None,
                    f"archived offsets {high}..{last} are "
                    f"beyond Kafka's end ({high}): the topic was re-created?",
                )
            )
        if first < low:
            notes.append(
                f"offsets {first}..{min(last, low - 1)} are archived but no longer in "
                "Kafka (retention): not compared"
            )
        checked_from, checked_to = max(first, low), min(last + 1, high)
        if high > last + 1:
            notes.append(f"offsets {last + 1}..{high - 1} are in Kafka but not archived yet")
        if checked_from < checked_to:
            _compare(settings, archive, tp, by_offset, checked_from, checked_to, kept, findings)
    else:
        missing = _Ranges()
        for offset in range(first, last + 1):
            if offset not in by_offset:
                missing.add(offset)
        for a, b in missing.spans:
            findings.append(_missing(archive, tp, objects, a, b, "in no object"))
    return ForeignVerdict(
        tp,
        len(objects),
        count,
        first,
        last,
        checked_from,
        checked_to,
        kept,
        tuple(sorted(findings, key=lambda f: (f.first_offset or 0, f.key or ""))),
        tuple(notes),
    )


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


@dataclass
class _Grouped:
    """A folder-spread partition's archived records as read: by value (what is left to
    match), each object's first record by its start offset, and what could not be read."""

    left: Counter[str] = field(default_factory=Counter)
    firsts: dict[int, tuple[str, ForeignObject]] = field(default_factory=dict)
    count: int = 0
    findings: list[Finding] = field(default_factory=list)


def _read_grouped(archive: ForeignArchive, objects: list[ForeignObject]) -> _Grouped:
    read = _Grouped()
    for obj in objects:
        try:
            records = archive.read(obj)
        except errors.DamagedObjectError as exc:
            read.findings.append(
                Finding(obj.first_offset, None, archive.full_key(obj), exc.message)
            )
            continue
        read.count += len(records)
        read.left.update(_canonical(r.comparable) for r in records)
        if records:
            if obj.first_offset in read.firsts:
                other = read.firsts[obj.first_offset][1]
                read.findings.append(
                    Finding(
                        obj.first_offset,
                        obj.first_offset,
                        archive.full_key(obj),
                        f"starts at the same offset as {archive.full_key(other)} (duplicate)",
                    )
                )
            read.firsts[obj.first_offset] = (_canonical(records[0].comparable), obj)
    return read


def _match_kafka(
    settings: Settings,
    archive: ForeignArchive,
    tp: TopicPartition,
    objects: list[ForeignObject],
    read: _Grouped,
    start: int,
    stop: int,
) -> tuple[int | None, _Ranges]:
    """Kafka's records from ``start`` matched against ``read`` (consumed as they match):
    the last offset matched, and the offsets before the last object's start that no
    archived record matched. A first record unlike Kafka's at its start is a finding."""
    registry = registry_of(settings)
    last_start = max(o.first_offset for o in objects)
    missing, reached = _Ranges(), None
    for record in _kafka_records(settings, tp, start, stop):
        if not +read.left:
            continue
        try:
            value = kafka_value(registry, record.value)
            canon = _canonical(archive.layout.comparable(objects[0], value))
        except ValueError:
            continue
        head = read.firsts.get(record.offset)
        if head is not None and head[0] != canon:
            read.findings.append(
                Finding(
                    record.offset,
                    record.offset,
                    archive.full_key(head[1]),
                    "its first record differs from Kafka's at its start offset",
                )
            )
        if read.left[canon] > 0:
            read.left[canon] -= 1
            reached = record.offset
        elif record.offset < last_start:
            missing.add(record.offset)
    return reached, missing


def _kafka_records(
    settings: Settings, tp: TopicPartition, start: int, stop: int
) -> Iterator[Record]:
    """Kafka's records of ``tp`` from ``start`` up to ``stop``, read under verify's group."""
    with KafkaReader(
        settings.kafka,
        tp,
        start=start,
        stop=stop,
        group=_GROUP,
        idle_timeout=settings.read_timeout_seconds,
    ) as reader:
        for batch in reader.batches():
            yield from (record for record in batch if record.offset < stop)


def _verify_grouped(
    settings: Settings,
    archive: ForeignArchive,
    tp: TopicPartition,
    objects: list[ForeignObject],
    marks: Any | None,
    kept: Kept,
) -> ForeignVerdict:
    """Verify a partition spread over partitioner folders without stored offsets: each
    object's first record must be Kafka's at the object's start offset, and the archive's
    records must be Kafka's from the first start on, as a multiset (each Kafka record in
    one object, once), up to where the archive's records run out."""
    layout = archive.layout
    notes = [
        f"the objects are in {len({o.group for o in objects})} partitioner folders and the "
        "format keeps no offsets: records are matched to Kafka's by value, and each object's "
        "first record by its offset"
    ]
    read = _read_grouped(archive, objects)
    findings, first = read.findings, objects[0].first_offset
    if marks is None:
        return ForeignVerdict(
            tp,
            len(objects),
            read.count,
            first,
            None,
            None,
            None,
            kept,
            tuple(findings),
            tuple(notes),
        )
    start, stop = max(first, marks.low), marks.high
    reached, missing = None, _Ranges()
    if start < stop:
        reached, missing = _match_kafka(settings, archive, tp, objects, read, start, stop)
    for a, b in missing.spans:
        like = max((o for o in objects if o.first_offset <= a), key=lambda o: o.first_offset)
        name = layout.expected_key(tp, a, like).rpartition("/")[2]
        findings.append(
            Finding(
                a,
                b,
                None,
                f"offsets {a}..{b} are in Kafka but in no object: an object is missing "
                f"(deleted?), the sink named it {name} in one of the partitioner's folders",
            )
        )
    extra = sum((+read.left).values())
    if extra:
        findings.append(
            Finding(
                None,
                None,
                None,
                f"{extra} archived record(s) match no Kafka record "
                "(duplicates, or records that differ)",
            )
        )
    return ForeignVerdict(
        tp,
        len(objects),
        read.count,
        first,
        reached,
        start,
        None if reached is None else reached + 1,
        kept,
        tuple(sorted(findings, key=lambda f: (f.first_offset or 0, f.key or ""))),
        tuple(notes),
    )


def _missing(
    archive: ForeignArchive,
    tp: TopicPartition,
    objects: list[ForeignObject],
    first: int,
    last: int,
    what: str,
) -> Finding:
    like = objects[0]
    for obj in objects:
        start = obj.first_offset if obj.first_offset >= 0 else obj.last_offset
        if start is not None and start <= first:
            like = obj
    name = archive.layout.expected_key(tp, first, like)
    return Finding(
        first,
        last,
        f"{archive.target.head}{name}",
        f"offsets {first}..{last} are {what}: the object that held them is missing "
        f"(deleted?), the sink named it {archive.target.head}{name}",
    )


def _compare(
    settings: Settings,
    archive: ForeignArchive,
    tp: TopicPartition,
    by_offset: dict[int, list[PlacedRecord]],
    start: int,
    stop: int,
    kept: Kept,
    findings: list[Finding],
) -> None:
    registry = registry_of(settings)
    missing = _Ranges()
    differs: dict[tuple[str, str], _Ranges] = {}
    seen: set[int] = set()
    for record in _kafka_records(settings, tp, start, stop):
        seen.add(record.offset)
        placed = by_offset.get(record.offset)
        if not placed:
            missing.add(record.offset)
            continue
        stored = placed[0]
        problem = _difference(archive.layout, stored, record, kept, registry)
        if problem:
            where = (archive.full_key(stored.obj), problem)
            differs.setdefault(where, _Ranges()).add(record.offset)
    for a, b in missing.spans:
        objects = sorted(
            {p.obj for ps in by_offset.values() for p in ps},
            key=lambda o: (o.first_offset, o.last_offset or -1),
        )
        findings.append(_missing(archive, tp, objects, a, b, "in Kafka but in no object"))
    for (key, problem), ranges in differs.items():
        for a, b in ranges.spans:
            findings.append(Finding(a, b, key, f"archived record differs from Kafka ({problem})"))
    extra = _Ranges()
    for offset in sorted(by_offset):
        if start <= offset < stop and offset not in seen:
            extra.add(offset)
    for a, b in extra.spans:
        findings.append(
            Finding(
                a,
                b,
                None,
                f"offsets {a}..{b} are archived but Kafka has no "
                "record there (compaction, transaction markers, or a copy)",
            )
        )


def registry_of(settings: Settings) -> SchemaRegistry | None:
    url = settings.schema_registry_url
    return SchemaRegistry(url) if url else None


def kafka_value(registry: SchemaRegistry | None, value: bytes | None) -> bytes | None:
    """A Kafka value as the sink's converter saw it: a registry-framed Avro value (the
    AvroConverter's) as its datum's JSON, the form the sink's rows read back in; others
    as they are."""
    framed, datum = decoded(registry, value)
    return _common.compact(datum) if framed else value


def _difference(
    layout: ForeignLayout,
    placed: PlacedRecord,
    record: Any,
    kept: Kept,
    registry: SchemaRegistry | None = None,
) -> str:
    r = placed.record
    try:
        expected = layout.comparable(placed.obj, kafka_value(registry, record.value))
    except ValueError:
        return "value"
    if not _same(r.comparable, expected):
        return "value"
    if kept.key and _common.loose(r.key) != _common.loose(record.key):
        return "key"
    if kept.timestamp and r.timestamp is not None and r.timestamp != record.timestamp:
        return "timestamp"
    if kept.headers and r.headers is not None:
        mine = sorted((n, _common.loose(v)) for n, v in r.headers)
        theirs = sorted((n, _common.loose(v)) for n, v in dict(record.headers).items())
        if json.dumps(mine, default=str) != json.dumps(theirs, default=str):
            return "headers"
    return ""


def verify(
    settings: Settings, spec: ForeignSpec, topics: set[str] | None, *, offline: bool
) -> ForeignVerifyResult:
    """Check a foreign archive: offline (objects readable, no duplicates, no holes between
    objects), or against Kafka record by record over what both hold."""
    started = time.monotonic()
    archive = open_archive(settings, spec)
    found = archive.objects(topics)
    if not found:
        raise errors.NotInArchiveError(
            f"no {archive.layout.name} objects under s3://{archive.target.bucket}/"
            f"{archive.target.head}",
            hint="Check --from and --layout",
        )
    verdicts = []
    if offline:
        for tp, objs in found.items():
            verdicts.append(verify_partition(settings, archive, tp, objs, None))
    else:
        with KafkaAdmin(settings.kafka, _GROUP) as admin:
            admin.partitions(tuple(sorted({tp.topic for tp in found})))
            marks = admin.offsets(found)
        for tp, objs in found.items():
            verdicts.append(verify_partition(settings, archive, tp, objs, marks[tp]))
    return ForeignVerifyResult(
        spec.location, archive.layout.name, tuple(verdicts), time.monotonic() - started
    )


def render_verify(result: ForeignVerifyResult) -> str:
    lines = [
        f"verify {result.location} ({result.layout} layout): "
        f"{'clean' if result.clean else 'DISCREPANCIES'}"
    ]
    for v in result.partitions:
        checked = (
            f", compared with Kafka {v.checked_from}..{v.checked_to - 1}"
            if v.checked_from is not None
            and v.checked_to is not None
            and v.checked_to > v.checked_from
            else ""
        )
        span = (
            f"offsets {v.first_offset}..{v.last_offset}"
            if v.first_offset is not None
            else "no records"
        )
        lines.append(
            f"  {v.tp}: {v.objects} object(s), {v.records} record(s), {span}{checked}"
            f"{'' if not v.kept.missing() else '; not kept: ' + ', '.join(v.kept.missing())}"
        )
        for f in v.findings:
            where = f" {f.key}" if f.key else ""
            offsets = (
                f" offsets {f.first_offset}..{f.last_offset}" if f.first_offset is not None else ""
            )
            lines.append(f"    PROBLEM{offsets}{where}: {f.problem}")
        for note in v.notes:
            lines.append(f"    note: {note}")
    return "\n".join(lines)


def verify_json(result: ForeignVerifyResult) -> dict[str, Any]:
    return {
        "location": result.location,
        "layout": result.layout,
        "clean": result.clean,
        "partitions": [
            {
                "topic": v.tp.topic,
                "partition": v.tp.partition,
                "objects": v.objects,
                "records": v.records,
                "first_offset": v.first_offset,
                "last_offset": v.last_offset,
                "checked_from": v.checked_from,
                "checked_to": v.checked_to,
                "not_kept": list(v.kept.missing()),
                "discrepancies": [
                    {
                        "first_offset": f.first_offset,
                        "last_offset": f.last_offset,
                        "key": f.key,
                        "problem": f.problem,
                    }
                    for f in v.findings
                ],
                "notes": list(v.notes),
            }
            for v in result.partitions
        ],
    }

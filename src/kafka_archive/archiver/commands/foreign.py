"""What ``cat``, ``verify``, ``restore`` and ``adopt`` do with a foreign archive.

``verify`` and ``adopt`` run on the driver (one listing, a GET per object, one read of each
partition's archived range from Kafka); ``restore`` runs one Spark task per partition with
``restore.restore_unit``, its records coming from :class:`ForeignSource`.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core import errors
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.archiver.kafka.reader import KafkaReader
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry, decoded
from kafka_archive.archiver.read import display as rendering
from kafka_archive.archiver.read.decoding import StoredRecord
from kafka_archive.archiver.read.foreign import _common, layout_for
from kafka_archive.archiver.read.foreign.archive import ForeignArchive, PlacedRecord, place_end
from kafka_archive.archiver.read.foreign.detect import detect
from kafka_archive.archiver.read.foreign.model import ForeignLayout, ForeignObject, Kept
from kafka_archive.archiver.read.listing import parse_location
from kafka_archive.archiver.read.seek import FoundRecord
from kafka_archive.archiver.spark import driver
from kafka_archive.archiver.spark.progress import NullProgress, Progress
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Format, Route, Target

log = logging.getLogger(__name__)
_GROUP = "kafka-archive.verify"


@dataclass(frozen=True, slots=True)
class ForeignSpec:
    """Which foreign archive: where, which sink (None: detect it), the sink's options."""

    location: str
    layout: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    @property
    def target(self) -> Target:
        return parse_location(self.location)


def open_archive(settings: Settings, spec: ForeignSpec) -> ForeignArchive:
    """The archive of ``spec``, its layout detected from the names when not given."""
    target = spec.target
    store = S3Store(settings.s3)
    name = spec.layout
    archive = ForeignArchive(store, target, layout_for(name or "confluent", dict(spec.options)))
    archive.check_bucket()
    if name is None:
        head = target.head
        keys = ((k[len(head) :], s) for k, s in store.list_objects(target.bucket, head))
        name = detect(keys, f"s3://{target.bucket}/{head}")
        log.info(
            "the archive under s3://%s/%s was written by the %s sink", target.bucket, head, name
        )
        archive = ForeignArchive(store, target, layout_for(name, dict(spec.options)))
    return archive


def _partition_objects(archive: ForeignArchive, tp: TopicPartition) -> list[ForeignObject]:
    objects = archive.objects({tp.topic}).get(tp, [])
    if not objects:
        where = f"s3://{archive.target.bucket}/{archive.target.head}"
        raise errors.NotInArchiveError(
            f"no {archive.layout.name} objects of {tp} under {where}",
            tp=tp,
            hint="Check --from, --topic and --layout (and the sink's naming with --layout-option)",
        )
    return objects


# -- cat ---------------------------------------------------------------------------------


def found_record(placed: PlacedRecord, kept: Kept) -> FoundRecord:
    """A placed foreign record as the read side's record (its value bytes as stored)."""
    r = placed.record
    return FoundRecord(
        tp=placed.tp,
        offset=placed.offset,
        offset_exact=placed.exact,
        stored=StoredRecord(
            value=r.comparable,
            raw=r.value,
            content=None,
            offset=r.offset,
            key=r.key if kept.key else None,
            headers=r.headers if kept.headers else None,
            timestamp=r.timestamp if kept.timestamp else None,
            has_envelope=True,
        ),
        fmt=Format.BYTES,
        key=placed.obj.key,
    )


def cat_line(placed: PlacedRecord, archive: ForeignArchive) -> bytes:
    """One line of ``cat --layout``: ``cat``'s document, the object's full key, the sink,
    and ``unknown``: the parts of the record the sink's format did not keep."""
    layout, prefix = archive.layout, archive.target.head
    kept = archive.kept(placed.obj)
    found = found_record(placed, kept)
    try:
        doc = rendering.document(found)
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        doc = rendering.document(found, strict=True)
    doc["object"] = f"{prefix}{placed.obj.key}"
    doc["layout"] = layout.name
    doc["unknown"] = list(kept.missing())
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8") + b"\n"


def cat(
    settings: Settings,
    spec: ForeignSpec,
    topic: str,
    partition: int,
    offset: int,
    count: int,
    output: str = "jsonl",
) -> Iterator[bytes]:
    """Up to ``count`` records of a partition of a foreign archive from ``offset`` on."""
    archive = open_archive(settings, spec)
    tp = TopicPartition(topic, partition)
    objects = _partition_objects(archive, tp)
    left = count
    for placed in archive.placed(objects, offset):
        yield ((placed.record.value or b"") if output == "raw" else cat_line(placed, archive))
        left -= 1
        if left == 0:
            return
    if left == count:
        raise errors.NotInArchiveError(
            f"offset {offset} is beyond the {archive.layout.name} archive of {tp}",
            tp=tp,
            offset=offset,
        )


# -- verify ------------------------------------------------------------------------------


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


def _scan(
    archive: ForeignArchive, objects: list[ForeignObject]
) -> tuple[dict[int, list[PlacedRecord]], list[Finding], int]:
    """Every record of a partition's objects by offset, what could not be read, and how
    many records were read."""
    by_offset: dict[int, list[PlacedRecord]] = {}
    findings: list[Finding] = []
    records = 0
    previous_end: int | None = None
    from kafka_archive.archiver.read.foreign.archive import place

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
    by_offset, findings, count = _scan(archive, objects)
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


def grouped(objects: list[ForeignObject], kept: Kept) -> bool:
    """Whether a partition's records are spread over several partitioner folders (a field
    or time partitioner) in a format that keeps no offsets: only each object's first
    offset is known then, not where its other records were in the partition."""
    return not kept.offset and len({o.group for o in objects}) > 1


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


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
    findings: list[Finding] = []
    notes = [
        f"the objects are in {len({o.group for o in objects})} partitioner folders and the "
        "format keeps no offsets: records are matched to Kafka's by value, and each object's "
        "first record by its offset"
    ]
    left: Counter[str] = Counter()
    firsts: dict[int, tuple[str, ForeignObject]] = {}
    count = 0
    for obj in objects:
        try:
            records = archive.read(obj)
        except errors.DamagedObjectError as exc:
            findings.append(Finding(obj.first_offset, None, archive.full_key(obj), exc.message))
            continue
        count += len(records)
        left.update(_canonical(r.comparable) for r in records)
        if records:
            if obj.first_offset in firsts:
                other = firsts[obj.first_offset][1]
                findings.append(
                    Finding(
                        obj.first_offset,
                        obj.first_offset,
                        archive.full_key(obj),
                        f"starts at the same offset as {archive.full_key(other)} (duplicate)",
                    )
                )
            firsts[obj.first_offset] = (_canonical(records[0].comparable), obj)
    first, last_start = objects[0].first_offset, max(o.first_offset for o in objects)
    if marks is None:
        return ForeignVerdict(
            tp, len(objects), count, first, None, None, None, kept, tuple(findings), tuple(notes)
        )
    registry = registry_of(settings)
    missing = _Ranges()
    start, stop, reached = max(first, marks.low), marks.high, None
    if start < stop:
        with KafkaReader(
            settings.kafka,
            tp,
            start=start,
            stop=stop,
            group=_GROUP,
            idle_timeout=settings.read_timeout_seconds,
        ) as reader:
            for batch in reader.batches():
                for record in batch:
                    if record.offset >= stop or not +left:
                        continue
                    try:
                        value = kafka_value(registry, record.value)
                        canon = _canonical(layout.comparable(objects[0], value))
                    except ValueError:
                        continue
                    head = firsts.get(record.offset)
                    if head is not None and head[0] != canon:
                        findings.append(
                            Finding(
                                record.offset,
                                record.offset,
                                archive.full_key(head[1]),
                                "its first record differs from Kafka's at its start offset",
                            )
                        )
                    if left[canon] > 0:
                        left[canon] -= 1
                        reached = record.offset
                    elif record.offset < last_start:
                        missing.add(record.offset)
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
    extra = sum((+left).values())
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
    checked_to = None if reached is None else reached + 1
    return ForeignVerdict(
        tp,
        len(objects),
        count,
        first,
        reached,
        start,
        checked_to,
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
    with KafkaReader(
        settings.kafka,
        tp,
        start=start,
        stop=stop,
        group=_GROUP,
        idle_timeout=settings.read_timeout_seconds,
    ) as reader:
        for batch in reader.batches():
            for record in batch:
                if record.offset >= stop:
                    continue
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


# -- restore -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ForeignSource:
    """Where a restore unit reads its records from: one partition of a foreign archive
    (picklable: it travels to the Spark task)."""

    target: Target
    layout: str
    options: tuple[tuple[str, str], ...]
    objects: tuple[ForeignObject, ...]

    def records(self, store: S3Store, start: int) -> Iterator[FoundRecord]:
        """The records from ``start`` on. A partition spread over partitioner folders
        without stored offsets (:func:`grouped`) is replayed object by object, and its
        records numbered by their position instead (its offsets are not known), so that
        the restore's progress still grows and resumes."""
        archive = ForeignArchive(store, self.target, layout_for(self.layout, dict(self.options)))
        objects = list(self.objects)
        if not grouped(objects, archive.kept(objects[0])):
            for placed in archive.placed(objects, start):
                yield found_record(placed, archive.kept(placed.obj))
            return
        position = 0
        for obj in objects:
            records = archive.read(obj)
            if position + len(records) <= start:
                position += len(records)
                continue
            for record in records:
                if position >= start:
                    placed = PlacedRecord(obj.tp, position, False, record, obj)
                    yield found_record(placed, archive.kept(obj))
                position += 1


@dataclass(frozen=True, slots=True)
class RestorePlan:
    """What a foreign restore will do, and what it cannot restore."""

    sources: Mapping[TopicPartition, ForeignSource]
    not_kept: tuple[str, ...] = field(default=())
    rows: bool = False  # values are rows restored as their JSON, not the produced bytes


def restore(
    settings: Settings,
    spec: ForeignSpec,
    topic: str,
    to_topic: str,
    *,
    partition_map: str = "same",
    only: Any = None,
    values_only: bool = False,
    max_records: int | None = None,
    progress: Progress | None = None,
) -> Any:
    """Replay a foreign archive of ``topic`` into ``to_topic`` (``restore.restore``'s
    exactly-once, resumable units, reading the foreign objects)."""
    from kafka_archive.archiver.commands import restore as restoring

    progress = progress or NullProgress()
    only = only or restoring.RestoreFilter()
    started = time.monotonic()
    archive = open_archive(settings, spec)
    found = archive.objects({topic})
    if not found:
        raise errors.NotInArchiveError(
            f"nothing of {topic} is in the {archive.layout.name} archive under {spec.location}"
        )
    kept = archive.kept(next(iter(found.values()))[0])
    missing = kept.missing()
    if len(missing) == 3 and not values_only:
        raise errors.ConfigError(
            f"the {archive.layout.name} archive of {topic} keeps values only (no keys, "
            "headers or timestamps)",
            hint="Pass --values-only to replay the values alone",
        )
    if missing and len(missing) < 3:
        log.warning(
            "the %s archive of %s does not keep %s: restored records have none",
            archive.layout.name,
            topic,
            ", ".join(missing),
        )
    if any(o.key.endswith((".avro", ".parquet")) for objs in found.values() for o in objs):
        log.warning(
            "the %s archive of %s holds Avro/Parquet rows: each value is restored as the "
            "row's compact JSON, not the bytes produced (a registry's framing is not kept)",
            archive.layout.name,
            topic,
        )
    if any(grouped(objs, kept) for objs in found.values()):
        log.warning(
            "the %s archive of %s spreads partitions over partitioner folders and keeps no "
            "offsets: they are restored object by object (by each object's first offset), "
            "not in their original order",
            archive.layout.name,
            topic,
        )
        if only.from_offset is not None or only.to_offset is not None:
            raise errors.ConfigError(
                "--from-offset/--to-offset need the records' offsets, which this archive "
                "does not keep"
            )
    if (only.from_ms is not None or only.to_ms is not None) and not kept.timestamp:
        raise errors.ConfigError(
            f"--from-time/--to-time need record timestamps, which the {archive.layout.name} "
            "archive does not keep"
        )
    with KafkaAdmin(settings.kafka, "kafka-archive.restore") as admin:
        try:
            target_partitions = admin.partitions((to_topic,))[to_topic]
        except errors.TopicNotFoundError as exc:
            exc.hint = "restore replays into an existing topic: create it first, or fix --to-topic"
            raise
    if partition_map == "same":
        absent = sorted(tp.partition for tp in found if tp.partition not in target_partitions)
        if absent:
            raise errors.ConfigError(
                f"{to_topic} has {len(target_partitions)} partition(s); the archive has "
                f"partition(s) {', '.join(map(str, absent))}",
                hint="Add partitions to the target topic, or pass --partition-map hash",
            )
    name = archive.layout.name
    route = Route(target=archive.target, topic=topic, format=Format.BYTES)
    units = [
        restoring.RestoreUnit(
            route=route,
            tp=tp,
            objects=(),
            committed=None,
            to_topic=to_topic,
            to_partition=tp.partition if partition_map == "same" else None,
            values_only=values_only,
            only=only,
            max_records=max_records,
            foreign=ForeignSource(archive.target, name, spec.options, tuple(objs)),
        )
        for tp, objs in sorted(found.items())
    ]
    progress.step(f"restoring {len(units)} partition(s) of the {name} archive into {to_topic}")
    with driver.spark_on_demand(settings, f"kafka-archive restore {topic}") as spark:
        results = driver.map_units(
            spark, units, functools.partial(restoring.restore_units, settings=settings)
        )
    outcome = restoring.RestoreRun(
        to_topic, tuple(sorted(results, key=lambda r: r.tp)), time.monotonic() - started
    )
    error = driver.first_error([r for r in outcome.units if r.error_type is not None])
    if error is not None:
        raise error
    return outcome

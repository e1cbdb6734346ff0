"""What ``cat`` and ``restore`` do with a foreign archive, and how one is opened (``verify``:
:mod:`.foreign_verify`; ``adopt``: :mod:`.adopt`).

``restore`` runs one Spark task per partition with ``restore.restore_unit``, its records
coming from :class:`ForeignSource`.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_archive.archiver.commands import restore as restoring
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core import errors
from kafka_archive.archiver.core.failure import first_error
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.read import display as rendering
from kafka_archive.archiver.read.decoding import StoredRecord
from kafka_archive.archiver.read.foreign import layout_for
from kafka_archive.archiver.read.foreign.archive import ForeignArchive, PlacedRecord, grouped
from kafka_archive.archiver.read.foreign.detect import detect
from kafka_archive.archiver.read.foreign.model import ForeignObject, Kept
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
    progress = progress or NullProgress()
    only = only or restoring.RestoreFilter()
    started = time.monotonic()
    archive = open_archive(settings, spec)
    found = archive.objects({topic})
    if not found:
        raise errors.NotInArchiveError(
            f"nothing of {topic} is in the {archive.layout.name} archive under {spec.location}"
        )
    check_restorable(archive, found, topic, values_only=values_only, only=only)
    partitions = restoring.target_partitions(settings, to_topic)
    restoring.require_partitions(partition_map, to_topic, partitions, found)
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
    error = first_error([r.failure for r in outcome.units if r.failure is not None])
    if error is not None:
        raise error
    return outcome


def check_restorable(
    archive: ForeignArchive,
    found: Mapping[TopicPartition, list[ForeignObject]],
    topic: str,
    *,
    values_only: bool,
    only: Any,
) -> None:
    """Refuse what the archive cannot restore as asked (values alone without
    --values-only, offsets or times it does not keep); warn of what it restores otherwise
    than produced."""
    kept = archive.kept(next(iter(found.values()))[0])
    name = archive.layout.name
    missing = kept.missing()
    if len(missing) == 3 and not values_only:
        raise errors.ConfigError(
            f"the {name} archive of {topic} keeps values only (no keys, headers or timestamps)",
            hint="Pass --values-only to replay the values alone",
        )
    if missing and len(missing) < 3:
        log.warning(
            "the %s archive of %s does not keep %s: restored records have none",
            name,
            topic,
            ", ".join(missing),
        )
    if any(o.key.endswith((".avro", ".parquet")) for objs in found.values() for o in objs):
        log.warning(
            "the %s archive of %s holds Avro/Parquet rows: each value is restored as the "
            "row's compact JSON, not the bytes produced (a registry's framing is not kept)",
            name,
            topic,
        )
    if any(grouped(objs, kept) for objs in found.values()):
        log.warning(
            "the %s archive of %s spreads partitions over partitioner folders and keeps no "
            "offsets: they are restored object by object (by each object's first offset), "
            "not in their original order",
            name,
            topic,
        )
        if only.from_offset is not None or only.to_offset is not None:
            raise errors.ConfigError(
                "--from-offset/--to-offset need the records' offsets, which this archive "
                "does not keep"
            )
    if (only.from_ms is not None or only.to_ms is not None) and not kept.timestamp:
        raise errors.ConfigError(
            f"--from-time/--to-time need record timestamps, which the {name} archive does not keep"
        )

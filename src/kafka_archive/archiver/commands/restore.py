"""``restore``: replay archived records into a Kafka topic, exactly once, resumably.

One unit per archived partition (a Spark task, like ``run``). A unit reads its partition's
objects in offset order and produces the records with a transactional producer, in batches;
each batch's transaction also commits the unit's progress (the next archived offset to
restore) as the offset of a consumer group of its own, so records and progress become
visible together or not at all. A re-run resumes from the committed progress, and its
``transactional.id`` (derived from source and target) fences a crashed or zombie attempt.
Consumers must read with ``isolation.level=read_committed`` to see no aborted batch.

Key, headers and timestamp are restored from the envelope (``store.envelope``); an archive
without it can restore values only, and only when the user asks (``values_only``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core import errors
from kafka_archive.archiver.core.failure import TaskFailure, first_error, kind_of
from kafka_archive.archiver.core.model import (
    NO_REQUESTS,
    S3Requests,
    TopicPartition,
    total_requests,
)
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.archiver.kafka.reader import ClientLog
from kafka_archive.archiver.read import listing
from kafka_archive.archiver.read.committed import committed_view
from kafka_archive.archiver.read.decoding import StoredRecord
from kafka_archive.archiver.read.listing import StoredObject
from kafka_archive.archiver.read.seek import FoundRecord, partition_records
from kafka_archive.archiver.spark import driver
from kafka_archive.archiver.spark.progress import NullProgress, Progress
from kafka_archive.archiver.store import requests
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan, Route, Target

log = logging.getLogger(__name__)

BATCH_RECORDS = 5_000
_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class RestoreFilter:
    """Which archived records to restore: offsets ``[from_offset, to_offset]`` and record
    times ``[from_ms, to_ms]`` (both inclusive, None: unbounded)."""

    from_offset: int | None = None
    to_offset: int | None = None
    from_ms: int | None = None
    to_ms: int | None = None

    def admits(self, record: FoundRecord) -> bool:
        if self.to_offset is not None and record.offset > self.to_offset:
            return False
        timestamp = record.stored.timestamp
        if self.from_ms is not None and (timestamp is None or timestamp < self.from_ms):
            return False
        return not (self.to_ms is not None and (timestamp is None or timestamp > self.to_ms))


@dataclass(frozen=True, slots=True)
class RestoreUnit:
    route: Route
    tp: TopicPartition
    objects: tuple[StoredObject, ...]
    committed: int | None
    to_topic: str
    to_partition: int | None  # None: the producer's partitioner (by key)
    values_only: bool
    only: RestoreFilter
    max_records: int | None = None
    batch_records: int = BATCH_RECORDS
    # A foreign archive's partition (read/foreign): its records instead of the route's.
    foreign: Any = None

    @property
    def transactional_id(self) -> str:
        return f"kafka-archive.restore.{self.tp.topic}.{self.tp.partition}.to.{self.to_topic}"

    @property
    def progress_group(self) -> str:
        """The consumer group whose offset of ``to_topic``-0 is this unit's progress."""
        return self.transactional_id


@dataclass(frozen=True, slots=True)
class RestoreResult:
    tp: TopicPartition
    resumed_from: int | None
    records: int
    next_offset: int | None
    seconds: float
    failure: TaskFailure | None = None
    s3_requests: S3Requests = NO_REQUESTS  # the unit's, by type


@dataclass(frozen=True, slots=True)
class RestoreRun:
    to_topic: str
    units: tuple[RestoreResult, ...]
    seconds: float
    s3_requests: S3Requests = NO_REQUESTS  # every S3 request: the driver's and the units'

    @property
    def records(self) -> int:
        return sum(u.records for u in self.units)


def progress_of(consumer: Any, unit: RestoreUnit) -> int | None:
    """The next archived offset a unit has to restore, as its last transaction committed."""
    (found,) = consumer.committed([KafkaTopicPartition(unit.to_topic, 0)], timeout=_TIMEOUT)
    offset = found.offset
    return None if offset is None or offset < 0 else int(offset)


def start_offset(unit: RestoreUnit, progress: int | None) -> int:
    """Where a unit starts: after its committed progress, never before ``from_offset``."""
    first = unit.only.from_offset or 0
    return first if progress is None else max(first, progress)


def batches(records: Iterable[FoundRecord], size: int) -> Iterator[list[FoundRecord]]:
    batch: list[FoundRecord] = []
    for record in records:
        batch.append(record)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _produce(producer: Any, unit: RestoreUnit, record: FoundRecord) -> None:
    stored = record.stored
    kwargs: dict[str, Any] = {"value": stored.raw}
    if not unit.values_only:
        kwargs.update(key=stored.key, headers=list(stored.headers or ()))
        if stored.timestamp is not None:
            kwargs["timestamp"] = stored.timestamp
    if unit.to_partition is not None:
        kwargs["partition"] = unit.to_partition
    while True:
        try:
            producer.produce(unit.to_topic, **kwargs)
            return
        except BufferError:
            producer.poll(0.1)


# librdkafka's lines of states it retries by itself: a transaction coordinator that is still
# loading (the first transactional producer of a cluster). An error that lasts comes back
# from the call that waited for it, and is reported as our one line.
_RETRIED = ("Coordinator load in progress", "COORDINATOR_LOAD_IN_PROGRESS")


class _RestoreLog(ClientLog):
    """The restore producer's librdkafka log: on stderr as librdkafka writes it, without
    the lines of :data:`_RETRIED`."""

    __slots__ = ()

    def log(self, level: int, msg: str, *args: Any) -> None:
        text = " ".join(str(a) for a in args) if args else msg
        if any(retried in text for retried in _RETRIED):
            return
        super().log(level, msg, *args)


def client_log() -> ClientLog:
    """The ``logger`` of restore's producer."""
    return _RestoreLog()


def restore_unit(unit: RestoreUnit, settings: Settings) -> RestoreResult:
    """Restore one archived partition; errors of our taxonomy come back in the result."""
    started = time.monotonic()
    group = unit.progress_group
    consumer = Consumer(
        settings.kafka.client_config(
            defaults={}, fixed={"group.id": group, "enable.auto.commit": False}
        )
    )
    producer = Producer(
        settings.kafka.client_config(
            # The records came out of Kafka: the target topic's max.message.bytes decides
            # what fits, not librdkafka's default limit (1 MB) on a record before compression.
            defaults={"linger.ms": 20, "compression.type": "lz4", "message.max.bytes": _MAX_BYTES},
            fixed={
                "transactional.id": unit.transactional_id,
                "enable.idempotence": True,
                "logger": client_log(),
            },
        )
    )
    progress: int | None = None
    done = 0
    next_offset: int | None = None
    store: S3Store | None = None

    def ended(failure: TaskFailure | None = None) -> RestoreResult:
        """What the unit did (and its S3 requests), with the failure that stopped it."""
        seconds = time.monotonic() - started
        return RestoreResult(unit.tp, progress, done, next_offset, seconds, failure, _spent(store))

    try:
        producer.init_transactions(_TIMEOUT)
        progress = progress_of(consumer, unit)
        begin = start_offset(unit, progress)
        store = S3Store(settings.s3)
        found = (
            unit.foreign.records(store, begin)
            if unit.foreign is not None
            else partition_records(store, unit.route, unit.objects, unit.committed, begin)
        )
        last = unit.only.to_offset
        wanted = (r for r in found if last is None or r.offset <= last)
        for batch in batches(wanted, unit.batch_records):
            if unit.max_records is not None and done >= unit.max_records:
                break
            if unit.max_records is not None:
                batch = batch[: unit.max_records - done]
            producer.begin_transaction()
            for record in batch:
                if unit.only.admits(record):
                    _produce(producer, unit, record)
                    done += 1
            next_offset = batch[-1].offset + 1
            producer.send_offsets_to_transaction(
                [KafkaTopicPartition(unit.to_topic, 0, next_offset)],
                consumer.consumer_group_metadata(),
                _TIMEOUT,
            )
            producer.commit_transaction(_TIMEOUT)
    except KafkaException as exc:
        _abort(producer)
        message, hint = _produce_failure(exc.args[0], unit.to_topic)
        return ended(TaskFailure(kind_of(errors.KafkaReadError), message, hint, unit.tp))
    except errors.ArchiveError as exc:
        _abort(producer)
        return ended(TaskFailure(kind_of(exc), exc.message, exc.hint, unit.tp))
    finally:
        consumer.close()
        producer.flush(_TIMEOUT)
    return ended()


def _spent(store: S3Store | None) -> S3Requests:
    return NO_REQUESTS if store is None else store.requests.read()


_MAX_BYTES = 1_000_000_000  # librdkafka's greatest message.max.bytes
_RESUME = "it resumes after the last committed batch"


def _produce_failure(error: Any, to_topic: str) -> tuple[str, str]:
    """The message and hint of a librdkafka error met while producing to ``to_topic``."""
    text = str(error.str()) if hasattr(error, "str") else str(error)
    name = str(error.name()) if hasattr(error, "name") else ""
    if name in ("MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"):
        return (
            f"producing to {to_topic} failed: a record is larger than the max.message.bytes "
            f"of {to_topic} (or -X message.max.bytes) allows ({text})",
            f"Raise max.message.bytes of {to_topic} (kafka-configs --alter --entity-type "
            f"topics --entity-name {to_topic} --add-config max.message.bytes=N) to the "
            f"source topic's, then run the same restore again: {_RESUME}",
        )
    return (
        f"producing to {to_topic} failed: {text}",
        f"Run the same restore again: {_RESUME}",
    )


def _abort(producer: Any) -> None:
    # No transaction open, or the producer is fenced: either way nothing of it is visible.
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(_TIMEOUT)


def restore_units(units: Iterable[RestoreUnit], settings: Settings) -> Iterator[RestoreResult]:
    """The Spark ``mapPartitions`` function: one result per unit of the Spark partition."""
    for unit in units:
        yield restore_unit(unit, settings)


def restore(
    settings: Settings,
    plan: Plan | None,
    location: str,
    topic: str,
    to_topic: str,
    *,
    partition_map: str = "same",
    only: RestoreFilter | None = None,
    values_only: bool = False,
    max_records: int | None = None,
    progress: Progress | None = None,
) -> RestoreRun:
    """Replay the archive of ``topic`` into ``to_topic``, one Spark task per partition.

    Raises an :class:`ArchiveError` for every failure a user can act on; units that finished
    before another failed keep their committed progress, and a re-run resumes.
    """
    progress = progress or NullProgress()
    only = only or RestoreFilter()
    started = time.monotonic()
    began = requests.PROCESS.read()
    target = listing.parse_location(location)
    store = S3Store(settings.s3)
    route = listing.archived_route(store, plan, target, topic)
    require_values(route, topic)
    view = committed_view(store, target)
    committed = view.offsets(store)
    objects = (
        view.objects(store, route)  # the log's named objects: no listing
        if view.from_log
        else archived_objects(listing.list_partition_objects(store, route), committed, topic)
    )
    if not objects:
        raise errors.NotInArchiveError(f"nothing of {topic} is archived under {target}")
    _check_sample(
        first_record(store, route, target, objects),
        route,
        topic,
        values_only=values_only,
        only=only,
    )
    partitions = target_partitions(settings, to_topic)
    require_partitions(partition_map, to_topic, partitions, objects)
    units = plan_units(
        route,
        objects,
        committed,
        to_topic,
        partition_map=partition_map,
        values_only=values_only,
        only=only,
        max_records=max_records,
    )
    progress.step(
        f"restoring {len(units)} partition(s) into {to_topic} with Spark ({settings.master})"
    )
    with driver.spark_on_demand(settings, f"kafka-archive restore {topic}") as spark:
        results = driver.map_units(
            spark, units, functools.partial(restore_units, settings=settings)
        )
    ordered = tuple(sorted(results, key=lambda r: r.tp))
    spent = requests.PROCESS.read() - began + total_requests(r.s3_requests for r in ordered)
    outcome = RestoreRun(to_topic, ordered, time.monotonic() - started, spent)
    error = first_error([r.failure for r in outcome.units if r.failure is not None])
    if error is not None:
        raise error
    return outcome


# -- what restore decides before it starts (pure) ------------------------------------------


def require_values(route: Route, topic: str) -> None:
    """Refuse an archive that keeps no values: every record would replay as a tombstone."""
    if route.envelope.enabled and not route.envelope.value:
        raise errors.ConfigError(
            f"the archive of {topic} keeps no values ('store.envelope.fields.value'=false): "
            "restoring it would produce a tombstone for every record",
            hint="Restore from an archive that keeps the values",
        )


def archived_objects(
    listed: Mapping[TopicPartition, Sequence[StoredObject]],
    committed: Mapping[TopicPartition, int],
    topic: str,
) -> dict[TopicPartition, tuple[StoredObject, ...]]:
    """The objects of ``topic`` to restore, by partition, in listing order: those below
    their partition's committed offset (above it: a crashed run's); partitions with none
    left out."""
    objects = {
        tp: tuple(o for o in objs if tp not in committed or o.start_offset < committed[tp])
        for tp, objs in listed.items()
        if tp.topic == topic
    }
    return {tp: objs for tp, objs in objects.items() if objs}


def require_envelope(topic: str, stored: StoredRecord, *, values_only: bool) -> None:
    """Refuse to restore values alone unless asked (``--values-only``)."""
    if not stored.has_envelope and not values_only:
        raise errors.ConfigError(
            f"the archive of {topic} stores values only (no keys, headers or timestamps)",
            hint="Pass --values-only to replay the values alone, or archive with "
            "PROPERTIES('store.envelope'=true) to restore whole records",
        )


def replayed_rows(route: Route, stored: StoredRecord) -> str | None:
    """What a record of an archive of rows without the envelope replays as (its CSV text,
    the row as JSON: not the value as produced); None for an archive of values."""
    if stored.has_envelope or route.format.value in ("JSON", "TEXT", "BYTES"):
        return None
    return "its CSV text" if route.format.value.startswith("CSV") else "the row as JSON"


def require_timestamps(stored: StoredRecord, only: RestoreFilter) -> None:
    """Refuse time bounds on an archive whose records have no timestamps."""
    # Without the envelope's metadata ('store.envelope.fields.metadata'=false) no record
    # has a timestamp either: a time bound would silently select nothing.
    timed = stored.has_envelope and stored.timestamp is not None
    if not timed and (only.from_ms is not None or only.to_ms is not None):
        raise errors.ConfigError(
            "--from-time/--to-time need record timestamps, which only the envelope with its "
            "metadata keeps"
        )


def require_partitions(
    partition_map: str,
    to_topic: str,
    target_partitions: Collection[int],
    objects: Iterable[TopicPartition],
) -> None:
    """With ``--partition-map same``, refuse a target topic without one of the archive's
    partitions."""
    if partition_map != "same":
        return
    missing = sorted(tp.partition for tp in objects if tp.partition not in target_partitions)
    if missing:
        raise errors.ConfigError(
            f"{to_topic} has {len(target_partitions)} partition(s); the archive has "
            f"partition(s) {', '.join(map(str, missing))}",
            hint="Add partitions to the target topic, or pass --partition-map hash",
        )


def plan_units(
    route: Route,
    objects: Mapping[TopicPartition, tuple[StoredObject, ...]],
    committed: Mapping[TopicPartition, int],
    to_topic: str,
    *,
    partition_map: str,
    values_only: bool,
    only: RestoreFilter,
    max_records: int | None,
) -> list[RestoreUnit]:
    """One unit per archived partition, in partition order; ``same`` maps a partition to
    the target's of its number, else the producer's partitioner places each record."""
    return [
        RestoreUnit(
            route=route,
            tp=tp,
            objects=objs,
            committed=committed.get(tp),
            to_topic=to_topic,
            to_partition=tp.partition if partition_map == "same" else None,
            values_only=values_only,
            only=only,
            max_records=max_records,
        )
        for tp, objs in sorted(objects.items())
    ]


# -- what restore reads before it starts -------------------------------------------------


def first_record(
    store: S3Store,
    route: Route,
    target: Target,
    objects: Mapping[TopicPartition, tuple[StoredObject, ...]],
) -> FoundRecord:
    """The first record of the first partition's first object: what the archive keeps."""
    first = next(iter(objects.values()))[0]
    found = next(partition_records(store, route, (first,), None), None)
    if found is None:
        raise errors.DamagedObjectError(
            f"s3://{target.bucket}/{first.key} holds no records",
            tp=first.tp,
            hint="Run kafka-archive verify to list damaged objects",
        )
    return found


def _check_sample(
    found: FoundRecord, route: Route, topic: str, *, values_only: bool, only: RestoreFilter
) -> None:
    """Refuse (or warn of) what the archive's first record shows it cannot restore."""
    require_envelope(topic, found.stored, values_only=values_only)
    rows = replayed_rows(route, found.stored)
    if rows is not None:
        log.warning(
            "%s objects hold rows, not the values as produced: each is replayed as `cat "
            "--output raw` prints it (%s)",
            route.format.value,
            rows,
        )
    require_timestamps(found.stored, only)


def target_partitions(settings: Settings, to_topic: str) -> tuple[int, ...]:
    """The partitions of the existing topic restore replays into."""
    with KafkaAdmin(settings.kafka, "kafka-archive.restore") as admin:
        try:
            return admin.partitions((to_topic,))[to_topic]
        except errors.TopicNotFoundError as exc:
            exc.hint = (
                "restore replays into an existing topic: create it first (with at least the "
                "archive's partitions for --partition-map same), or fix --to-topic"
            )
            raise

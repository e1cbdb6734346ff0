"""Executor side: archive one work unit. Runs inside a Spark task (or in-process in tests).

A task builds its own Kafka and S3 clients from picklable settings, reads ``[start, stop)``
of its partition, writes objects, and commits the partition state after every object up to
the committed offset is uploaded (a sub-unit of a split partition leaves the commit to the
driver: :mod:`..plan.split`). The steps, each a module called downward only: read and
transform here, route each record to its open object (:mod:`.chunks`), encode it
(:mod:`.objects`), mark and upload the closed objects (:mod:`.uploads`), commit
(:mod:`.commit`). Errors of our taxonomy come back as a :class:`UnitFailure`
value (they are not worth a Spark retry); anything else propagates so Spark retries the task.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core import errors
from kafka_archive.archiver.core.errors import BadRecordError as EncodeError
from kafka_archive.archiver.core.failure import TaskFailure, kind_of
from kafka_archive.archiver.core.model import (
    NO_REQUESTS,
    S3Requests,
    TopicPartition,
    UnitResult,
    WorkUnit,
)
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.kafka.reader import CONSUMERS, Batch, KafkaReader
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry
from kafka_archive.archiver.spark.progress import ProgressSender, UnitProgress
from kafka_archive.archiver.state.identity import TopicProof
from kafka_archive.archiver.store.s3 import STORES, S3Store
from kafka_archive.archiver.write import deadletter, transforms
from kafka_archive.archiver.write.chunks import ChunkSet
from kafka_archive.archiver.write.commit import commit_unit
from kafka_archive.archiver.write.lifecycle import Lifecycle

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UnitFailure:
    """A unit that stopped on an error of our taxonomy; rebuilt into the error on the driver.

    ``committed`` is the partial result when the unit committed what it cleanly wrote before
    the failure (a bad record under the ``fail`` policy), else None.
    """

    route_index: int
    tp: TopicPartition
    failure: TaskFailure
    committed: UnitResult | None = None
    # The unit's S3 requests not in ``committed``'s.
    s3_requests: S3Requests = NO_REQUESTS

    def to_error(self) -> errors.ArchiveError:
        return self.failure.to_error()

    @property
    def spent(self) -> S3Requests:
        """Every S3 request of the unit."""
        if self.committed is None:
            return self.s3_requests
        return self.committed.s3_requests + self.s3_requests


def requests_of(outcome: UnitResult | UnitFailure) -> S3Requests:
    """Every S3 request of a unit that returned ``outcome``."""
    return outcome.spent if isinstance(outcome, UnitFailure) else outcome.s3_requests


def _failed(sender: ProgressSender, offset: object) -> None:
    """The unit stopped: at the offset its error names (a bad record's), when it names one
    (the progress line said where the unit began)."""
    if isinstance(offset, int):
        sender.finish(failed=True, offset=offset)
    else:
        sender.finish(failed=True)


def archive_unit(unit: WorkUnit, settings: Settings) -> UnitResult | UnitFailure:
    sender = ProgressSender(
        unit.progress_to,
        UnitProgress(
            unit.route_index, unit.tp.topic, unit.tp.partition, unit.start, unit.stop, unit.start
        ),
    )
    store = STORES.take(settings.s3)
    try:
        result = _archive_unit(unit, settings, sender, store)
    except BaseException as exc:
        _failed(sender, getattr(exc, "offset", None))
        raise
    if isinstance(result, UnitFailure) and result.committed is None:
        result = dataclasses.replace(result, s3_requests=store.requests.read())
    STORES.give(settings.s3, store)  # after a unit that returned: nothing of it still running
    if isinstance(result, UnitFailure):
        _failed(sender, result.failure.offset)
    else:
        sender.finish(
            offset=result.next_offset,
            records=result.records,
            size=result.bytes,
            objects=len(result.objects),
        )
    return result


def _archive_unit(
    unit: WorkUnit, settings: Settings, sender: ProgressSender, store: S3Store
) -> UnitResult | UnitFailure:
    """The unit's steps, in order (the module's doc); its failure as a value."""
    started = time.monotonic()
    url = settings.schema_registry_url
    # What the unit read is the planned topic's (not one re-created since the plan's check):
    # proved before each marker and the commit.
    topic = TopicProof(settings.kafka, unit, settings.read_timeout_seconds)
    lifecycle = Lifecycle(unit, store, confirm_topic=topic.confirm)
    chunks = ChunkSet(
        unit,
        store,
        settings.spool_dir,
        SchemaRegistry(url) if url else None,
        settings.s3.stream_part_bytes,
        max_open=settings.max_open_writers,
        lifecycle=lifecycle,
    )
    refused = deadletter.Refused(deadletter.policy_of(unit.route), unit.tp, log)
    transform = transforms.for_unit(unit)
    try:
        with KafkaReader(
            settings.kafka,
            unit.tp,
            start=unit.start,
            stop=unit.stop,
            group=unit.group,
            idle_timeout=settings.read_timeout_seconds,
            until_ms=unit.until_ms,
            pool=CONSUMERS,
        ) as reader:
            bad = _write(reader, transform, chunks, topic, refused, sender)
            if bad is not None:
                record, exc = bad
                # Policy "fail": keep what was cleanly written before this record.
                chunks.flush_all()
                partial = commit_unit(unit, store, lifecycle, record.offset, started)
                failure = TaskFailure(
                    kind_of(errors.BadRecordError),
                    f"cannot store the record as {unit.route.format.value}: {exc}",
                    f"Records before offset {record.offset} were archived; fix or "
                    "skip the record (error policy) and run again",
                    unit.tp,
                    record.offset,
                )
                return UnitFailure(unit.route_index, unit.tp, failure, partial)
            # Once for what the unit read (the markers and commit below need no other); also
            # for a piece or an Iceberg route, whose commit is the driver's.
            topic.confirm()
            next_offset = chunks.finish(reader.next_offset, unit.young_after_ms)
        return commit_unit(unit, store, lifecycle, next_offset, started, refused)
    except Exception as exc:
        chunks.discard_all()
        # Ours, or a library's that we can name (a full spool, a bad -X property): it
        # crosses back to the driver as a value, not as a Spark task failure.
        error = (
            exc
            if isinstance(exc, errors.ArchiveError)
            else errors.from_foreign(exc, spool_dir=settings.spool_dir, tp=unit.tp)
        )
        if error is None:
            raise
        failure = TaskFailure.of(error, tp=unit.tp)
        return UnitFailure(unit.route_index, error.tp or unit.tp, failure)
    except BaseException:
        chunks.discard_all()
        raise


def _write(
    reader: KafkaReader,
    transform: transforms.Transformer | None,
    chunks: ChunkSet,
    topic: TopicProof,
    refused: deadletter.Refused,
    sender: ProgressSender,
) -> tuple[Record, EncodeError] | None:
    """Read the unit's batches, transform them and write their records into the open
    objects; the record the ``fail`` policy stops at, with its error, or None (all read)."""
    read = 0
    for batch in reader.batches():
        if sender.due():  # what the batches before this one did
            sender.update(offset=batch.first_offset, records=read, size=chunks.bytes_so_far())
        read += len(batch)
        topic.read()
        taken: Batch | transforms.TransformedBatch = batch
        if transform is not None:
            taken = transform.apply(batch.records())
        if not transforms.refusals(taken) and chunks.add_batch(taken):
            continue
        for record in taken:
            try:
                transforms.refusal_of(taken, record)
                chunks.add(record)
            except EncodeError as exc:
                if not refused.take(record, exc):
                    return record, exc
    return None


# Units of one Spark partition archived at once: small units (archiver.job packs many into a
# Spark partition) spend most of their time waiting on Kafka and S3 round trips.
UNIT_THREADS = 8


def archive_units(
    units: Iterable[WorkUnit], settings: Settings
) -> Iterator[UnitResult | UnitFailure]:
    """The Spark ``mapPartitions`` function: one result per unit of the Spark partition, in
    order; several units run on up to :data:`UNIT_THREADS` threads."""
    batch = list(units)
    if len(batch) <= 1:
        yield from (archive_unit(unit, settings) for unit in batch)
        return
    with ThreadPoolExecutor(min(UNIT_THREADS, len(batch))) as pool:
        yield from pool.map(functools.partial(archive_unit, settings=settings), batch)

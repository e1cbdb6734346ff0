"""commit_protocol=log, the executor's side: a task creates its objects and nothing else.

Each object is created once, ``If-None-Match: *``, with its writer's run, epoch (the claim's)
and attempt in its metadata (the keys :func:`.writer.object_writer` reads): no intent marker,
no lease proof, no partition state. The driver names the objects in its commit entry
(:mod:`kafka_archive.archiver.commands.commit_log`). A 412 on an object's key is judged by
:func:`.core.found_object` on the log as read then, as the model writer does
(:mod:`.writer`): this attempt's own create (its answer lost) is its own, with the ETag HEAD
shows; an object of a fenced writer, or of an attempt of an earlier batch of this run (the
driver declares them dead when their batch ends), is deleted If-Match on the ETag it was
judged by and created again; one the log names means a newer run committed the partition
(exit 18); any other (a sibling attempt of this batch, a writer the log does not fence)
fails the unit. A found object is never adopted.

Each attempt's objects differ from every other attempt's (issue 37: S3's ETag of a PUT is
the MD5 of its bytes, so a DELETE If-Match judged on a dead attempt's object would also
remove the same bytes created again at its key): :class:`Stamp`, the writer's run, epoch and
attempt, goes into the bytes where the format has a place readers ignore
(:func:`.formats.stamp.has_place`), else into the key (:func:`.writer.attempt_key`).

Attempts are numbered by the batch and Spark's ``TaskContext.taskAttemptId()`` (unique in
the session's SparkContext; ``attemptNumber()`` repeats from batch to batch and job to job):
``batch << 40 | id``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_archive.archiver.core.errors import FencedError, StateConflictError
from kafka_archive.archiver.core.model import WorkUnit
from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import PartitionRef, WriterId
from kafka_archive.archiver.protocol.naming import log_head, partition_ref
from kafka_archive.archiver.protocol.s3 import BucketStore
from kafka_archive.archiver.protocol.steps import drive, read_log
from kafka_archive.archiver.protocol.writer import attempt_key, object_writer
from kafka_archive.archiver.store.s3 import ObjectHead, PreconditionFailed, S3Store

BATCH_SHIFT = 40
_CREATES = 3  # a found object deleted and the create sent again, at most this often


def attempt_number(batch: int) -> int:
    """This task attempt's number in the session: its batch and Spark's task attempt id (0
    outside a Spark task)."""
    task = 0
    try:
        from pyspark import TaskContext  # (on an executor, loaded already)

        context = TaskContext.get()
        if context is not None:
            task = int(context.taskAttemptId())
    except ImportError:  # pragma: no cover  (pyspark is a dependency)
        pass
    return batch << BATCH_SHIFT | (task & ((1 << BATCH_SHIFT) - 1))


class EarlierBatches:
    """The attempts an attempt of ``batch`` knows dead: those of the session's earlier
    batches (the driver ended them, committed what it took of them and declared the rest
    dead). Not its own batch's: a lower attempt number proves nothing (a Spark speculative
    copy, a retry whose first attempt still runs)."""

    def __init__(self, batch: int) -> None:
        self._batch = batch

    def __contains__(self, attempt: object) -> bool:
        return isinstance(attempt, int) and attempt >> BATCH_SHIFT < self._batch


@dataclass(frozen=True, slots=True)
class Stamp:
    """What makes an attempt's objects its own: its writer's run and epoch, and its number."""

    run_id: str
    epoch: int
    attempt: int

    @property
    def text(self) -> str:
        """What the bytes carry (Parquet or Avro file metadata, the gzip header's FNAME)."""
        return f"{self.run_id}.e{self.epoch}a{self.attempt}"

    def key(self, planned: str) -> str:
        """The attempt's own key for ``planned`` (formats with no place in the bytes)."""
        return attempt_key(planned, self.epoch, self.attempt)


def object_metadata(me: WriterId, attempt: int, ref: PartitionRef) -> dict[str, str]:
    """The writer metadata of an object (what :func:`.writer.object_writer` reads back)."""
    return {
        "run-id": me.run_id,
        "epoch": str(me.epoch),
        "attempt": str(attempt),
        "route": ref.route,
        "topic": ref.topic,
        "partition": str(ref.partition),
    }


# -- the ETag of each create, from its response ------------------------------------------

_CONTEXT_KEY = "kafka_archive_log_create"
_ETAGS: dict[tuple[str, str], str] = {}
_ETAGS_LOCK = threading.Lock()
_CREATING: set[tuple[str, str]] = set()
_HANDLERS = "kafka-archive-log-etags"


def _note_create(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    where = (str(params.get("Bucket")), str(params.get("Key")))
    with _ETAGS_LOCK:
        if where in _CREATING:
            context[_CONTEXT_KEY] = where


def _take_etag(parsed: Any = None, context: Any = None, **_: Any) -> None:
    where = (context or {}).get(_CONTEXT_KEY)
    if where is not None and isinstance(parsed, dict) and parsed.get("ETag"):
        with _ETAGS_LOCK:
            _ETAGS[where] = str(parsed["ETag"])


def _watch_creates(store: S3Store) -> None:
    """Once per client: the ETag a PUT or multipart completion of a key being created gave."""
    events = store.client.meta.events
    for operation in ("PutObject", "CompleteMultipartUpload"):
        events.register(
            f"before-parameter-build.s3.{operation}",
            _note_create,
            unique_id=_HANDLERS + "b" + operation,
        )
        events.register(
            f"after-call.s3.{operation}", _take_etag, unique_id=_HANDLERS + "a" + operation
        )


class LogFencing:
    """What :class:`.write.lifecycle.Lifecycle` asks of a unit's writes, in log mode: no lease
    to prove, objects created as the module's doc says."""

    enabled = True
    other_attempt = False  # (never: an object in the way is never another attempt's to take)

    def __init__(self, store: S3Store, unit: WorkUnit) -> None:
        self._store = store
        self._unit = unit
        self._bucket = unit.route.target.bucket
        self._me = WriterId(unit.run_id, unit.epoch)
        self._attempt = attempt_number(unit.log_batch)
        self._ref = partition_ref(unit.tp)
        self._metadata = object_metadata(self._me, self._attempt, self._ref)
        self.stamp = Stamp(unit.run_id, unit.epoch, self._attempt)
        _watch_creates(store)

    def check(self) -> None:
        """No lease: the claim in the log fences, and only the driver's entry commits."""

    def confirm_partition(self) -> None:
        """(Nothing: see :meth:`check`.)"""

    def of_this_unit(self, head: ObjectHead) -> bool:
        return False

    def create(self, key: str, send: Callable[[], None], content: str | None = None) -> str | None:
        """Create ``key`` by calling ``send`` (a PUT or a multipart completion), never over
        another object; returns its ETag (None: the response gave none)."""
        where = (self._bucket, key)
        for _ in range(_CREATES):
            with _ETAGS_LOCK:
                _CREATING.add(where)
                _ETAGS.pop(where, None)
            try:
                with self._store.creating(self._bucket, key, self._metadata):
                    send()
                with _ETAGS_LOCK:
                    return _ETAGS.pop(where, None)
            except PreconditionFailed:
                pass
            finally:
                with _ETAGS_LOCK:
                    _CREATING.discard(where)
            head = self._store.head(self._bucket, key)
            if head is None:
                continue  # removed meanwhile: create it again
            verdict = self._judge(key, head)
            if verdict is core.Found.OURS:
                return head.etag
            self._store.delete_if_match(self._bucket, key, head.etag)
        raise FencedError(f"s3://{self._bucket}/{key} keeps being written by another run")

    def _judge(self, key: str, head: ObjectHead) -> core.Found:
        """What the object found at ``key`` is (:func:`.core.found_object`), on the log read
        now; OURS or DELETE, else the unit stops."""
        writer, attempt, _ = object_writer(_lowered(head.metadata))
        found = core.FoundObject(key, head.etag, writer, attempt)
        target = self._unit.route.target
        state = drive(read_log(log_head(target)), BucketStore(self._store, self._bucket))
        dead = EarlierBatches(self._unit.log_batch)
        verdict = core.found_object(state, self._me, self._attempt, dead, self._ref, found)
        if verdict in (core.Found.OURS, core.Found.DELETE):
            return verdict
        where = f"s3://{self._bucket}/{key}"
        if verdict is core.Found.NAMED or core.is_fenced(state, self._me, [self._ref]):
            raise FencedError(
                f"{where}: a newer run claimed the partition and committed it; this run "
                "stops without committing",
                tp=self._unit.tp,
            )
        if writer == self._me:
            raise StateConflictError(
                f"{where} was written by another attempt of this batch",
                tp=self._unit.tp,
                hint="Run again: the next run's vacuum removes it",
            )
        raise StateConflictError(
            f"{where} exists, written by a writer the commit log does not fence",
            tp=self._unit.tp,
            hint="Another kafka-archive writes this target: run again once it is done",
        )


def _lowered(metadata: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in metadata.items()}

"""The end of a unit: its dead letters marked and uploaded (those below the commit cut), its
partition state committed when the unit commits itself, and its result for the driver."""

from __future__ import annotations

import functools
import time

from kafka_archive.archiver.core.model import ObjectWritten, UnitResult, WorkUnit
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.write import deadletter
from kafka_archive.archiver.write.deadletter import Refused
from kafka_archive.archiver.write.lifecycle import Lifecycle


def commit_unit(
    unit: WorkUnit,
    store: S3Store,
    lifecycle: Lifecycle,
    next_offset: int,
    started: float,
    refused: Refused | None = None,
) -> UnitResult:
    """Commit what the unit wrote below ``next_offset`` (its objects are uploaded) and say
    what it did; ``started`` is when it began (``time.monotonic``)."""
    refused = refused or Refused()
    # Records at or past the commit cut are read again by the next run: so are their
    # refusals, which are not this run's to write.
    letters = refused.letters.below(next_offset)
    dead = _upload_dead_letters(unit, store, lifecycle, letters)
    dead_key = dead.key if dead is not None else None
    written = lifecycle.uploaded()
    state = None
    if next_offset > unit.start and lifecycle.commits_here:
        state = lifecycle.commit(next_offset)
    return UnitResult(
        route_index=unit.route_index,
        tp=unit.tp,
        start=unit.start,
        next_offset=next_offset,
        records=sum(o.records for o in written),
        bytes=sum(o.size for o in written),
        objects=written,
        seconds=time.monotonic() - started,
        skipped_records=refused.skipped,
        dead_letters=len(letters.lines),
        dead_letter_key=dead_key,
        dead_letter_object=dead if dead is not None and dead.etag is not None else None,
        s3_retries=store.retries,
        s3_requests=store.requests.read(),
        # A sub-unit leaves its markers to the driver, which commits it in offset order.
        marker_keys=lifecycle.markers() if unit.deferred else (),
        state=state,
        committed_markers=lifecycle.committed_markers,
    )


def _upload_dead_letters(
    unit: WorkUnit, store: S3Store, lifecycle: Lifecycle, letters: deadletter.DeadLetters
) -> ObjectWritten | None:
    """Mark and upload the unit's dead letters, if any: their object (its ETag in log mode,
    where it is written at the attempt's own key, as an unstamped format's objects are: no
    two attempts write one key, and the log entry names it)."""
    if letters.first_offset is None:
        return None
    key = deadletter.dead_letter_key(unit.route, unit.tp, letters.first_offset)
    stamp = lifecycle.stamp
    key = stamp.key(key) if stamp is not None else key
    body = letters.body()
    lifecycle.mark([key], letters.first_offset)
    etag = lifecycle.create(
        key, functools.partial(store.put_bytes, unit.route.target.bucket, key, body)
    )
    last = max(letters.offsets)
    return ObjectWritten(key, letters.first_offset, last, len(letters.lines), len(body), etag=etag)

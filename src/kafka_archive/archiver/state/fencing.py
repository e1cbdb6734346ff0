"""A task's writes under the job's lease: what an executor does before each step that another
run could be hurt by, long after the driver last checked the lease.

- Before every intent marker, upload and commit, the lease is proved (:class:`LeaseView`:
  the lock is read about once per lease, so this costs no request per object).
- An object is only ever created, never overwritten (``If-None-Match: *``). When its key
  exists, it is this run's own when its metadata names this run and unit and the same
  content (an earlier attempt of the same task wrote the same bytes): the same first and
  last offset, records and size (:data:`.pending.CONTENT_META`, written with a PUT or a
  multipart upload started at the create), or else, for a multipart upload started while
  the object was written, the ETag this attempt's completion would have given. On a
  compacted topic the log cleaner can run between two attempts: the retry then cuts other
  objects from other records, and the first attempt's object under the same key is not
  its own. Otherwise it is replaced (conditional
  delete on its ETag, then create) only after re-reading the partition's state shows it
  unchanged since this run fenced it — nothing committed it since, and no newer run fenced
  the partition. Anything
  else means this run is the stale one: FencedError, and nothing of it is committed.
  An Iceberg table's file (named by run id) is never replaced: adopted or FencedError.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from kafka_archive.archiver.core.model import WorkUnit
from kafka_archive.archiver.state import checkpoint, lease
from kafka_archive.archiver.state.paths import lock_key
from kafka_archive.archiver.state.pending import (
    CONTENT_META,
    RUN_META,
    UNIT_META,
    writer_metadata,
)
from kafka_archive.archiver.store.s3 import ObjectHead, PreconditionFailed, S3Store

_ATTEMPTS = 3


# The lease as this process saw it, per lock, run and epoch: the units of a run that one
# worker archives (many small ones, the pieces of a split partition) share one proof, so
# the lock is read about once per lease per process, not once per unit.
_VIEWS: dict[tuple[str, str, str, int, int], lease.LeaseView] = {}
_VIEWS_LOCK = threading.Lock()


def _lease_view(store: S3Store, unit: WorkUnit) -> lease.LeaseView:
    bucket, key = unit.route.target.bucket, lock_key(unit.route.target)

    def read() -> dict[str, object] | None:
        doc = store.get_document(bucket, key)
        return doc.body if doc is not None else None

    ident = (bucket, key, unit.run_id, unit.epoch, unit.lease_ttl_seconds)
    with _VIEWS_LOCK:
        view = _VIEWS.get(ident)
        if view is None:
            if len(_VIEWS) >= 64:
                _VIEWS.clear()
            view = _VIEWS[ident] = lease.LeaseView(
                read, unit.run_id, unit.epoch, unit.lease_ttl_seconds
            )
        return view


class UnitFencing:
    def __init__(self, store: S3Store, unit: WorkUnit) -> None:
        self._store = store
        self._unit = unit
        self._bucket = unit.route.target.bucket
        self.enabled = unit.epoch > 0
        # Attempts of one unit read the same records and cut the same objects.
        self._mine = {
            RUN_META: unit.run_id,
            UNIT_META: f"{unit.start}-{unit.stop}-{unit.young_after_ms}",
        }
        if self.enabled:
            store.object_metadata = writer_metadata(unit.run_id, unit.epoch, self._mine[UNIT_META])
        self._lease = _lease_view(store, unit)
        # An earlier attempt of this unit wrote other objects (a key held other content):
        # what else it wrote in the unit's range is removed once this attempt commits.
        self.other_attempt = False

    def check(self) -> None:
        """Prove the lease before a write (a lock read about once per lease)."""
        if self.enabled:
            self._lease.check()

    def create(self, key: str, send: Callable[[], None], content: str | None = None) -> None:
        """Create ``key`` by calling ``send`` (a PUT or an upload), never overwriting another
        writer's object at that key; ``content`` is what the object holds
        (:func:`.pending.content_tag`; None: not a data object). See the module's doc."""
        self.check()
        metadata = {CONTENT_META: content} if self.enabled and content is not None else None
        for _ in range(_ATTEMPTS):
            try:
                with self._store.creating(self._bucket, key, metadata):
                    send()
                return
            except PreconditionFailed:
                pass
            refused = self._store.refused_etag(self._bucket, key)
            head = self._store.head(self._bucket, key)
            if head is None:
                continue  # removed meanwhile: create it again
            if self.enabled and self._same_attempt(head, content, refused):
                return  # an attempt of this very unit: the same records, the same bytes
            if self._unit.route.iceberg is not None:
                # A table's file (its key names this run): the driver may be committing
                # it, or have committed it. Never deleted by a task.
                raise lease.fenced(
                    f"s3://{self._bucket}/{key} exists with other boundaries (an attempt of "
                    "another batch of this run); a table's file is never replaced"
                )
            self.other_attempt = self.other_attempt or self.of_this_unit(head)
            self.confirm_partition()
            self._store.delete_if_match(self._bucket, key, head.etag)
        raise lease.fenced(f"s3://{self._bucket}/{key} keeps being written by another run")

    def of_this_unit(self, head: ObjectHead) -> bool:
        """Whether an attempt of this unit (this run, this range) wrote the object."""
        return self.enabled and all(head.metadata.get(k) == v for k, v in self._mine.items())

    def _same_attempt(self, head: ObjectHead, content: str | None, refused: str | None) -> bool:
        """Whether the object ``head`` describes is what this unit is creating: written by
        an attempt of this unit, with this content (see the module's doc)."""
        if not self.of_this_unit(head):
            return False
        theirs = head.metadata.get(CONTENT_META)
        if theirs is not None:
            return theirs == content
        if refused is not None:  # a multipart upload started before its content was known
            return refused == head.etag
        return content is None  # (dead letters: the same records below the same cut)

    def confirm_partition(self) -> None:
        """Prove that no run committed or fenced the unit's partition since it was planned
        (a forced read of the lock, one of the state)."""
        if not self.enabled:
            return
        self._lease.check(force=True)
        unit = self._unit
        loaded = checkpoint.load(self._store, unit.route.target, unit.job, unit.tp)
        if loaded.etag != unit.state_etag:
            raise lease.fenced(
                f"{unit.tp}: another run wrote the partition's state while this one archived it"
            )

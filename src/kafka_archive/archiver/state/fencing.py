"""A task's writes under the job's lease: what an executor does before each step that another
run could be hurt by, long after the driver last checked the lease.

- Before every intent marker, upload and commit, the lease is proved (:class:`LeaseView`:
  the lock is read about once per lease, so this costs no request per object).
- An object is only ever created, never overwritten (``If-None-Match: *``). When its key
  exists, it is this run's own when its metadata names this run and unit (an earlier
  attempt of the same task wrote the same bytes); otherwise it is replaced (conditional
  delete on its ETag, then create) only after re-reading the partition's state shows it
  unchanged since this run fenced it — nothing committed it since, and no newer run fenced
  the partition. Anything
  else means this run is the stale one: FencedError, and nothing of it is committed.
  An Iceberg table's file (named by run id) is never replaced: adopted or FencedError.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from kafka_archive.archiver.model import WorkUnit
from kafka_archive.archiver.state import checkpoint, lease
from kafka_archive.archiver.state.paths import lock_key
from kafka_archive.archiver.state.pending import RUN_META, UNIT_META, writer_metadata
from kafka_archive.archiver.store.s3 import PreconditionFailed, S3Store

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

    def check(self) -> None:
        """Prove the lease before a write (a lock read about once per lease)."""
        if self.enabled:
            self._lease.check()

    def create(self, key: str, send: Callable[[], None]) -> None:
        """Create ``key`` by calling ``send`` (a PUT or an upload), never overwriting another
        writer's object at that key; see the module's doc."""
        self.check()
        for _ in range(_ATTEMPTS):
            try:
                with self._store.creating(self._bucket, key):
                    send()
                return
            except PreconditionFailed:
                pass
            head = self._store.head(self._bucket, key)
            if head is None:
                continue  # removed meanwhile: create it again
            if self.enabled and all(head.metadata.get(k) == v for k, v in self._mine.items()):
                return  # an attempt of this very unit: the same records, the same bytes
            if self._unit.route.iceberg is not None:
                # A table's file (its key names this run): the driver may be committing
                # it, or have committed it. Never deleted by a task.
                raise lease.fenced(
                    f"s3://{self._bucket}/{key} exists with other boundaries (an attempt of "
                    "another batch of this run); a table's file is never replaced"
                )
            self.confirm_partition()
            self._store.delete_if_match(self._bucket, key, head.etag)
        raise lease.fenced(f"s3://{self._bucket}/{key} keeps being written by another run")

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

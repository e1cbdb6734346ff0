"""The migration of an archive of the state protocol to the commit log (issue 37): the first
log-mode run over a target with states calls :func:`migrate` before its own claim.

1. **The marker.** The target's lock (``.kafka-archive/lock.json``) becomes the ``migrated``
   marker: a lock document in a format version above every one the state protocol reads
   (``versions.LOCK_VERSION``), so that every state-protocol writer (``run``, ``follow``,
   ``--reset-state``, ``adopt``, of this version or of an older one since the lock carries
   its version) refuses the target with exit 24 instead of writing beside the log. It
   takes the lock over as a state run would (If-Match, only when released, expired or its
   holder provably dead; a live lease is exit 8), so no state run holds the lease once it
   is there, and a state task's lease proof fails against it (exit 18).
2. **The claim** over every partition the states commit, then **the import**: per
   partition the committed end, the objects below it (found as the readers find them:
   the route's listing, :mod:`.committed`) and the gaps its runs passed (allow_gaps), read
   after the marker is in place. Both are created If-None-Match at the log's next seqs.

The states stay in place, behind the marker: the downgrade is ``export-states`` or restoring
from the log (README). Every step is idempotent: a second call creates nothing; a call
after a crash between any two steps finishes the migration (a claim without its import is
superseded by a new claim, whose epoch fences it).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kafka_archive.archiver.core.errors import ConfigError, JobLockedError, NotInArchiveError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.protocol import core, naming
from kafka_archive.archiver.protocol.log import (
    Entry,
    ObjectRef,
    PartitionImport,
    encode_entry,
    entry_key,
    log_prefix,
)
from kafka_archive.archiver.protocol.s3 import BucketStore
from kafka_archive.archiver.protocol.store import Ambiguous, NotFound, PreconditionFailed
from kafka_archive.archiver.read import listing
from kafka_archive.archiver.read.committed import read_log
from kafka_archive.archiver.read.listing import StoredObject
from kafka_archive.archiver.state import checkpoint, lease, versions
from kafka_archive.archiver.state.paths import lock_key
from kafka_archive.archiver.store.s3 import PreconditionFailed as StatePreconditionFailed
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Route, Target

# The marker's format version: above every lock version the state protocol reads.
MARKER_VERSION = versions.LOCK_VERSION + 1
_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Migration:
    """What one call did: the keys it created (none: already migrated, or nothing to
    migrate) and how many partitions the import carries."""

    created: tuple[str, ...]
    partitions: int


def is_marker(body: object) -> bool:
    return isinstance(body, dict) and body.get("migrated") is True


def migrated(store: S3Store, target: Target) -> bool:
    """Whether ``target`` carries the migrated marker."""
    doc = store.get_document(target.bucket, lock_key(target))
    return doc is not None and is_marker(doc.body)


def mark(store: S3Store, target: Target, run_id: str) -> bool:
    """Put the migrated marker in place of the target's lock (True: created now)."""
    key = lock_key(target)
    where = f"the lock s3://{target.bucket}/{key}"
    for _ in range(_ATTEMPTS):
        held = store.get_document(target.bucket, key)
        if held is not None and is_marker(held.body):
            return False
        if held is not None:
            versions.require(held.body, versions.LOCK_VERSION, where)
            if not lease.may_take_over(held.body, lease.now_ms(), lease.Identity.here()):
                raise JobLockedError(
                    f"a run of job {held.body.get('job')!r} holds {where} (run "
                    f"{held.body.get('run_id')}, lease until {held.body.get('expires_at')}): "
                    "the target cannot be migrated to the commit log while it writes",
                    hint="Let it finish (if it died, its lease expires at that time)",
                )
        previous = lease.epoch_of(held.body) if held is not None else None
        body = {
            "version": MARKER_VERSION,
            "migrated": True,
            "log": log_prefix(naming.log_head(target)),
            "run_id": run_id,
            "epoch": lease.next_epoch(previous, lease.now_ms()),
            "migrated_at": checkpoint.now_iso(),
        }
        try:
            store.put_document(
                target.bucket, key, body, if_match=held.etag if held is not None else None
            )
        except StatePreconditionFailed:
            continue  # the lock changed between our two requests: look again
        return True
    raise JobLockedError(
        f"{where} keeps changing: another run is taking it", hint="Let it finish, then run again"
    )


def imports(
    store: S3Store, target: Target, routes: Sequence[Route], job: str
) -> list[PartitionImport]:
    """Each partition the target's states commit, as the readers see it today: its
    committed end, the objects the route's listing finds below it, and the passed gaps."""
    offsets = listing.committed_offsets(store, target)
    by_topic = {r.topic: r for r in routes if r.target == target and r.iceberg is None}
    listed: dict[TopicPartition, tuple[StoredObject, ...]] = {}
    for topic in sorted({tp.topic for tp in offsets}):
        listed.update(listing.list_partition_objects(store, _route(store, target, topic, by_topic)))
    out = []
    for tp, end in sorted(offsets.items()):
        state = checkpoint.read(store, target, job, tp)
        gaps = tuple(
            (f, min(last, end - 1)) for f, last in (state.gaps if state else ()) if f < end
        )
        below = [o for o in listed.get(tp, ()) if o.start_offset < end]
        out.append(PartitionImport(naming.partition_ref(tp), end, object_refs(below, end), gaps))
    return out


def _route(store: S3Store, target: Target, topic: str, routes: dict[str, Route]) -> Route:
    if topic in routes:
        return routes[topic]
    try:  # a topic no statement names: its objects in the default layout
        return listing.default_route(store, target, topic)
    except (NotInArchiveError, ConfigError):
        raise ConfigError(
            f"s3://{target.bucket}/{target.prefix} holds the archive of {topic}, which no "
            "statement of this job writes, in a layout the migration to the commit log "
            "cannot tell",
            hint=f"Add the statement that wrote {topic} to the job for its first run",
        ) from None


def object_refs(objects: Iterable[StoredObject], end: int) -> tuple[ObjectRef, ...]:
    """The log's names of an archive's objects. The states recorded neither where each
    object ends nor its records: its last offset is bounded by the next object of its group
    (or the end), its records 0 (not counted), its checksum empty."""
    ordered = sorted(objects)
    out = []
    for i, o in enumerate(ordered):
        later = [n.start_offset for n in ordered[i + 1 :] if n.group == o.group]
        last = (later[0] if later else end) - 1
        out.append(ObjectRef(o.key, o.start_offset, last, 0, o.size, ""))
    return tuple(out)


def _create(bucket: BucketStore, entry: Entry, head: str) -> bool:
    """Create ``entry`` at its seq: True when it is ours there, False when another is."""
    key, body = entry_key(head, entry.seq), encode_entry(entry)
    for _ in range(_ATTEMPTS):
        try:
            bucket.put(key, body, {}, if_none_match=True)
            return True
        except PreconditionFailed:
            pass
        except Ambiguous:
            pass
        try:
            found = bucket.get(key)
        except NotFound:
            continue  # a create of ours that did not land: send it again
        return found.body == body
    return False


def migrate(
    store: S3Store, target: Target, routes: Sequence[Route], *, run_id: str, job: str
) -> Migration:
    """Migrate ``target``'s states to its commit log (see the module): the marker, then a
    claim and an import entry. ``routes``: the statements writing to the target (their
    layouts find the objects); ``job``: whose states of the layout before routes owned them
    count."""
    head = naming.log_head(target)
    bucket = BucketStore(store, target.bucket)
    created: list[str] = []
    if core.committed_any(read_log(store, target)) and migrated(store, target):
        return Migration((), 0)
    if mark(store, target, run_id):
        created.append(lock_key(target))
    parts = imports(store, target, routes, job)
    for _ in range(_ATTEMPTS):
        log = read_log(store, target)
        if core.committed_any(log) or not parts:
            return Migration(tuple(created), 0)
        claim = core.claim_entry(log, run_id, [p.ref for p in parts], at=time.time())
        if not _create(bucket, claim, head):
            continue  # another writer's entry took the seq: read the log again
        created.append(entry_key(head, claim.seq))
        log = core.fold(log, claim)
        entry = core.import_entry(log, claim.writer, parts, at=time.time())
        if _create(bucket, entry, head):
            created.append(entry_key(head, entry.seq))
            return Migration(tuple(created), len(parts))
    raise JobLockedError(
        f"the commit log s3://{target.bucket}/{log_prefix(head)} keeps growing under the "
        "migration: another writer is writing it",
        hint="Let it finish, then run again",
    )

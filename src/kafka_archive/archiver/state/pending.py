"""Intent markers: before an object is uploaded, a marker naming it (and its writer: run
and fencing epoch) is written. One marker may name several objects (a unit's small objects,
marked together before they are uploaded), each with its first offset.

A run that crashes (or is fenced) after uploading but before committing leaves objects
behind. The next run lists this partition's markers (one small listing, however many
PARTITIONBY paths the objects went to) and, before it writes anything, deletes every marked
object that is not committed: one that starts at or after the committed offset, or one
below it that was written by another epoch than the commit covering its offset (a fenced
run's object where the committing run wrote other keys). Objects of the committing run
stay; the markers go.

A create cannot carry the lease: a fenced run's PUT (or multipart completion) sent before
recovery can land after it, under a key the committing run left free (other boundaries).
No marker names it any more, so recovery leaves a *watch* where it removes a marker whose
objects it proved uncommitted: ``.kafka-archive/watch/<topic>/<partition>/<start>-<digest>.json``,
naming those keys and their writer (run and epoch). Every later recovery of the partition
(each run, each batch of a follow session: one more listing per target) heads the keys and
deletes, conditionally on its ETag, any object there that this writer wrote; a watch is
dropped at the first recovery after :data:`WATCH_SECONDS`. Only the stale writer's own
objects go (its epoch can never commit again); whatever a newer run wrote at such a key is
left. Older versions do not read watches (nor delete late creates).

A marker names its format version (:mod:`.versions`); one newer than this version reads is
refused, not misread. Versions before that field wrote no version and read only ``key`` and
``start`` (the first object): after a crash, recover with the same or a newer version.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.state import versions
from kafka_archive.archiver.state.checkpoint import PartitionState, committed_by
from kafka_archive.archiver.state.paths import (
    pending_prefix,
    pending_root,
    watch_prefix,
    watch_root,
)
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Target

_OFFSET_WIDTH = 20
# User metadata of every object a run writes (x-amz-meta-*): its writer.
RUN_META, EPOCH_META = "kafka-archive-run", "kafka-archive-epoch"
UNIT_META = "kafka-archive-unit"  # the unit's range: same run and range, same bytes
# What a data object holds: its first and last offset, records and bytes. Attempts of one
# unit read the same records, unless the log cleaner ran between them (a compacted topic):
# then the same key can hold other records, and the object is another.
CONTENT_META = "kafka-archive-content"
# How long recovery watches the keys of a fenced or crashed run's uncommitted objects for a
# create of that run landing late (a PUT delayed in the network, by retries or a frozen host).
WATCH_SECONDS = 3600


def writer_metadata(run: str, epoch: int, unit: str) -> dict[str, str]:
    return {RUN_META: run, EPOCH_META: str(epoch), UNIT_META: unit}


def content_tag(first_offset: int, last_offset: int, records: int, size: int) -> str:
    """The :data:`CONTENT_META` of a data object."""
    return f"{first_offset}-{last_offset}-{records}-{size}"


def writer_epoch(metadata: dict[str, str] | object) -> int | None:
    value = metadata.get(EPOCH_META) if isinstance(metadata, dict) else None
    return int(value) if isinstance(value, str) and value.isdigit() else None


@dataclass(frozen=True, slots=True)
class Marker:
    marker_key: str
    start_offset: int
    watch: bool = False  # a watch left by recovery, not an intent marker


def marker_key(target: Target, tp: TopicPartition, start: int, key: str) -> str:
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"{pending_prefix(target, tp)}{start:0{_OFFSET_WIDTH}d}-{digest}.json"


def mark(
    store: S3Store,
    target: Target,
    job: str,
    tp: TopicPartition,
    start: int,
    key: str,
    run: str,
    epoch: int = 0,
) -> str:
    """Record the intent to upload ``key``; returns the marker's own key."""
    return mark_all(store, target, job, tp, [(key, start)], run, epoch)


def mark_all(
    store: S3Store,
    target: Target,
    job: str,
    tp: TopicPartition,
    objects: Sequence[tuple[str, int]],
    run: str,
    epoch: int = 0,
) -> str:
    """Record the intent to upload each ``(key, first offset)`` of ``objects`` in one marker
    (named by the first); returns the marker's own key."""
    key, start = objects[0]
    mkey = marker_key(target, tp, start, key)
    store.put_bytes(target.bucket, mkey, marker_body(objects, run, epoch, job))
    return mkey


def marker_body(objects: Sequence[tuple[str, int]], run: str, epoch: int, job: str) -> bytes:
    """A marker's JSON: its format version, the first object (``key``, ``start``: all that
    an older recovery reads), its writer, and every object when there are several."""
    key, start = objects[0]
    fields: dict[str, object] = {
        versions.FIELD: versions.MARKER_VERSION,
        "key": key,
        "start": start,
        "run": run,
        "epoch": epoch,
    }
    if len(objects) > 1:
        fields["objects"] = [[k, s] for k, s in objects]
    return json.dumps({**fields, "job": job}).encode()


def marked_objects(
    body: dict[str, object], where: str = "an intent marker"
) -> list[tuple[str, int]]:
    """The ``(key, first offset)`` of each object a marker's body names; a format version
    newer than this version reads is refused (``where`` names the marker in the message)."""
    versions.require(body, versions.MARKER_VERSION, where)
    many = body.get("objects")
    if isinstance(many, list):
        return [(str(k), int(s)) for k, s in many]
    return [(str(body["key"]), int(str(body["start"])))]


def markers(store: S3Store, target: Target, job: str, tp: TopicPartition) -> list[Marker]:
    """The partition's intent markers and watches."""
    found = _listed(store, target, pending_root(target), pending_prefix(target, tp), False)
    watched = _listed(store, target, watch_root(target), watch_prefix(target, tp), True)
    return [*found.get(tp, []), *watched.get(tp, [])]


def markers_of_job(
    store: S3Store, target: Target, job: str, prefix: str | None = None
) -> dict[TopicPartition, list[Marker]]:
    """The markers and watches of every partition archived under ``target``: two listings,
    almost always empty, instead of one per partition (``prefix``: markers under it only)."""
    root = pending_root(target)
    found = _listed(store, target, root, prefix or root, False)
    if prefix is None:
        watches = _listed(store, target, watch_root(target), watch_root(target), True)
        for tp, listed in watches.items():
            found.setdefault(tp, []).extend(listed)
    return found


def _listed(
    store: S3Store, target: Target, root: str, prefix: str, watch: bool
) -> dict[TopicPartition, list[Marker]]:
    """The markers (or watches) under ``prefix`` (in ``root``), by partition."""
    found: dict[TopicPartition, list[Marker]] = {}
    for key in store.list_keys(target.bucket, prefix):
        topic, partition, name = [*key[len(root) :].split("/"), "", ""][:3]
        start_text = name.split("-", 1)[0]
        if partition.isdigit() and start_text.isdigit():
            tp = TopicPartition(topic, int(partition))
            found.setdefault(tp, []).append(Marker(key, int(start_text), watch))
    return found


def watch_key(marker: Marker, target: Target, tp: TopicPartition) -> str:
    """The watch recovery leaves for ``marker`` (one per marker: recovering it twice, after
    a crash between the two, writes the same watch)."""
    name = marker.marker_key.rpartition("/")[2]
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{watch_prefix(target, tp)}{marker.start_offset:0{_OFFSET_WIDTH}d}-{digest}.json"


def watch_body(
    objects: Sequence[tuple[str, int]], run: str, epoch: int, job: str, until_ms: int
) -> bytes:
    """A watch's JSON: the keys of the objects proved uncommitted, their writer, and until
    when to watch them."""
    return json.dumps(
        {
            versions.FIELD: versions.MARKER_VERSION,
            "watch": True,
            "run": run,
            "epoch": epoch,
            "objects": [[k, s] for k, s in objects],
            "until_ms": until_ms,
            "job": job,
        }
    ).encode()


@dataclass(frozen=True, slots=True)
class Recovery:
    deleted_objects: tuple[str, ...]
    cleared_markers: int


def recover(
    store: S3Store,
    target: Target,
    job: str,
    tp: TopicPartition,
    state: PartitionState | None,
    before_delete: Callable[[], None] = lambda: None,
    found: Sequence[Marker] | None = None,
    now_ms: int | None = None,
    own_run: str | None = None,
) -> Recovery:
    """Delete the uncommitted objects that markers name, leave a watch for them, then delete
    the markers; delete what watches find a fenced run created late (see the module's doc).

    ``before_delete`` runs once before the first write or delete, if any (it fences the
    partition and proves the lease: a stale run must never delete). ``found``: the
    partition's markers when they were listed already (:func:`markers_of_job`).
    ``own_run``: the recovering run, whose own markers (a follow session's failed batch)
    leave no watch: its later batches write the same keys as the same writer.
    """
    committed = state.next_offset if state is not None else 0
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if found is None:
        found = markers(store, target, job, tp)
    if not found:
        return Recovery((), 0)
    orphans: list[str] = []
    checked: list[tuple[str, str]] = []  # (key, etag) of objects below the committed offset
    late: list[tuple[str, str]] = []  # (key, etag) of a watched writer's late creates
    watches: list[tuple[str, bytes]] = []
    done: list[str] = []  # markers recovered, watches expired
    for marker in found:
        raw = store.get_bytes(target.bucket, marker.marker_key)
        if raw is None:
            continue
        body = json.loads(raw)
        where = f"the intent marker s3://{target.bucket}/{marker.marker_key}"
        run, epoch = body.get("run"), body.get("epoch")
        if marker.watch:
            if run != own_run:
                late += _late_creates(store, target, marked_objects(body, where), run, epoch)
            if now >= int(body.get("until_ms", 0)):
                done.append(marker.marker_key)
            continue
        done.append(marker.marker_key)
        uncommitted: list[tuple[str, int]] = []  # proved: this writer did not commit them
        for key, start in marked_objects(body, where):
            if start >= committed:
                orphans.append(key)
                uncommitted.append((key, start))
                continue
            if state is None or run == state.run_id:
                continue  # the committing run's own: committed
            owner = committed_by(state.commits, start)
            if owner is not None and owner != epoch:
                uncommitted.append((key, start))
            head = store.head(target.bucket, key) if owner is not None else None
            if head is not None:
                wrote = writer_epoch(head.metadata)
                if wrote is not None and wrote != owner:
                    checked.append((key, head.etag))
        if (
            uncommitted
            and isinstance(epoch, int)
            and epoch > 0
            and isinstance(run, str)
            and run != own_run
        ):
            # (epoch 0: no fencing, its objects carry no writer to tell them by)
            until = now + WATCH_SECONDS * 1000
            watches.append(
                (watch_key(marker, target, tp), watch_body(uncommitted, run, epoch, job, until))
            )
    if not (orphans or checked or late or watches or done):
        return Recovery((), 0)  # only watches, with nothing late yet: nothing to write
    deleted = _clean(store, target.bucket, before_delete, watches, orphans, checked + late, done)
    return Recovery(deleted, sum(not m.watch for m in found))


def _clean(
    store: S3Store,
    bucket: str,
    before_delete: Callable[[], None],
    watches: Sequence[tuple[str, bytes]],
    orphans: list[str],
    matching: Sequence[tuple[str, str]],
    done: list[str],
) -> tuple[str, ...]:
    """:func:`recover`'s writes, fenced first (``before_delete``): the watches, before the
    markers go (a crash keeps one of the two); the orphans; each object of ``matching``
    (key, ETag) that still holds what was checked; last the markers recovered and the
    watches expired. Returns the objects deleted."""
    before_delete()
    for key, body_bytes in watches:
        store.put_bytes(bucket, key, body_bytes)
    if orphans:
        store.delete(bucket, orphans)
    removed = [key for key, etag in matching if store.delete_if_match(bucket, key, etag)]
    if done:
        store.delete(bucket, done)
    return (*orphans, *removed)


def _late_creates(
    store: S3Store, target: Target, objects: Sequence[tuple[str, int]], run: object, epoch: object
) -> list[tuple[str, str]]:
    """(key, ETag) of each watched key that holds an object of the watched writer."""
    found: list[tuple[str, str]] = []
    for key, _ in objects:
        head = store.head(target.bucket, key)
        if (
            head is not None
            and head.metadata.get(RUN_META) == run
            and writer_epoch(head.metadata) == epoch
        ):
            found.append((key, head.etag))
    return found

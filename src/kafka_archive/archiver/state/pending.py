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

A marker names its format version (:mod:`.versions`); one newer than this version reads is
refused, not misread. Versions before that field wrote no version and read only ``key`` and
``start`` (the first object): after a crash, recover with the same or a newer version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.state import versions
from kafka_archive.archiver.state.checkpoint import PartitionState, committed_by
from kafka_archive.archiver.state.paths import pending_prefix, pending_root
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Target

_OFFSET_WIDTH = 20
# User metadata of every object a run writes (x-amz-meta-*): its writer.
RUN_META, EPOCH_META = "kafka-archive-run", "kafka-archive-epoch"
UNIT_META = "kafka-archive-unit"  # the unit's range: same run and range, same bytes


def writer_metadata(run: str, epoch: int, unit: str) -> dict[str, str]:
    return {RUN_META: run, EPOCH_META: str(epoch), UNIT_META: unit}


def writer_epoch(metadata: dict[str, str] | object) -> int | None:
    value = metadata.get(EPOCH_META) if isinstance(metadata, dict) else None
    return int(value) if isinstance(value, str) and value.isdigit() else None


@dataclass(frozen=True, slots=True)
class Marker:
    marker_key: str
    start_offset: int


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
    return markers_of_job(store, target, job, pending_prefix(target, tp)).get(tp, [])


def markers_of_job(
    store: S3Store, target: Target, job: str, prefix: str | None = None
) -> dict[TopicPartition, list[Marker]]:
    """The markers of every partition archived under ``target`` (or under ``prefix``): one
    listing, almost always empty, instead of one per partition."""
    root = pending_root(target)
    found: dict[TopicPartition, list[Marker]] = {}
    for key in store.list_keys(target.bucket, prefix or root):
        topic, partition, name = [*key[len(root) :].split("/"), "", ""][:3]
        start_text = name.split("-", 1)[0]
        if partition.isdigit() and start_text.isdigit():
            tp = TopicPartition(topic, int(partition))
            found.setdefault(tp, []).append(Marker(key, int(start_text)))
    return found


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
) -> Recovery:
    """Delete the uncommitted objects that markers name, then the markers.

    ``before_delete`` runs once before the first delete, if any (it fences the partition
    and proves the lease: a stale run must never delete). ``found``: the partition's
    markers when they were listed already (:func:`markers_of_job`).
    """
    committed = state.next_offset if state is not None else 0
    if found is None:
        found = markers(store, target, job, tp)
    if not found:
        return Recovery((), 0)
    orphans: list[str] = []
    checked: list[tuple[str, str]] = []  # (key, etag) of objects below the committed offset
    for marker in found:
        raw = store.get_bytes(target.bucket, marker.marker_key)
        if raw is None:
            continue
        body = json.loads(raw)
        where = f"the intent marker s3://{target.bucket}/{marker.marker_key}"
        for key, start in marked_objects(body, where):
            if start >= committed:
                orphans.append(key)
                continue
            if state is None or body.get("run") == state.run_id:
                continue  # the committing run's own: committed
            owner = committed_by(state.commits, start)
            head = store.head(target.bucket, key) if owner is not None else None
            if head is not None:
                wrote = writer_epoch(head.metadata)
                if wrote is not None and wrote != owner:
                    checked.append((key, head.etag))
    before_delete()
    if orphans:
        store.delete(target.bucket, orphans)
    removed = [key for key, etag in checked if store.delete_if_match(target.bucket, key, etag)]
    store.delete(target.bucket, [m.marker_key for m in found])
    return Recovery((*orphans, *removed), len(found))

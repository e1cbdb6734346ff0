"""Intent markers: before an object is uploaded, a marker naming it is written.

A run that crashes after uploading but before committing leaves objects beyond the
committed offset. The next run lists this partition's markers (one small listing, however
many PARTITIONBY paths the objects went to) and deletes every marked object that starts at
or after the committed offset, before it writes anything. Markers of objects below the
committed offset are stale (their run committed) and are simply removed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.state.paths import pending_prefix
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Target

_OFFSET_WIDTH = 20


@dataclass(frozen=True, slots=True)
class Marker:
    marker_key: str
    start_offset: int


def marker_key(target: Target, job: str, tp: TopicPartition, start: int, key: str) -> str:
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"{pending_prefix(target, job, tp)}{start:0{_OFFSET_WIDTH}d}-{digest}.json"


def mark(
    store: S3Store, target: Target, job: str, tp: TopicPartition, start: int, key: str, run: str
) -> str:
    """Record the intent to upload ``key``; returns the marker's own key."""
    mkey = marker_key(target, job, tp, start, key)
    body = json.dumps({"key": key, "start": start, "run": run}).encode()
    store.put_bytes(target.bucket, mkey, body)
    return mkey


def markers(store: S3Store, target: Target, job: str, tp: TopicPartition) -> list[Marker]:
    prefix = pending_prefix(target, job, tp)
    found = []
    for key in store.list_keys(target.bucket, prefix):
        name = key[len(prefix) :]
        start_text = name.split("-", 1)[0]
        if start_text.isdigit():
            found.append(Marker(key, int(start_text)))
    return found


@dataclass(frozen=True, slots=True)
class Recovery:
    deleted_objects: tuple[str, ...]
    cleared_markers: int


def recover(
    store: S3Store, target: Target, job: str, tp: TopicPartition, committed: int
) -> Recovery:
    """Delete objects that crashed attempts wrote at or beyond ``committed``, then markers."""
    found = markers(store, target, job, tp)
    orphans: list[str] = []
    for marker in found:
        if marker.start_offset >= committed:
            raw = store.get_bytes(target.bucket, marker.marker_key)
            if raw is not None:
                orphans.append(str(json.loads(raw)["key"]))
    if orphans:
        store.delete(target.bucket, orphans)
    store.delete(target.bucket, [m.marker_key for m in found])
    return Recovery(tuple(orphans), len(found))


def clear(store: S3Store, target: Target, marker_keys: list[str]) -> None:
    store.delete(target.bucket, marker_keys)

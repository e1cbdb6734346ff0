"""The per-partition state object: S3 is the source of truth for where archiving resumes."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from kafka_archive.archiver.errors import StateConflictError
from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.state.paths import state_key
from kafka_archive.archiver.store.s3 import PreconditionFailed, S3Store
from kafka_archive.kcql.plan import Target

FORMAT_VERSION = 1


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What has been archived of one partition: every offset below ``next_offset``."""

    next_offset: int
    run_id: str
    committed_at: str
    last_objects: tuple[str, ...] = ()
    records: int = 0
    bytes: int = 0
    objects: int = 0

    def to_json(self, tp: TopicPartition, job: str) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "job": job,
            "topic": tp.topic,
            "partition": tp.partition,
            "next_offset": self.next_offset,
            "run_id": self.run_id,
            "committed_at": self.committed_at,
            "last_objects": list(self.last_objects),
            "totals": {"records": self.records, "bytes": self.bytes, "objects": self.objects},
        }

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> PartitionState:
        totals = body.get("totals", {})
        return cls(
            next_offset=int(body["next_offset"]),
            run_id=str(body.get("run_id", "")),
            committed_at=str(body.get("committed_at", "")),
            last_objects=tuple(body.get("last_objects", ())),
            records=int(totals.get("records", 0)),
            bytes=int(totals.get("bytes", 0)),
            objects=int(totals.get("objects", 0)),
        )


@dataclass(frozen=True, slots=True)
class LoadedState:
    """A state as read, with the ETag a commit must match (None: no state yet)."""

    state: PartitionState | None
    etag: str | None


def load(store: S3Store, target: Target, job: str, tp: TopicPartition) -> LoadedState:
    doc = store.get_document(target.bucket, state_key(target, job, tp))
    if doc is None:
        return LoadedState(None, None)
    return LoadedState(PartitionState.from_json(doc.body), doc.etag)


def commit(
    store: S3Store,
    target: Target,
    job: str,
    tp: TopicPartition,
    new: PartitionState,
    *,
    expected_etag: str | None,
) -> None:
    """Advance the partition state iff nobody else moved it since it was loaded.

    A lost race is fine when the winner is another attempt of the same run that committed
    the same offset (Spark task retry or speculative copy): both wrote identical objects.
    """
    key = state_key(target, job, tp)
    try:
        store.put_document(target.bucket, key, new.to_json(tp, job), if_match=expected_etag)
    except PreconditionFailed:
        current = load(store, target, job, tp).state
        same_run = current is not None and current.run_id == new.run_id
        if same_run and current is not None and current.next_offset == new.next_offset:
            return
        raise StateConflictError(
            f"the state of s3://{target.bucket}/{key} was changed by another run "
            f"({current.run_id if current else 'deleted'}) while this run was writing",
            tp=tp,
            hint="Two runs of the same job must not overlap; this run's objects beyond the "
            "committed offset will be cleaned up by the next run",
        ) from None

"""The per-partition state object: S3 is the source of truth for where archiving resumes."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any

from kafka_archive.archiver.core.errors import StateConflictError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.state import lease, versions
from kafka_archive.archiver.state.paths import legacy_root, state_key
from kafka_archive.archiver.store.s3 import PreconditionFailed, S3Store
from kafka_archive.kcql.plan import Target

FORMAT_VERSION = versions.STATE_VERSION
# Commit ranges a state remembers: enough for recovery to tell, below the committed
# offset, an object its committing run wrote from one a fenced run left (run ~weekly).
COMMITS_KEPT = 32

Commits = tuple[tuple[int, int], ...]
"""(first offset, epoch) of each commit range, oldest first: range i holds the offsets from
its first offset to the next range's (the last one: to ``next_offset``)."""


def append_commit(commits: Commits, start: int, epoch: int) -> Commits:
    """The history after a commit of ``[start, …)`` by ``epoch`` (merged with the last
    range when it is the same epoch's; the oldest ranges are forgotten)."""
    kept = tuple(c for c in commits if c[0] < start)
    if kept and kept[-1][1] == epoch:
        return kept[-COMMITS_KEPT:]
    return (*kept, (start, epoch))[-COMMITS_KEPT:]


Gaps = tuple[tuple[int, int], ...]
"""(first, last) offsets of each gap a run passed (allow_gaps: records Kafka deleted before
they were archived), oldest first; ``verify`` names them instead of a hole."""
GAPS_KEPT = 100


def append_gap(gaps: Gaps, first: int, last: int) -> Gaps:
    """The passed gaps after one more (merged with the last when they touch; the oldest are
    forgotten)."""
    if gaps and gaps[-1][1] + 1 >= first:
        return (*gaps[:-1], (gaps[-1][0], max(gaps[-1][1], last)))[-GAPS_KEPT:]
    return (*gaps, (first, last))[-GAPS_KEPT:]


def committed_by(commits: Commits, offset: int) -> int | None:
    """The epoch whose commit covers ``offset``, or None when the history does not reach
    back that far (or the state predates epochs)."""
    owner = None
    for first, epoch in commits:
        if first > offset:
            break
        owner = epoch
    return owner


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
    # The fencing epoch of the last run that wrote the state (committed or fenced it).
    epoch: int = 0
    commits: Commits = ()
    gaps: Gaps = ()
    # How often a run fenced the partition again under the same epoch (:func:`fence`,
    # ``again_if``): a follow session after a failed batch, so that the state no longer has
    # the ETag that batch's units planned from (a straggling attempt of them is refused).
    refenced: int = 0

    def to_json(self, tp: TopicPartition, job: str) -> dict[str, Any]:
        body = {
            "version": FORMAT_VERSION,
            "job": job,
            "topic": tp.topic,
            "partition": tp.partition,
            "next_offset": self.next_offset,
            "run_id": self.run_id,
            "committed_at": self.committed_at,
            "last_objects": list(self.last_objects),
            "totals": {"records": self.records, "bytes": self.bytes, "objects": self.objects},
            "epoch": self.epoch,
            "commits": [list(c) for c in self.commits],
        }
        if self.gaps:  # (an older version ignores it, and leaves it out when it commits)
            body["gaps"] = [list(g) for g in self.gaps]
        if self.refenced:  # (likewise)
            body["refenced"] = self.refenced
        return body

    @classmethod
    def from_json(cls, body: dict[str, Any], where: str = "a partition state") -> PartitionState:
        """The state ``body`` holds; a format version newer than this version reads is
        refused (:func:`.versions.require`; ``where`` names the object in the message)."""
        versions.require(body, FORMAT_VERSION, where)
        totals = body.get("totals", {})
        return cls(
            next_offset=int(body["next_offset"]),
            run_id=str(body.get("run_id", "")),
            committed_at=str(body.get("committed_at", "")),
            last_objects=tuple(body.get("last_objects", ())),
            records=int(totals.get("records", 0)),
            bytes=int(totals.get("bytes", 0)),
            objects=int(totals.get("objects", 0)),
            epoch=int(body.get("epoch", 0) or 0),
            commits=tuple((int(c[0]), int(c[1])) for c in body.get("commits", ())),
            gaps=tuple((int(g[0]), int(g[1])) for g in body.get("gaps", ())),
            refenced=int(body.get("refenced", 0) or 0),
        )


@dataclass(frozen=True, slots=True)
class LoadedState:
    """A state as read, with the ETag a commit must match (None: no state yet)."""

    state: PartitionState | None
    etag: str | None


def load(store: S3Store, target: Target, job: str, tp: TopicPartition) -> LoadedState:
    key = state_key(target, tp)
    doc = store.get_document(target.bucket, key)
    if doc is None:
        return LoadedState(None, None)
    where = f"the partition state s3://{target.bucket}/{key}"
    return LoadedState(PartitionState.from_json(doc.body, where), doc.etag)


def read(store: S3Store, target: Target, job: str, tp: TopicPartition) -> PartitionState | None:
    """The partition's state for reading only (``status``, ``verify``): the route's, else
    one of job ``job`` in the layout before routes owned their state (a run adopts it)."""
    loaded = load(store, target, job, tp)
    if loaded.state is not None:
        return loaded.state
    key = f"{legacy_root(target, job)}/state/{tp.topic}/{tp.partition}.json"
    doc = store.get_document(target.bucket, key)
    where = f"the partition state s3://{target.bucket}/{key}"
    return PartitionState.from_json(doc.body, where) if doc is not None else None


def commit(
    store: S3Store,
    target: Target,
    job: str,
    tp: TopicPartition,
    new: PartitionState,
    *,
    expected_etag: str | None,
) -> LoadedState | None:
    """Advance the partition state iff nobody else moved it since it was loaded; returns
    the state written with its new ETag (None when another attempt wrote it: ETag unknown).

    A lost race is fine when the winner is another attempt of the same run that committed
    the same offset (Spark task retry or speculative copy): both wrote identical objects.
    """
    key = state_key(target, tp)
    try:
        etag = store.put_document(target.bucket, key, new.to_json(tp, job), if_match=expected_etag)
    except PreconditionFailed:
        current = load(store, target, job, tp).state
        same_run = current is not None and current.run_id == new.run_id
        if same_run and current is not None and current.next_offset == new.next_offset:
            return None
        if current is not None and current.epoch > new.epoch:
            raise lease.fenced(
                f"{tp}: a run with a newer lease ({current.run_id or 'starting'}) fenced the "
                "partition; this run's commit was refused"
            ) from None
        raise StateConflictError(
            f"the state of s3://{target.bucket}/{key} was changed by another run "
            f"({current.run_id if current else 'deleted'}) while this run was writing",
            tp=tp,
            hint="Two runs writing the same prefix must not overlap; this run's objects beyond the "
            "committed offset will be cleaned up by the next run",
        ) from None
    return LoadedState(new, etag)


def fence(
    store: S3Store,
    target: Target,
    job: str,
    tp: TopicPartition,
    loaded: LoadedState,
    *,
    epoch: int,
    initial_offset: int,
    again_if: str | None = None,
) -> LoadedState:
    """Stamp the partition's state with this run's fencing epoch before the run writes or
    deletes anything of the partition (a state of a job's first run starts at
    ``initial_offset``). Conditional on the ETag read, like every state write, so from here
    on every commit of an older run — conditional on the ETag that run read — fails. A
    state stamped with a newer epoch means this run is the older one: FencedError.

    ``again_if``: an ETag units of this run planned from and left uncommitted (a failed
    batch of a follow session); a state still at it is written again (``refenced``), so
    that attempts of those units still running are refused as an older run's would be.
    """
    for _ in range(5):
        state = loaded.state
        if state is not None and state.epoch > epoch:
            raise lease.fenced(f"{tp}: a run with a newer lease wrote the partition's state")
        again = again_if is not None and loaded.etag == again_if
        if state is not None and state.epoch == epoch and not again:
            return loaded
        new = (
            dataclasses.replace(state, epoch=epoch, refenced=state.refenced + 1)
            if state is not None
            else PartitionState(initial_offset, "", now_iso(), epoch=epoch)
        )
        try:
            etag = store.put_document(
                target.bucket,
                state_key(target, tp),
                new.to_json(tp, job),
                if_match=loaded.etag,
            )
        except PreconditionFailed:
            loaded = load(store, target, job, tp)  # an older run committed meanwhile
            continue
        return LoadedState(new, etag)
    raise StateConflictError(
        "the partition state keeps changing under this run",
        tp=tp,
        hint="Another run of the job is writing it; let it finish",
    )

"""One target's commit log as a session holds it (:class:`TargetLog`: the log's state, the
session's claim there) and its vacuum: the objects of the target's routes that no entry
names, written by a fenced writer (or by this session's own run), deleted If-Match once
older than the grace by the store's clock, at most once a grace period
(:func:`vacuum_due`)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    PartitionRef,
    WriterId,
    entry_key,
    entry_seq,
    log_prefix,
)
from kafka_archive.archiver.protocol.naming import log_head
from kafka_archive.archiver.protocol.s3 import BucketStore
from kafka_archive.archiver.protocol.steps import (
    Head,
    List,
    Put,
    Steps,
    drive,
    read_log,
    send,
    send_read,
)
from kafka_archive.archiver.protocol.store import Ambiguous, NotFound, PreconditionFailed
from kafka_archive.archiver.protocol.writer import object_writer
from kafka_archive.archiver.write.deadletter import DIRECTORY
from kafka_archive.kcql.plan import Target

# The module the vacuum was part of: its log lines keep their logger.
log = logging.getLogger("kafka_archive.archiver.commands.commit_log")


@dataclass
class TargetLog:
    """One target's log as this session knows it, and its claim there."""

    target: Target
    store: BucketStore
    state: core.LogState
    me: WriterId | None = None
    claimed: frozenset[PartitionRef] = frozenset()
    claim_seq: int = 0  # the entry of this session's latest claim

    @property
    def head(self) -> str:
        return log_head(self.target)

    def run(self, steps: Steps[core.LogState]) -> core.LogState:
        return drive(steps, self.store)

    def read(self) -> None:
        self.state = drive(read_log(self.head, self.state), self.store)


def vacuumed_key(head: str) -> str:
    """The target's note of its last session-start vacuum (beside the log, not in it)."""
    return f"{log_prefix(head)[: -len('log/')]}vacuumed.json"


def vacuum_due(tl: TargetLog, grace: float) -> bool:
    """Whether a session's vacuum is due: its listing reads every object of the target (a
    page a thousand), so it runs at most once a grace period, by the store's clock (this
    session's claim entry's LastModified against the note's, :func:`vacuumed_key`). What it
    skips is not lost: an object is a candidate only once older than the grace, and the
    next vacuum, at most a grace after this one, lists it. Always due with a grace of 0."""
    if grace <= 0 or not tl.claim_seq:
        return True
    return drive(_due_steps(tl, grace), tl.store)


def _due_steps(tl: TargetLog, grace: float) -> Steps[bool]:
    try:
        noted = yield from send_read(Head(vacuumed_key(tl.head)))
    except NotFound:
        return True
    try:
        claim = yield from send_read(Head(entry_key(tl.head, tl.claim_seq)))
    except NotFound:
        return True
    return bool(claim.last_modified - noted.last_modified >= grace)


def note_vacuumed(tl: TargetLog) -> Steps[None]:
    """Best effort (a lost note costs the next session a listing)."""
    with contextlib.suppress(PreconditionFailed, Ambiguous):
        yield from send(Put(vacuumed_key(tl.head), b"{}", {}))


def vacuum(tl: TargetLog, segments: set[str], grace: float) -> int:
    """Deletes (If-Match) the objects under ``segments`` (the routes' topics) of ``tl``'s
    target that no entry names, written by a fenced writer or by ``tl``'s own session, older
    than ``grace`` by the store's clock (a partition a rewrite touched: its last rewrite
    entry too); returns how many."""
    if tl.me is None:
        return 0
    doomed = drive(_vacuum_steps(tl, segments, grace), tl.store)
    deleted = 0
    for o in doomed:
        try:
            tl.store.delete(o.key, if_match=o.etag)
            deleted += 1
        except (PreconditionFailed, NotFound, Ambiguous):
            pass
    if deleted:
        log.info(
            "vacuum: removed %d object(s) no commit names under s3://%s/%s",
            deleted,
            tl.target.bucket,
            tl.target.prefix,
        )
    return deleted


def _ours(key: str, head: str, segments: Iterable[str]) -> bool:
    """Whether ``key`` is under one of the target's routes' objects (as keys name topics) or
    their dead letters."""
    name = key.rsplit("/", 1)[-1]
    return any(
        key.startswith((f"{head}{s}/", f"{head}{DIRECTORY}/{s}/")) or name.startswith(f"{s}(")
        for s in segments
    )


@dataclass(frozen=True)
class Unnamed:
    """What a listing of a target showed beside its commit log: ``found``, the routes'
    objects no entry names, each with the writer its metadata names (a HEAD each); ``now``,
    the store's clock (the newest LastModified listed, the log included); ``times``, when
    each entry landed (a rewrite's replaced objects wait for its entry's age too)."""

    found: list[core.Listed]
    now: float
    times: dict[int, float]


def unnamed_steps(
    head: str, state: core.LogState, segments: Iterable[str], min_age: float
) -> Steps[Unnamed]:
    """The target's objects ``state`` does not name (:class:`Unnamed`); those younger than
    ``min_age`` by the store's clock are left out unread."""
    named = state.named()
    listed = yield from send_read(List(head))
    now = max((item.last_modified for item in listed), default=0.0)
    found = []
    for item in listed:
        if item.key.startswith(log_prefix(head)) or item.key in named:
            continue
        if not _ours(item.key, head, segments) or now - item.last_modified < min_age:
            continue
        try:
            got = yield from send_read(Head(item.key))
        except NotFound:
            continue
        writer, _, ref = object_writer(got.metadata)
        found.append(core.Listed(item.key, got.etag, got.last_modified, writer, ref))
    times = {
        seq: item.last_modified for item in listed if (seq := entry_seq(head, item.key)) is not None
    }
    return Unnamed(found, now, times)


def _vacuum_steps(tl: TargetLog, segments: set[str], grace: float) -> Steps[list[core.Listed]]:
    assert tl.me is not None
    tl.state = yield from read_log(tl.head, tl.state)
    u = yield from unnamed_steps(tl.head, tl.state, segments, grace)
    return core.vacuum_candidates(tl.state, tl.me, u.found, u.now, grace, u.times)

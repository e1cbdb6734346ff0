"""``kafka-archive export-states`` (issue 37): the downgrade. A target that keeps a commit log
gets its partition states back, written from the log's fold in the states protocol's format
(:mod:`.state.checkpoint`'s writer), and its migrated marker replaced by a released lock, so
that ``commit_protocol=states`` continues exactly once. (A release before the log reads the
states too, but its listing must parse the keys log mode writes, ``<first>.e<E>a<A>.<ext>``
and compact's ``.g<N>``, which this version's does.)

Per target, in this order (each step safe to crash after; a rerun finishes it):

1. **Refusals, before any write** (exit 2, one line): what the states cannot express.
   Offsets erase or expire removed (the states have no such record: verify would call them
   holes); more passed gaps than a state keeps; objects under the routes that no entry
   names (replaced by compact, erase or expire, or a crashed writer's) that the vacuum of
   step 3 would not remove now (younger than ``log_vacuum_grace_seconds``, or written by
   no writer of the log): the states protocol's readers list the prefix, and would read
   them as archived records. A live session's presence is exit 8 (:mod:`.presence`).
2. **The marker** in the lock's place (:func:`.read.migrate.mark`; a log begun in log mode
   has none yet): until step 5 no states run writes the target (exit 24).
3. **The claim** over every partition of the log, under the exporter's run id
   (:func:`.naming.exporter`): it fences every log writer, and from it on log-mode runs,
   compact, erase and expire refuse the target (exit 2) and the readers take the states
   (:func:`.naming.exported`). Then vacuum, as a session's (If-Match, fenced writers' only).
4. **The states**: per partition the log commits, its committed end, totals, passed gaps
   and the last object, at the released lock's epoch, If-Match on the state there (an old
   one from before the migration) or created.
5. **The lock**: the marker replaced (If-Match) by a lock of this run, released, whose
   epoch is above the marker's: the next states run takes it over at once.

A target whose log export-states claimed and whose marker is gone was exported: nothing is
written again (states runs may have moved its states since). The log stays (entries are
never deleted: a stale writer could create a deleted one).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from kafka_archive.archiver.commands import presence, target_log
from kafka_archive.archiver.commands.commit_log import _create_entry
from kafka_archive.archiver.commands.target_log import TargetLog
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import ConfigError, StateConflictError
from kafka_archive.archiver.core.model import S3Requests
from kafka_archive.archiver.partition.values import topic_segment
from kafka_archive.archiver.plan.naming import job_name_for, new_run_id
from kafka_archive.archiver.protocol import core, naming
from kafka_archive.archiver.protocol.log import PartitionState
from kafka_archive.archiver.protocol.s3 import BucketStore
from kafka_archive.archiver.protocol.steps import Steps, drive, read_log
from kafka_archive.archiver.read.committed import iso_time
from kafka_archive.archiver.read.committed import read_log as read_committed_log
from kafka_archive.archiver.read.migrate import is_marker, mark
from kafka_archive.archiver.state import checkpoint, lease
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.state.paths import lock_key
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan, Target

log = logging.getLogger(__name__)


@dataclass
class ExportResult:
    """What export-states did: per target (``bucket:prefix``) the partitions whose states
    it wrote (0 where it had been exported before); objects vacuum removed; S3 requests."""

    targets: dict[str, int] = field(default_factory=dict)
    already: list[str] = field(default_factory=list)
    vacuumed: int = 0
    s3_requests: S3Requests = field(default_factory=S3Requests)


def export_states(settings: Settings, plan: Plan) -> ExportResult:
    """Every target of ``plan`` back to partition states (the module's doc)."""
    store = S3Store(settings.s3)
    store.requests.reset()
    run_id = naming.exporter(new_run_id())
    job = settings.job_name or job_name_for(plan)
    targets = sorted({r.target for r in plan.routes}, key=lambda t: (t.bucket, t.prefix))
    logs = {t: _logged(store, t) for t in targets}
    result = ExportResult()
    with presence.present(
        store,
        targets,
        run_id=run_id,
        job=job,
        command="export-states",
        ttl_seconds=settings.lock_ttl_seconds,
    ):
        for target in targets:
            _Export(store, settings, target, logs[target], run_id, job, result).run()
    result.s3_requests = store.requests.read()
    return result


def _logged(store: S3Store, target: Target) -> core.LogState:
    """The target's log; one that commits nothing has nothing to export (exit 2)."""
    state = read_committed_log(store, target)
    if not core.committed_any(state):
        raise ConfigError(
            f"export-states: s3://{target.bucket}/{target.prefix} has no commit log that "
            "commits anything: its partition states (if any) are the archive already",
            hint="Run with commit_protocol=states",
        )
    return state


def inexpressible(state: core.LogState) -> str | None:
    """What of the log the partition states cannot say (None: nothing), pure."""
    for ref, st in sorted(state.partitions.items()):
        tp = naming.topic_partition(ref)
        if st.removed:
            reasons = " and ".join(sorted({r.reason for r in st.removed}))
            return (
                f"{tp} has offsets {reasons} by erase or expire, which partition states "
                "cannot record (verify would report them as holes)"
            )
        gaps = checkpoint.Gaps()
        for first, last in st.gaps:
            gaps = checkpoint.append_gap(gaps, first, last)
        if len(gaps) >= checkpoint.GAPS_KEPT:
            return (
                f"{tp} has {len(gaps)} passed gaps; a partition state keeps at most "
                f"{checkpoint.GAPS_KEPT - 1}"
            )
    return None


def state_of(st: PartitionState, run_id: str, epoch: int) -> checkpoint.PartitionState:
    """A partition of the log as the states protocol writes it (pure)."""
    gaps = checkpoint.Gaps()
    for first, last in st.gaps:
        gaps = checkpoint.append_gap(gaps, first, last)
    return checkpoint.PartitionState(
        next_offset=st.end,
        run_id=run_id,
        committed_at=iso_time(st.committed_at) or checkpoint.now_iso(),
        last_objects=(st.objects[-1].key,) if st.objects else (),
        records=sum(o.records for o in st.objects),
        bytes=sum(o.size for o in st.objects),
        objects=len(st.objects),
        epoch=epoch,
        gaps=gaps,
    )


class _Export:
    """One target's export (the module's doc)."""

    def __init__(
        self,
        store: S3Store,
        settings: Settings,
        target: Target,
        state: core.LogState,
        run_id: str,
        job: str,
        result: ExportResult,
    ) -> None:
        self.store, self.settings, self.target = store, settings, target
        self.tl = TargetLog(target, BucketStore(store, target.bucket), state)
        self.run_id, self.job, self.result = run_id, job, result
        self.grace = float(settings.log_vacuum_grace_seconds)
        self.segments = {topic_segment(ref.topic) for ref in state.partitions}

    @property
    def where(self) -> str:
        return f"s3://{self.target.bucket}/{self.target.prefix}"

    def run(self) -> None:
        held = self.store.get_document(self.target.bucket, lock_key(self.target))
        marked = held is not None and is_marker(held.body)
        if naming.exported(self.tl.state) and not marked:
            log.info("%s: exported to partition states before; nothing to do", self.where)
            self.result.already.append(str(self.target))
            return
        why = inexpressible(self.tl.state)
        if why is not None:
            raise ConfigError(
                f"export-states: {self.where}: {why}",
                hint="Keep commit_protocol=log for this archive, or restore it into a topic "
                "that a commit_protocol=states run archives anew",
            )
        self._check_leftovers()
        mark(self.store, self.target, self.run_id)
        marker = self.store.get_document(self.target.bucket, lock_key(self.target))
        assert marker is not None and is_marker(marker.body)
        self._claim()
        self.result.vacuumed += target_log.vacuum(self.tl, self.segments, self.grace)
        self._check_leftovers(after_vacuum=True)
        lock = JobLock(
            self.store,
            self.target,
            self.job,
            self.run_id,
            self.settings.lock_ttl_seconds,
            epoch=lease.next_epoch(lease.epoch_of(marker.body), lease.now_ms()),
        )
        written = self._write_states(lock.epoch)
        self.store.put_document(
            self.target.bucket, lock_key(self.target), lock.released_body(), if_match=marker.etag
        )
        self.result.targets[str(self.target)] = written
        log.info(
            "%s: %d partition state(s) written from the commit log (entry %d); "
            "commit_protocol=states runs continue from them",
            self.where,
            written,
            self.tl.state.seq,
        )

    def _claim(self) -> None:
        refs = sorted(self.tl.state.partitions)
        while True:
            entry = core.claim_entry(self.tl.state, self.run_id, refs, at=time.time())
            if drive(_create_entry(self.tl.head, entry), self.tl.store):
                self.tl.state = core.fold(self.tl.state, entry)
                self.tl.me, self.tl.claimed = entry.writer, frozenset(refs)
                self.tl.claim_seq = entry.seq
                return
            self.tl.read()
            if inexpressible(self.tl.state) is not None:  # (a rewrite landed meanwhile)
                raise StateConflictError(
                    f"export-states: {self.where}: the commit log moved meanwhile",
                    hint="Run export-states again",
                )

    def _write_states(self, epoch: int) -> int:
        written = 0
        for ref, st in sorted(self.tl.state.partitions.items()):
            if st.end <= 0:
                continue  # nothing committed (an Iceberg route's: its table is its state)
            tp = naming.topic_partition(ref)
            loaded = checkpoint.load(self.store, self.target, self.job, tp)
            new = state_of(st, self.run_id, epoch)
            checkpoint.commit(self.store, self.target, self.job, tp, new, expected_etag=loaded.etag)
            written += 1
        return written

    def _check_leftovers(self, *, after_vacuum: bool = False) -> None:
        """Objects under the log's topics that no entry names and that vacuum (after this
        export's claim) does not remove now: refused (exit 2; after vacuum: exit 9, run
        again)."""
        stay, when = drive(self._leftovers(), self.tl.store)
        if not stay:
            return
        first = f"s3://{self.target.bucket}/{stay[0]}"
        what = (
            f"export-states: {len(stay)} object(s) under {self.where} that no commit of its "
            f"log names (e.g. {first}: replaced by compact, erase or expire, or left by a "
            "crashed run) would read as archived records to partition states"
        )
        if after_vacuum:
            raise StateConflictError(what, hint="Run export-states again")
        hint = (
            f"Run export-states again after {presence.at_time(when)} (vacuum removes them "
            "once older than log_vacuum_grace_seconds)"
            if when
            else "They were written by no writer of the commit log: delete them (after "
            "checking what they hold), then run export-states again"
        )
        raise ConfigError(what, hint=hint)

    def _leftovers(self) -> Steps[tuple[list[str], float]]:
        """The unnamed objects vacuum would leave, and when (store's clock) the last of
        them becomes old enough (0: some never will, their writer is unknown)."""
        state = yield from read_log(self.tl.head, self.tl.state)
        me = self.tl.me
        if me is None:  # (before the claim: as the claim will leave the log)
            claim = core.claim_entry(state, self.run_id, sorted(state.partitions))
            state, me = core.fold(state, claim), claim.writer
        u = yield from target_log.unnamed_steps(self.tl.head, state, self.segments, 0.0)
        found, now, times = u.found, u.now, u.times
        unknown = [o.key for o in found if o.writer is None]
        doomed = {o.key for o in core.vacuum_candidates(state, me, found, now, self.grace, times)}
        stay = sorted(o.key for o in found if o.key not in doomed)
        if not stay:
            return [], 0.0
        newest = max(
            [o.last_modified for o in found if o.key in stay] + list(times.values()),
            default=now,
        )
        return stay, (0.0 if unknown else newest + self.grace)


def render(result: ExportResult) -> str:
    """The command's summary line(s)."""
    lines = [
        f"export-states: {where}: {n} partition state(s) written from the commit log; "
        "commit_protocol=states continues from them"
        for where, n in result.targets.items()
    ]
    lines += [f"export-states: {at}: exported before, nothing written" for at in result.already]
    if result.vacuumed:
        lines.append(f"vacuum: removed {result.vacuumed} object(s) no commit names")
    return "\n".join(lines)

"""commit_protocol=log, the driver's side (experimental; issue 37): a session's commit log on
each of its targets, as :mod:`.protocol.writer` models it.

At the session's start, per target: read the log (the newest checkpoint plus the tail), create
one claim entry over the plan's partitions there (:func:`.core.claim_entry`: the lease, epoch
= highest + 1; a 412 reads what was missed and claims again), then vacuum. Each partition
starts at its committed end in the log (:meth:`CommitLog.known`, fed to the planner as the
states it knows). Tasks create their objects only (:mod:`.protocol.tasks`); after each Spark
job the driver creates one commit entry per target at the next seq (:func:`.core.commit_entry`,
If-None-Match): every partition's contiguous prefix of what its units (or pieces) wrote. A
412 reads the tail: a higher claim on one of our partitions fences us (exit 18, nothing
committed), else the commit is checked again and tried at the next seq; a create without
answer is settled by reading the entry (:func:`.core.create_outcome`). Every
:data:`CHECKPOINT_EVERY` entries a checkpoint. No lock, lease renewals, fences, intent markers
or watches: the claim is the lease, an entry's creation the commit point and the fence.

Vacuum replaces ``pending.recover``: objects under the target's routes that no entry names,
written by a fenced writer, older than ``log_vacuum_grace_seconds`` by the store's clock,
deleted If-Match (:func:`.core.vacuum_candidates`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafka_archive.archiver.commands import target_log
from kafka_archive.archiver.commands.target_log import TargetLog
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core import errors
from kafka_archive.archiver.core.errors import ConfigError, FencedError, StateConflictError
from kafka_archive.archiver.core.model import (
    Gap,
    ObjectWritten,
    PartitionSkip,
    S3Requests,
    TopicPartition,
    UnitResult,
    WorkUnit,
    total_requests,
)
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.partition.values import topic_segment
from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    Entry,
    Gaps,
    ObjectRef,
    PartitionCommit,
    PartitionRef,
    checkpoint_key,
    decode_entry,
    encode_checkpoint,
    encode_entry,
    entry_key,
    log_prefix,
)
from kafka_archive.archiver.protocol.naming import exported, log_head, partition_ref
from kafka_archive.archiver.protocol.s3 import BucketStore
from kafka_archive.archiver.protocol.steps import (
    Put,
    Steps,
    drive,
    get_or_none,
    send,
)
from kafka_archive.archiver.protocol.store import Ambiguous, PreconditionFailed
from kafka_archive.archiver.read.committed import read_log as read_committed_log
from kafka_archive.archiver.read.migrate import mark, migrate
from kafka_archive.archiver.state import checkpoint, legacy
from kafka_archive.archiver.state.paths import pending_root, state_root
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.write.task import UnitFailure, requests_of
from kafka_archive.kcql.plan import Plan, Route, Target

log = logging.getLogger(__name__)

CHECKPOINT_EVERY = 10  # entries between checkpoints (K)

Outcome = UnitResult | UnitFailure
Known = dict[tuple[int, TopicPartition], checkpoint.LoadedState]


def is_log(settings: Settings) -> bool:
    return settings.commit_protocol == "log"


def migrate_states(
    store: S3Store,
    target: Target,
    routes: Sequence[Route],
    state: core.LogState,
    *,
    run_id: str,
    job: str,
) -> bool:
    """A target that holds partition states and whose log commits nothing: its states become
    the log's import (:func:`.read.migrate.migrate`: the migrated marker in the lock's place,
    a claim, one import entry), once; True when the log may have changed (read it again).
    A state run still holding the target's lease stops this one (exit 8): nothing written."""
    if core.committed_any(state):
        return False
    root = f"{state_root(target)}/"
    keys = list(store.list_keys(target.bucket, root))
    refuse_unsettled(store, target, keys)
    if not any(key.startswith(f"{root}state/") for key in keys):
        return False
    done = migrate(store, target, routes, run_id=run_id, job=job)
    log.info(
        "s3://%s/%s: its partition states moved onto the commit log (%d partition(s) imported)",
        target.bucket,
        target.prefix,
        done.partitions,
    )
    return True


def refuse_unsettled(store: S3Store, target: Target, keys: Sequence[str]) -> None:
    """Before a migration: what only the states protocol settles refuses it (exit 2, nothing
    written), ``keys`` the target's ``.kafka-archive/`` listing. Intent markers name objects a
    crashed or fenced states run may have left past its commit: the log would never name
    them and vacuum leaves an object without a log writer, so they would stay beside the
    archive for good. States of an earlier version's per-job layout are not read by the
    migration: the log would begin their partitions again (every record twice)."""
    where = f"s3://{target.bucket}/{target.prefix}"
    hint = (
        "Run it once with commit_protocol=states (it {}), then again with "
        "commit_protocol=log: the commit log takes the archive over"
    )
    if any(key.startswith(pending_root(target)) for key in keys):
        raise ConfigError(
            f"{where} holds intent markers of a states-protocol run that crashed or was "
            "fenced: the commit log cannot take it over before they are recovered",
            hint=hint.format("recovers them"),
        )
    if legacy.scan(store, target, keys).partitions():
        raise ConfigError(
            f"{where} holds partition states of an earlier version's per-job layout "
            "(.kafka-archive/<job>/state/), which the migration to the commit log does not read",
            hint=hint.format("adopts them"),
        )


def refuse_logged(store: S3Store, target: Target, keys: Iterable[str]) -> None:
    """commit_protocol=states over a target whose ``.kafka-archive/`` listing (``keys``) has
    a commit log: its progress is in the log, which states mode does not read; it would
    archive every partition again (exit 2). Unless ``export-states`` wrote the log's
    progress back into the states (:func:`.naming.exported`; the log is read only here)."""
    head = log_prefix(log_head(target))
    if any(key.startswith(head) for key in keys):
        if exported(read_committed_log(store, target)):
            return
        raise ConfigError(
            f"s3://{target.bucket}/{target.prefix} holds a commit log (written with "
            "commit_protocol=log), which commit_protocol=states does not read",
            hint="Run with commit_protocol=log",
        )


def refuse_exported(target: Target, state: core.LogState) -> None:
    """commit_protocol=log over a target ``export-states`` moved back to partition states
    (exit 2): the log would not see what states runs archived since."""
    if exported(state):
        raise ConfigError(
            f"s3://{target.bucket}/{target.prefix} was moved back to partition states by "
            "export-states: its commit log does not hold what commit_protocol=states runs "
            "archived since",
            hint="Run with commit_protocol=states",
        )


class CommitLog:
    """A session's commit log on each of its targets (the module's doc)."""

    def __init__(self, s3: S3Store, settings: Settings, run_id: str) -> None:
        self._s3 = s3
        self._settings = settings
        self.run_id = run_id
        self.targets: dict[Target, TargetLog] = {}
        self.batches = 0
        # Where each partition of the batch moves without objects: (commit start, gaps passed,
        # begins) by (route index, partition), from the plan (:meth:`units`).
        self._moves: dict[tuple[int, TopicPartition], Move] = {}
        # Partitions that begin at 0 though the log committed nothing on them: found by an
        # earlier run (its claim names them) or found empty by this session. A run pins every
        # partition it finds, an empty one at 0 (``--start``): a later run, or batch, must not
        # decide again (``latest`` would skip what arrived in between).
        self._found: set[tuple[Target, PartitionRef]] = set()

    def open(self, plan: Plan, partitions: Mapping[str, Sequence[int]], job: str) -> int:
        """At the session's start: each target's log read (an archive of states migrated onto
        it first), the plan's partitions claimed, vacuum; returns how many objects vacuum
        deleted."""
        for target in sorted({r.target for r in plan.routes}, key=lambda t: (t.bucket, t.prefix)):
            tl = TargetLog(target, BucketStore(self._s3, target.bucket), core.LogState())
            # (read.committed's: a log of a newer format or damaged is one line, exit 24 or 14)
            tl.state = read_committed_log(self._s3, target)
            refuse_exported(target, tl.state)
            routes = [r for r in plan.routes if r.target == target]
            if migrate_states(self._s3, target, routes, tl.state, run_id=self.run_id, job=job):
                tl.read()
            elif any(r.iceberg is not None for r in routes):
                # An Iceberg target has no states to migrate, but a states-mode run may hold
                # its lease: the lock is taken over (a live holder: exit 8) and the migrated
                # marker put in its place, so that no states-mode run writes it again.
                mark(self._s3, target, self.run_id)
            self._found |= {(target, ref) for ref, st in tl.state.partitions.items() if st.holder}
            self.targets[target] = tl
        self.claim(plan, partitions)
        return sum(self._vacuum(tl, plan) for tl in self.targets.values())

    def claim(self, plan: Plan, partitions: Mapping[str, Sequence[int]]) -> None:
        """A claim on each target whose partitions in the plan are not all claimed by this
        session (its start; partitions and topics that joined a follow session)."""
        for target, tl in self.targets.items():
            refs = {
                partition_ref(TopicPartition(r.topic, p))
                for r in plan.routes
                if r.target == target
                for p in partitions.get(r.topic, ())
            }
            if not refs or (tl.me is not None and refs <= tl.claimed):
                continue
            refs |= tl.claimed
            while True:
                entry = core.claim_entry(tl.state, self.run_id, sorted(refs), at=time.time())
                if drive(_create_entry(tl.head, entry), tl.store):
                    tl.state = core.fold(tl.state, entry)
                    tl.me, tl.claimed = entry.writer, frozenset(refs)
                    tl.claim_seq = entry.seq
                    log.info(
                        "claimed %d partition(s) of s3://%s/%s (commit log entry %d, epoch %d)",
                        len(refs),
                        target.bucket,
                        target.prefix,
                        entry.seq,
                        entry.writer.epoch,
                    )
                    break
                tl.read()

    def epoch(self, target: Target) -> int:
        me = self.targets[target].me
        return 0 if me is None else me.epoch

    def known(self, wanted: Iterable[tuple[int, Target, TopicPartition]]) -> Known:
        """Each wanted (route index, partition) as the log has it: its committed end as the
        state's next offset; 0 where the log committed nothing on a partition an earlier run
        or batch found; none on any other (``--start`` decides)."""
        out: Known = {}
        for number, target, tp in wanted:
            st = self.targets[target].state.partitions.get(partition_ref(tp))
            if st is None or not (st.objects or st.begin or st.end):
                pinned = (target, partition_ref(tp)) in self._found
                found = checkpoint.PartitionState(0, self.run_id, "") if pinned else None
                out[(number, tp)] = checkpoint.LoadedState(found, None)
            else:
                state = checkpoint.PartitionState(st.end, self.run_id, "")
                out[(number, tp)] = checkpoint.LoadedState(state, None)
        return out

    def units(
        self,
        plan: Plan,
        units: Sequence[WorkUnit],
        idle: Sequence[PartitionSkip] = (),
        gaps: Sequence[Gap] = (),
    ) -> list[WorkUnit]:
        """The batch's units in log mode (its number, the claim's epoch). A unit starts at its
        partition's committed end, or past it: at ``--start`` on a partition the log has not
        begun, or past a gap it passes (``--allow-gaps``), which its commit records. ``idle``
        partitions (nothing new) that move so are committed now, with no object, so that the
        next run resumes there. Any other start is refused (exit 2)."""
        self.batches += 1
        self._moves = {}
        passed = {(g.route_index, g.tp): g for g in gaps if g.passed}
        out = []
        for unit in units:
            tl = self.targets[unit.route.target]
            # (An Iceberg route's table is its state, and its commit checks the table's.)
            if unit.route.iceberg is None:
                start = unit.part_start if unit.part_start is not None else unit.start
                move = _move(tl.state, unit.tp, start, passed.get((unit.route_index, unit.tp)))
                if move is not None:
                    self._moves[(unit.route_index, unit.tp)] = move
            out.append(
                dataclasses.replace(unit, log_batch=self.batches, epoch=self.epoch(tl.target))
            )
        moved: dict[Target, list[PartitionCommit]] = {}
        for skip in idle:
            if plan.routes[skip.route_index].iceberg is not None:
                continue  # (a table is its own state)
            target = plan.routes[skip.route_index].target
            st = self.targets[target].state
            gap = passed.get((skip.route_index, skip.tp))
            move = _move(st, skip.tp, skip.next_offset, gap)
            if move is None and skip.next_offset == 0:  # found empty: it begins at 0
                self._found.add((target, partition_ref(skip.tp)))
            if move is not None and (move.gaps or move.begins):
                ref = partition_ref(skip.tp)
                moved.setdefault(target, []).append(
                    PartitionCommit(
                        ref, move.start, skip.next_offset, (), gaps=move.gaps, begins=move.begins
                    )
                )
        for target, partition_commits in moved.items():
            self._commit(self.targets[target], partition_commits)
        return out

    def commit(self, units: Sequence[WorkUnit], results: Sequence[Outcome]) -> list[Outcome]:
        """After the batch's Spark job: one commit entry per target naming each partition's
        contiguous prefix of objects; the results merged per partition (as committed). An
        Iceberg route's results are returned as they are: the log does not name a table's
        files, the driver's table commit does (:func:`.iceberg.commits.commit_all`)."""
        by_partition: dict[tuple[int, TopicPartition], list[tuple[WorkUnit, Outcome]]] = {}
        merged: list[Outcome] = []
        for unit, result in zip(units, results, strict=True):
            if unit.route.iceberg is not None:  # (never split: one unit a partition)
                merged.append(result)
                continue
            by_partition.setdefault((unit.route_index, unit.tp), []).append((unit, result))
        commits: dict[Target, list[PartitionCommit]] = {}
        tiled: dict[int, bool] = {}  # by route index: a route's layout, once, not per partition
        for (number, _), group in by_partition.items():
            group.sort(key=lambda p: p[0].start)
            target = group[0][0].route.target
            if number not in tiled:
                tiled[number] = not interleaved(group[0][0].route)
            move = self._moves.get((group[0][0].route_index, group[0][0].tp))
            outcome, commit = _partition(
                group, self.targets[target].state, move, tiled=tiled[number]
            )
            merged.append(outcome)
            if commit is not None:
                commits.setdefault(target, []).append(commit)
        for target, partition_commits in commits.items():
            self._commit(self.targets[target], partition_commits)
        return merged

    def _commit(self, tl: TargetLog, commits: Sequence[PartitionCommit]) -> None:
        assert tl.me is not None
        while True:
            verdict = core.commit_verdict(tl.state, tl.me, commits)
            if verdict is core.Verdict.FENCED:
                raise FencedError(
                    f"s3://{tl.target.bucket}/{tl.target.prefix}: a newer run claimed "
                    "partitions of this one in the commit log; this run committed nothing "
                    "of its last batch"
                )
            if verdict is core.Verdict.STALE:
                raise StateConflictError(
                    f"s3://{tl.target.bucket}/{tl.target.prefix}: the commit log moved under "
                    "this run's claim",
                    hint="Run again",
                )
            entry = core.commit_entry(tl.state, tl.me, commits, at=time.time())
            if drive(_create_entry(tl.head, entry), tl.store):
                tl.state = core.fold(tl.state, entry)
                if entry.seq % CHECKPOINT_EVERY == 0:
                    drive(_checkpoint(tl.head, tl.state), tl.store)
                return
            tl.read()

    def check_fenced(self) -> None:
        """Between batches: the tail read (one GET a target); a higher claim on a partition
        of ours fences this session (exit 18)."""
        for tl in self.targets.values():
            tl.read()
            if tl.me is not None and core.is_fenced(tl.state, tl.me, tl.claimed):
                raise FencedError(
                    f"s3://{tl.target.bucket}/{tl.target.prefix}: a newer run claimed "
                    "partitions of this one in the commit log"
                )

    # -- vacuum ------------------------------------------------------------------------------

    def _vacuum(self, tl: TargetLog, plan: Plan) -> int:
        """Deletes (If-Match) the objects of the target's routes that no entry names, written
        by a fenced writer, older than the grace by the store's clock; returns how many. At
        most once a grace period (:func:`.target_log.vacuum_due`)."""
        segments = {
            topic_segment(r.topic)
            for r in plan.routes
            if r.target == tl.target and r.iceberg is None  # (a table's files: its orphans)
        }
        if not segments:
            return 0  # only Iceberg routes: nothing to list (a table's prefix holds its files)
        grace = float(self._settings.log_vacuum_grace_seconds)
        if not target_log.vacuum_due(tl, grace):
            return 0
        deleted = target_log.vacuum(tl, segments, grace)
        drive(target_log.note_vacuumed(tl), tl.store)
        return deleted


# -- entries ---------------------------------------------------------------------------------


def _create_entry(head: str, entry: Entry) -> Steps[bool]:
    """Creates ``entry`` at its seq: True once it is there, False when another holds it."""
    key = entry_key(head, entry.seq)
    body = encode_entry(entry)
    while True:
        try:
            yield from send(Put(key, body, {}, if_none_match=True))
            return True
        except PreconditionFailed:
            pass
        except Ambiguous:
            pass
        got = yield from get_or_none(key)
        found = None if got is None else decode_entry(got.body)
        outcome = core.create_outcome(found, entry)
        if outcome is not core.Outcome.UNKNOWN:
            return outcome is core.Outcome.LANDED


def _checkpoint(head: str, state: core.LogState) -> Steps[None]:
    """Best effort: a checkpoint another wrote is the same fold; a lost one costs reads."""
    body = encode_checkpoint(state.checkpoint())
    with contextlib.suppress(PreconditionFailed, Ambiguous):
        yield from send(Put(checkpoint_key(head, state.seq), body, {}, if_none_match=True))


# -- a partition's results -------------------------------------------------------------------


@dataclass(frozen=True)
class Move:
    """A partition's commit that moves its end without objects first: it starts at ``start``
    (the committed end, or the offset it ``begins`` at), ``gaps`` passed from there."""

    start: int
    gaps: Gaps = ()
    begins: bool = False

    @property
    def objects_from(self) -> int:
        """Where its objects start: past the gaps."""
        return self.gaps[-1][1] + 1 if self.gaps else self.start


def _move(state: core.LogState, tp: TopicPartition, start: int, gap: Gap | None) -> Move | None:
    """How a partition planned to start at ``start`` moves (None: from its committed end, as
    usual). A gap passed (``--allow-gaps``) from the committed end to ``start`` is recorded;
    a partition the log has not begun begins at ``start`` (``--start``). Anything else is a
    plan the log cannot commit: refused (exit 2)."""
    ref = partition_ref(tp)
    end = state.end(ref)
    if start == end:
        return None
    st = state.partitions.get(ref)
    if gap is not None and gap.first == end and gap.last == start - 1:
        return Move(end, ((gap.first, gap.last),))
    if start > end == 0 and not (st is not None and (st.objects or st.begin)):
        return Move(start, (), True)
    raise ConfigError(
        f"commit_protocol=log: {tp} would start at offset {start}, its committed end is {end}",
        hint="The plan and the target's commit log disagree: see kafka-archive status and verify",
    )


def interleaved(route: Route) -> bool:
    """Whether a route's objects of a partition may interleave (PARTITIONBY, time layouts:
    one object open per group), so that its commits name them untiled."""
    layout = layout_for(route)
    return bool(layout.fields or layout.times)


def _contiguous(
    group: Sequence[tuple[WorkUnit, Outcome]], cut: int
) -> tuple[list[UnitResult], int]:
    """The results of ``group`` (in offset order) that follow each other from ``cut`` on, up
    to the first that failed or stopped short, and where they end."""
    taken: list[UnitResult] = []
    for unit, result in group:
        done = result.committed if isinstance(result, UnitFailure) else result
        if done is not None and done.start == cut and unit.start == cut:
            taken.append(done)
            cut = done.next_offset
        if isinstance(result, UnitFailure) or cut < unit.stop:
            break
    return taken, cut


def _named(o: ObjectWritten, first: int) -> ObjectRef:
    """How a commit names object ``o``, its range from ``first``: with its ETag and its
    records' time bounds."""
    return ObjectRef(
        o.key, first, o.last_offset, o.records, o.size, o.etag or "", o.min_time_ms, o.max_time_ms
    )


def _sides(
    written: Sequence[ObjectWritten], refs: Sequence[ObjectRef], taken: Sequence[UnitResult]
) -> tuple[ObjectRef, ...]:
    """The side objects a partition's commit names: each gzip object's block index beside it
    (about the offsets its object holds), and the dead letters of the units taken (about
    their refused records' offsets)."""
    return tuple(
        ObjectRef(o.index[0], r.first, r.last, 0, 0, o.index[1])
        for o, r in zip(written, refs, strict=True)
        if o.index is not None
    ) + tuple(
        ObjectRef(d.key, d.first_offset, d.last_offset, d.records, d.size, d.etag or "")
        for r in taken
        if (d := r.dead_letter_object) is not None
    )


def _partition(
    group: list[tuple[WorkUnit, Outcome]],
    state: core.LogState,
    move: Move | None = None,
    *,
    tiled: bool | None = None,
) -> tuple[Outcome, PartitionCommit | None]:
    """A partition's units (or pieces) in offset order: the contiguous prefix from its
    committed end that finished, as one merged result and the commit naming its objects.
    Objects are named as ranges that cover ``[start, end)`` in order (an object's range runs
    from where the one before ended: offsets without records, a transaction's markers, are
    inside one), so that the log's fold accepts them; after the gaps ``move`` passes, or from
    the offset it begins the partition at (with no object when nothing was written).
    ``tiled``: the route's objects of a partition do not interleave (not :func:`interleaved`;
    decided once per route by the caller, here when not given)."""
    first = group[0][0]
    if tiled is None:
        tiled = not interleaved(first.route)
    ref = partition_ref(first.tp)
    start = state.end(ref) if move is None else move.start
    cut = begin = start if move is None else move.objects_from
    taken, cut = _contiguous(group, cut)
    written: list[ObjectWritten] = [o for r in taken for o in r.objects]
    refs: list[ObjectRef] = []
    end = begin  # (past the gaps or at the start a move records, with no object)
    if not tiled:
        # Several objects open at once (one per group): each named by its own first and last
        # record, the range [start, cut) as far as the units read.
        refs = [_named(o, o.first_offset) for o in written]
        end = cut if refs else begin
    else:
        at = begin
        for o in written:
            refs.append(_named(o, at))
            at = o.last_offset + 1
        if refs:  # the last object's range reaches the end of what its units read
            end = max(cut, at)
            refs[-1] = dataclasses.replace(refs[-1], last=end - 1)
    sides = _sides(written, refs, taken)
    spent = total_requests(requests_of(r) for _, r in group)
    result = UnitResult(
        route_index=first.route_index,
        tp=first.tp,
        start=begin,
        next_offset=end,
        records=sum(o.records for o in written),
        bytes=sum(o.size for o in written),
        objects=tuple(written),
        seconds=max((r.seconds for r in taken), default=0.0),
        skipped_records=sum(r.skipped_records for r in taken),
        dead_letters=sum(r.dead_letters for r in taken),
        dead_letter_key=next((r.dead_letter_key for r in taken if r.dead_letter_key), None),
        s3_retries=sum(r.s3_retries for r in taken),
        s3_requests=spent,
        tasks=len(group),
    )
    gaps, begins = (move.gaps, move.begins) if move is not None else ((), False)
    commit = (
        PartitionCommit(
            ref, start, end, tuple(refs), tiled=tiled, gaps=gaps, begins=begins, sides=sides
        )
        if refs or gaps or begins
        else None
    )
    failures = [r for _, r in group if isinstance(r, UnitFailure)]
    fenced = [f for f in failures if f.failure.is_a(errors.FencedError)]
    failure = next(iter(fenced or failures), None)
    if failure is not None:
        if commit is not None:
            return dataclasses.replace(failure, committed=result, s3_requests=S3Requests()), commit
        return dataclasses.replace(failure, committed=None, s3_requests=spent), None
    return result, commit

"""Driver side: plan work units (one per partition, or its pieces), pack them into Spark
tasks."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import StateConflictError
from kafka_archive.archiver.core.model import Gap, PartitionSkip, TopicPartition, Totals, WorkUnit
from kafka_archive.archiver.core.parallel import in_parallel
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.archiver.partition.values import topic_segment
from kafka_archive.archiver.plan import split as subunits
from kafka_archive.archiver.plan import start as positions
from kafka_archive.archiver.plan.naming import group_for
from kafka_archive.archiver.plan.views import PartitionView
from kafka_archive.archiver.state import checkpoint, identity, pending
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Route, Target

log = logging.getLogger(__name__)

# Partitions this process said an open transaction holds back (a --follow session behind a
# transaction left open, or on a topic of transactions, says so once, then at debug level).
_TOLD_OPEN: set[TopicPartition] = set()


@dataclass(frozen=True, slots=True)
class WorkPlan:
    """The units to run, the partitions skipped, the gaps found; and ``settled``: the state
    (with its ETag) of each partition that planning left as it knows it — read or fenced
    here, no unit planned and nothing else written — by (route index, partition). A follow
    session keeps them for its next batch (:class:`.session.Session`)."""

    units: tuple[WorkUnit, ...]
    skipped: tuple[PartitionSkip, ...]
    gaps: tuple[Gap, ...] = ()
    settled: Mapping[tuple[int, TopicPartition], checkpoint.LoadedState] = dataclasses.field(
        default_factory=dict
    )


def _is_ours(key: str, route: Route) -> bool:
    """Whether an incomplete multipart upload at ``key`` belongs to this route's objects."""
    head, topic = route.target.head, topic_segment(route.topic)  # as keys name it
    name = key.rsplit("/", 1)[-1]
    return key.startswith(f"{head}{topic}/") or name.startswith(f"{topic}(")


def abort_stale_uploads(store: S3Store, routes: Sequence[Route]) -> int:
    """Abort multipart uploads that crashed runs of these routes left open: one listing
    per target, not per route."""
    by_target: dict[Target, list[Route]] = {}
    for route in routes:
        by_target.setdefault(route.target, []).append(route)
    aborted = 0
    for target, sharing in by_target.items():
        for key, upload_id in store.incomplete_uploads(target.bucket, target.head):
            if any(_is_ours(key, route) for route in sharing):
                store.abort_upload(target.bucket, key, upload_id)
                aborted += 1
    return aborted


@dataclass
class _PartitionFence:
    """Fences one partition (:func:`checkpoint.fence`) the first time it is called: before
    recovery deletes anything of it, or before a unit is planned for it."""

    store: S3Store
    target: Target
    job: str
    tp: TopicPartition
    loaded: checkpoint.LoadedState
    epoch: int
    start: int
    check_lease: Callable[[Target], None]
    again_if: str | None = None  # an ETag units of a failed batch planned from

    def __call__(self) -> None:
        if not self.epoch:
            return
        state = self.loaded.state
        expected = state.next_offset if state is not None else self.start
        self.check_lease(self.target)
        self.loaded = checkpoint.fence(
            self.store,
            self.target,
            self.job,
            self.tp,
            self.loaded,
            epoch=self.epoch,
            initial_offset=self.start,
            again_if=self.again_if,
        )
        self.again_if = None  # (a fence is written once)
        fenced = self.loaded.state
        if fenced is not None and fenced.next_offset != expected:
            raise StateConflictError(
                "another run committed the partition while this one started",
                tp=self.tp,
                hint="Run again: it resumes from that commit",
            )


def plan_work(
    views: Sequence[PartitionView],
    *,
    store: S3Store,
    admin: KafkaAdmin,
    settings: Settings,
    job: str,
    run_id: str,
    now_ms: int,
    hold_tails: bool = False,
    value_schemas: Mapping[int, str] | None = None,
    epochs: Mapping[Target, int] | None = None,
    check_lease: Callable[[Target], None] = lambda target: None,
    unsettled: Mapping[tuple[int, TopicPartition], str] | None = None,
    states: bool = True,
) -> WorkPlan:
    """One unit per (route, partition) with something to archive; the rest are skipped.

    ``views``: the partitions with their offsets and states, loaded with their ETags
    (:func:`views.partition_states`; one with intent markers is read again before recovery
    uses it). For each: where it starts and stops (:func:`.start.decide`), recovery of what
    a crashed attempt left beyond the committed offset, and an idle one's state pinned or
    moved (:func:`.start.at_rest`). The driver's clock ``now_ms`` fixes which open objects
    count as young (held back at the end) under a flush interval or ``hold_tails``
    (continuous mode), so that every attempt of a task makes the same decision.

    ``epochs``: the fencing epoch of this run's lease on each target; a partition is fenced
    (:class:`_PartitionFence`; ``check_lease`` proves the lease first) before anything of it
    is deleted or written. ``unsettled``: by (route index, partition), the state ETag units
    of a failed batch of this run planned from; a partition still at it is fenced again, so
    that no straggler of those units can pass for this batch's. An Iceberg route's state is
    its table's snapshot (:mod:`.iceberg`): nothing to recover or fence here; the driver
    commits it. Without ``states`` (commit_protocol=log: the views hold the log's ends)
    nothing is listed, recovered, fenced, pinned or moved (``epochs`` stamp the units)."""
    skipped: list[PartitionSkip] = []
    gaps: list[Gap] = []
    settled: dict[tuple[int, TopicPartition], checkpoint.LoadedState] = {}
    begun = positions.begun(views)
    marked = _markers(store, job, views) if states else {}
    topic_ids = _check_identity(store, admin, views)
    run = _Run(settings, job, run_id, now_ms, hold_tails, value_schemas, epochs, topic_ids)
    # Fencing, and pinning where nothing is new, are a write per partition: in parallel after
    # the decisions (fence before a partition's unit is made from its fenced ETag).
    writes: list[Callable[[], object]] = []
    planned: list[tuple[_PartitionFence, PartitionView, positions.StartDecision]] = []
    for view in views:
        key, target, tp = (view.route_index, view.tp), view.route.target, view.tp
        state_object = view.route.iceberg is None  # (an Iceberg route's is its snapshot)
        found = marked.get(target, {}).get(tp, []) if state_object else []
        if found:  # recovery deletes by this state: read it now, not as a session kept it
            view = dataclasses.replace(view, loaded=checkpoint.load(store, target, job, tp))
        decision = _decide(view, settings, begun, admin)
        gaps += [decision.gap] if decision.gap is not None else []
        if decision.lost:
            skipped.append(PartitionSkip(*key, decision.start, "records lost"))
            if state_object:
                settled[key] = view.loaded
            continue
        epoch = (epochs or {}).get(target, 0) if state_object and states else 0
        again_if = (unsettled or {}).get(key)
        fence = _PartitionFence(
            store, target, job, tp, view.loaded, epoch, decision.start, check_lease, again_if
        )
        if state_object and states:
            _recover(store, target, job, tp, fence, found, run_id)
        _tell_open(tp, view)
        if not decision.idle:
            writes.append(fence)
            planned.append((fence, view, decision))
            continue
        current = fence.loaded.state if state_object else None
        rest = positions.at_rest(decision.start, current, settings, state_object=state_object)
        if rest is positions.Rest.KEEP:
            settled[key] = fence.loaded  # as read, or as recovery fenced it
        elif rest is not positions.Rest.NONE and states:
            writes.append(_rest_commit(store, fence, rest, decision, run_id))
        skipped.append(PartitionSkip(*key, decision.start, "nothing new"))
    in_parallel(writes)
    units = [piece for one in planned for piece in run.pieces(*one)]
    return WorkPlan(tuple(units), tuple(skipped), tuple(gaps), settled)


def _markers(
    store: S3Store, job: str, views: Sequence[PartitionView]
) -> dict[Target, dict[TopicPartition, list[pending.Marker]]]:
    """The intent markers and watches of the targets with state objects: one listing of
    each per target, not per partition."""
    return {
        target: pending.markers_of_job(store, target, job)
        for target in {v.route.target for v in views if v.route.iceberg is None}
    }


def _check_identity(
    store: S3Store, admin: KafkaAdmin, views: Sequence[PartitionView]
) -> dict[str, str]:
    """Each topic's id. A topic deleted and re-created under its name restarts its offsets:
    refused (exit 17). (Iceberg routes too: their snapshot's offsets would be taken for the
    new topic's.)"""
    routes = {(v.route.target, v.tp.topic) for v in views}
    topic_ids = admin.topic_ids(t for _, t in routes)
    identity.check(store, routes, topic_ids, record=True)
    return topic_ids


def _decide(
    view: PartitionView, settings: Settings, begun: positions.Begun, admin: KafkaAdmin
) -> positions.StartDecision:
    """:func:`.start.decide`, with what it decided logged."""
    tp, state = view.tp, view.loaded.state
    if state is not None and settings.given("start"):
        log.info(
            "%s: the job has state (next offset %d); --start %s is ignored",
            tp,
            state.next_offset,
            settings.start,
        )
    decision = positions.decide(view, settings, begun, admin)
    if decision.why is positions.Why.ADDED:
        log.info("%s: a partition added since the route began; from offset 0", tp)
    elif decision.why is positions.Why.NEW_TOPIC:
        log.info("%s: a topic FROM `*` matches since its first run; from its first record", tp)
    if decision.note:
        log.warning("%s: %s", tp, decision.note)
    gap = decision.gap
    if gap is not None and not gap.passed:
        log.error(
            "%s: offsets %d..%d were deleted by Kafka before they were "
            "archived; the partition stays at offset %d",
            tp,
            gap.first,
            gap.last,
            decision.start,
        )
    elif gap is not None:
        log.warning(
            "%s: offsets %d..%d were deleted by Kafka before they were "
            "archived; continuing at %d (allow_gaps)",
            tp,
            gap.first,
            gap.last,
            decision.start,
        )
    return decision


def _recover(
    store: S3Store,
    target: Target,
    job: str,
    tp: TopicPartition,
    fence: _PartitionFence,
    found: Sequence[pending.Marker],
    run_id: str,
) -> None:
    """Remove what a crashed or fenced run left uncommitted (:func:`pending.recover`),
    fencing the partition first."""
    state = fence.loaded.state
    recovery = pending.recover(store, target, job, tp, state, fence, found=found, own_run=run_id)
    if recovery.deleted_objects:
        log.info(
            "%s: removed %d object(s) a crashed or fenced run left uncommitted",
            tp,
            len(recovery.deleted_objects),
        )


def _tell_open(tp: TopicPartition, view: PartitionView) -> None:
    """Log that an open transaction holds the partition back: once per partition, not every
    batch of a --follow."""
    marks = view.marks
    if marks is not None and marks.end < marks.high:
        level = logging.DEBUG if tp in _TOLD_OPEN else logging.INFO
        _TOLD_OPEN.add(tp)
        log.log(
            level,
            "%s: an open transaction holds offsets %d.. back; archiving up to "
            "the last stable offset %d",
            tp,
            marks.end,
            marks.end,
        )


def _rest_commit(
    store: S3Store,
    fence: _PartitionFence,
    rest: positions.Rest,
    decision: positions.StartDecision,
    run_id: str,
) -> Callable[[], object]:
    """The commit of an idle partition's state (:func:`.start.at_rest`): a first state
    pinned at the start (no state expected), or the state moved past a passed gap."""
    current = fence.loaded.state
    if rest is positions.Rest.PIN or current is None:
        pin = checkpoint.PartitionState(
            decision.start, run_id, checkpoint.now_iso(), gaps=decision.gaps
        )
        return functools.partial(
            checkpoint.commit, store, fence.target, fence.job, fence.tp, pin, expected_etag=None
        )
    moved = dataclasses.replace(
        current,
        next_offset=decision.start,
        run_id=run_id,
        committed_at=checkpoint.now_iso(),
        gaps=decision.gaps,
    )
    return functools.partial(
        checkpoint.commit,
        store,
        fence.target,
        fence.job,
        fence.tp,
        moved,
        expected_etag=fence.loaded.etag,
    )


@dataclass(frozen=True, slots=True)
class _Run:
    """What every unit of one planning shares."""

    settings: Settings
    job: str
    run_id: str
    now_ms: int
    hold_tails: bool
    value_schemas: Mapping[int, str] | None
    epochs: Mapping[Target, int] | None
    topic_ids: Mapping[str, str]

    def pieces(
        self, fence: _PartitionFence, view: PartitionView, decision: positions.StartDecision
    ) -> list[WorkUnit]:
        """The unit of a fenced partition, from its fenced state, in pieces
        (:func:`.split.split`)."""
        loaded, route, state = fence.loaded, view.route, fence.loaded.state
        unit = WorkUnit(
            route_index=view.route_index,
            route=route,
            tp=view.tp,
            start=decision.start,
            stop=decision.stop,
            run_id=self.run_id,
            job=self.job,
            group=group_for(self.job),
            state_etag=loaded.etag,
            prior=Totals(state.records, state.bytes, state.objects) if state else Totals(),
            until_ms=self.settings.until_ms,
            value_schema=(self.value_schemas or {}).get(view.route_index),
            # Iceberg units too (no partition state to fence): their tasks prove the lease
            # before each file, and a retried attempt adopts its twin's file.
            epoch=(self.epochs or {}).get(route.target, 0),
            lease_ttl_seconds=self.settings.lock_ttl_seconds,
            commits=state.commits if state is not None else (),
            gaps=decision.gaps,
            topic_id=self.topic_ids.get(view.tp.topic),
            young_after_ms=(
                self.now_ms - route.flush.interval_seconds * 1000
                if route.flush.interval_set or self.hold_tails
                else None
            ),
        )
        return subunits.split(unit, self.settings.max_records_per_unit)


# A unit of at most this many offsets is small: mostly round trips to Kafka and S3.
SMALL_UNIT = 10_000
# Small units per Spark task at most (run on task.UNIT_THREADS threads).
SMALL_PER_TASK = 32
# What a unit's round trips (a fetch, a topic id request, an object's PUT) weigh in offsets,
# when small units are shared out by their work (:func:`pack`).
UNIT_WEIGHT = 1_000


def pack(units: Sequence[WorkUnit], parallelism: int) -> list[list[WorkUnit]]:
    """Units grouped into Spark tasks: a task per large unit and per piece of a split
    partition, largest first; small units in ``max(parallelism, n / SMALL_PER_TASK)`` tasks
    at most (a thousand partitions of a few records each must not cost a thousand tasks'
    start-up and round trips in a row), each a run of consecutive partitions in (route,
    topic, partition) order, cut where the work (offsets, plus UNIT_WEIGHT a unit) reaches
    an equal share. A task's units so share few topics: its workers' consumers learn few
    topics' metadata, and units confirming a topic at once share one topic id request
    (:class:`.state.identity.TopicProof`)."""
    ordered = sorted(units, key=lambda u: u.stop - u.start, reverse=True)
    large = [[u] for u in ordered if u.stop - u.start > SMALL_UNIT or u.deferred]
    small = sorted(
        (u for u in units if u.stop - u.start <= SMALL_UNIT and not u.deferred),
        key=lambda u: (u.route_index, u.tp.topic, u.tp.partition, u.start),
    )
    count = min(len(small), max(parallelism, -(-len(small) // SMALL_PER_TASK)))
    groups: list[list[WorkUnit]] = [[] for _ in range(count)]
    weights = [u.stop - u.start + UNIT_WEIGHT for u in small]
    share, done = sum(weights) / max(count, 1), 0
    for unit, weight in zip(small, weights, strict=True):
        # The task whose share holds the unit's middle: consecutive, in order.
        groups[min(count - 1, int((done + weight / 2) // share))].append(unit)
        done += weight
    return large + [g for g in groups if g]

"""Driver side: plan work units (one per partition, or its pieces), pack them into Spark
tasks."""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kafka_archive.archiver.config.positions import StartKind
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import StateConflictError, TopicRecreatedError
from kafka_archive.archiver.core.model import Gap, PartitionSkip, TopicPartition, Totals, WorkUnit
from kafka_archive.archiver.core.parallel import in_parallel
from kafka_archive.archiver.kafka.admin import KafkaAdmin
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
    head = route.target.head
    name = key.rsplit("/", 1)[-1]
    return key.startswith(f"{head}{route.topic}/") or name.startswith(f"{route.topic}(")


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
) -> WorkPlan:
    """One unit per (route, partition) with something to archive; the rest are skipped.

    ``views`` are the partitions with their states and offsets
    (:func:`views.partition_states`, the route's state objects loaded with their ETags;
    a partition with intent markers has its state read again before recovery uses it).
    For each: remove what a crashed attempt left beyond the committed offset, and fix the
    stop offset for this run (the last stable offset). The driver's clock
    ``now_ms`` fixes which open objects count as young (held back at the end) when the route
    states a flush interval or ``hold_tails`` (continuous mode) is set, so that every
    attempt of a task makes the same decision.

    With ``epochs`` (the fencing epoch of this run's lease on each target), a partition is
    fenced (:func:`checkpoint.fence`) before anything of it is deleted or written, and
    ``check_lease`` proves the lease first. ``unsettled``: by (route index, partition), the
    state ETag units of an earlier batch of this run planned from and did not commit (the
    batch failed); a partition still at it is fenced again before anything of it is
    deleted or written (:func:`checkpoint.fence`), so that no attempt of those units still
    running (a straggler) can pass for this batch's.

    An Iceberg route's state is its table's latest snapshot (:mod:`.iceberg`): it has no
    state objects, nothing to recover or fence here, and its commit is the driver's.
    """
    units: list[WorkUnit] = []
    skipped: list[PartitionSkip] = []
    gaps: list[Gap] = []
    settled: dict[tuple[int, TopicPartition], checkpoint.LoadedState] = {}
    group = group_for(job)
    start_given = settings.given("start")
    start_from_here = settings.start.kind is not StartKind.EARLIEST
    # Routes that have begun (a partition with state): --start is where a route's first run
    # begins, so a partition without state in such a route was added to the topic since.
    begun = {(v.route_index, v.tp.topic) for v in views if v.loaded.state is not None}
    # Likewise a FROM `*` statement (by its target) with a topic that has state: a topic it
    # matches without state was created (or let in by --topics/--topics-regex) since its
    # first run, which pinned every topic it matched then.
    begun_all = {v.route.target for v in views if v.route.matched and v.loaded.state is not None}
    # One listing of the intent markers per target (not one per partition), one of watches.
    marked = {
        target: pending.markers_of_job(store, target, job)
        for target in {v.route.target for v in views if v.route.iceberg is None}
    }
    # A topic deleted and re-created under its name restarts its offsets: refused (exit 17).
    # (Iceberg routes too: their snapshot's offsets would be taken for the new topic's.)
    routes = {(v.route.target, v.tp.topic) for v in views}
    topic_ids = admin.topic_ids(t for _, t in routes)
    identity.check(store, routes, topic_ids, record=True)
    # Fencing, and pinning where nothing is new, are a write per partition: in parallel after
    # the decisions (fence before a partition's unit is made from its fenced ETag).
    writes: list[Callable[[], object]] = []
    planned: list[tuple[_PartitionFence, int, Route, int, int, checkpoint.Gaps]] = []
    for view in views:
        index, route, tp, loaded = view.route_index, view.route, view.tp, view.loaded
        marks = view.marks
        assert marks is not None, "planning reads Kafka's offsets"
        # Iceberg routes have none: the table's snapshot is their state.
        state_object = route.iceberg is None
        found = marked[route.target].get(tp, []) if state_object else []
        if found:
            # Recovery deletes by this state: read it now, not as a follow session kept it.
            loaded = checkpoint.load(store, route.target, job, tp)
        state = loaded.state
        committed = state.next_offset if state is not None else 0
        passed = state.gaps if state is not None else ()  # gaps to write with a commit
        if state is not None:
            if start_given:
                log.info(
                    "%s: the job has state (next offset %d); --start %s is ignored",
                    tp,
                    committed,
                    settings.start,
                )
            if committed > marks.high:
                raise TopicRecreatedError(
                    f"the archive holds offsets up to {committed - 1}, but Kafka's "
                    f"partition ends at offset {marks.high}: the topic was deleted and "
                    "re-created (or its log truncated)",
                    tp=tp,
                    hint="Archive the new topic into a new prefix (another INSERT INTO "
                    "target: state belongs to the target, not to --job-name); resetting "
                    "this state would write the new topic's records over the old objects",
                )
            start = committed
        elif (index, tp.topic) in begun:
            # A partition added to the topic since the route began: each of its records came
            # after the route's start, whatever --start says. From offset 0, its first record;
            # what Kafka deleted of it before this run came is a gap (below), as for a
            # partition with state.
            start = 0
            log.info("%s: a partition added since the route began; from offset 0", tp)
        elif (
            settings.start.kind is StartKind.LATEST and route.matched and route.target in begun_all
        ):
            # Every record of a topic created since came after the statement's first run (a
            # time or a group's offsets mean the same for it as for the others).
            start = marks.low
            log.info("%s: a topic FROM `*` matches since its first run; from its first record", tp)
        else:
            start, note = positions.initial_offset(
                settings.start,
                marks.low,
                marks.end,
                functools.partial(admin.offset_for_time, tp),
                functools.partial(admin.group_offset, tp),
            )
            if note:
                log.warning("%s: %s", tp, note)
        if (state is not None or (index, tp.topic) in begun) and start < marks.low:
            gap = Gap(index, tp, start, marks.low - 1, passed=settings.allow_gaps)
            gaps.append(gap)
            if not gap.passed:
                log.error(
                    "%s: offsets %d..%d were deleted by Kafka before they were "
                    "archived; the partition stays at offset %d",
                    tp,
                    gap.first,
                    gap.last,
                    start,
                )
                skipped.append(PartitionSkip(index, tp, start, "records lost"))
                if state_object:
                    settled[(index, tp)] = loaded
                continue
            log.warning(
                "%s: offsets %d..%d were deleted by Kafka before they were "
                "archived; continuing at %d (allow_gaps)",
                tp,
                gap.first,
                gap.last,
                marks.low,
            )
            start = marks.low
            passed = checkpoint.append_gap(passed, gap.first, gap.last)
        epoch = (epochs or {}).get(route.target, 0) if state_object else 0

        fence = _PartitionFence(
            store,
            route.target,
            job,
            tp,
            loaded,
            epoch,
            start,
            check_lease,
            (unsettled or {}).get((index, tp)),
        )
        recovery = (
            pending.recover(store, route.target, job, tp, state, fence, found=found, own_run=run_id)
            if state_object
            else pending.Recovery((), 0)
        )
        if recovery.deleted_objects:
            log.info(
                "%s: removed %d object(s) a crashed or fenced run left uncommitted",
                tp,
                len(recovery.deleted_objects),
            )
        if marks.end < marks.high:  # once per partition, not every batch of a --follow
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
        stop = positions.stop_offset(start, marks.end, settings.max_records_per_partition)
        if start >= stop:
            current = fence.loaded.state if state_object else None
            if current is None and state_object and (start > 0 or start_from_here):
                # Pin where a new job starts (latest, a time, a group), so that the next
                # run continues from here instead of choosing again: also at 0 (an empty
                # partition), or the next run's `latest` would skip what came in between.
                # (With the gap it passed, when Kafka had deleted the head of an added one.)
                pin = checkpoint.PartitionState(start, run_id, checkpoint.now_iso(), gaps=passed)
                writes.append(
                    functools.partial(
                        checkpoint.commit, store, route.target, job, tp, pin, expected_etag=None
                    )
                )
            elif current is not None and start > current.next_offset:
                # Past a gap (allow_gaps) with nothing after it yet: record that the gap was
                # passed, so that the next run does not report it again.
                moved = dataclasses.replace(
                    current,
                    next_offset=start,
                    run_id=run_id,
                    committed_at=checkpoint.now_iso(),
                    gaps=passed,
                )
                writes.append(
                    functools.partial(
                        checkpoint.commit,
                        store,
                        route.target,
                        job,
                        tp,
                        moved,
                        expected_etag=fence.loaded.etag,
                    )
                )
            elif state_object:
                settled[(index, tp)] = fence.loaded  # as read, or as recovery fenced it
            skipped.append(PartitionSkip(index, tp, start, "nothing new"))
            continue
        writes.append(fence)
        planned.append((fence, index, route, start, stop, passed))
    in_parallel(writes)
    for fence, index, route, start, stop, passed in planned:
        loaded, tp, state, epoch = fence.loaded, fence.tp, fence.loaded.state, fence.epoch
        prior = Totals(state.records, state.bytes, state.objects) if state is not None else Totals()
        units += subunits.split(
            WorkUnit(
                route_index=index,
                route=route,
                tp=tp,
                start=start,
                stop=stop,
                run_id=run_id,
                job=job,
                group=group,
                state_etag=loaded.etag,
                prior=prior,
                until_ms=settings.until_ms,
                value_schema=(value_schemas or {}).get(index),
                # Iceberg units too (no partition state to fence): their tasks prove the
                # lease before each file, and a retried attempt adopts its twin's file.
                epoch=epoch or (epochs or {}).get(route.target, 0),
                lease_ttl_seconds=settings.lock_ttl_seconds,
                commits=state.commits if state is not None else (),
                gaps=passed,
                topic_id=topic_ids.get(tp.topic),
                young_after_ms=(
                    now_ms - route.flush.interval_seconds * 1000
                    if route.flush.interval_set or hold_tails
                    else None
                ),
            ),
            settings.max_records_per_unit,
        )
    return WorkPlan(tuple(units), tuple(skipped), tuple(gaps), settled)


# A unit of at most this many offsets is small: mostly round trips to Kafka and S3.
SMALL_UNIT = 10_000
# Small units per Spark task at most (run on task.UNIT_THREADS threads).
SMALL_PER_TASK = 32


def pack(units: Sequence[WorkUnit], parallelism: int) -> list[list[WorkUnit]]:
    """Units grouped into Spark tasks, largest first: a task per large unit and per piece of
    a split partition, small units shared out over ``max(parallelism, n / SMALL_PER_TASK)``
    tasks (a thousand partitions of a few records each must not cost a thousand tasks'
    start-up and round trips in a row)."""
    ordered = sorted(units, key=lambda u: u.stop - u.start, reverse=True)
    large = [[u] for u in ordered if u.stop - u.start > SMALL_UNIT or u.deferred]
    small = [u for u in ordered if u.stop - u.start <= SMALL_UNIT and not u.deferred]
    count = min(len(small), max(parallelism, -(-len(small) // SMALL_PER_TASK)))
    return large + [small[i::count] for i in range(count)]

"""``run``: one job's archiving session on the driver (``follow`` runs one too, batch after
batch: :mod:`.follow`).

A session is the preflight done (:func:`preflight`), the plan checked, the job's
lease held on each target (:mod:`.locks`), and Spark started on first need; each
:meth:`Session.batch` plans units (:func:`units.plan_work`), runs them
(:func:`driver.map_units`) and turns what they returned into an :class:`.outcome.Outcome`:
a :class:`RunResult` of what they committed, and the error that failed the batch, if any.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Iterator, Sequence

from kafka_archive.archiver import iceberg
from kafka_archive.archiver.commands import batch_end, commit_log, presence
from kafka_archive.archiver.commands.locks import held_locks
from kafka_archive.archiver.commands.outcome import Outcome, batch_error
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import (
    ArchiveError,
    KafkaUnavailableError,
    TopicNotFoundError,
)
from kafka_archive.archiver.core.model import (
    BatchTimings,
    RunResult,
    S3Requests,
    TopicPartition,
    UnitResult,
    WorkUnit,
    total_requests,
)
from kafka_archive.archiver.formats import avsc
from kafka_archive.archiver.plan import columns as route_columns
from kafka_archive.archiver.plan import split as subunits
from kafka_archive.archiver.plan import topics
from kafka_archive.archiver.plan import units as jobs
from kafka_archive.archiver.plan.checks import check_layouts
from kafka_archive.archiver.plan.naming import new_run_id
from kafka_archive.archiver.plan.preflight import Preflight, preflight
from kafka_archive.archiver.plan.views import (
    PartitionView,
    learn_states,
    partition_states,
    proven_states,
    wanted_partitions,
)
from kafka_archive.archiver.spark import driver
from kafka_archive.archiver.spark.progress import NullProgress, Progress, UnitProgress
from kafka_archive.archiver.state import checkpoint, index, legacy, probe
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.state.paths import state_root
from kafka_archive.archiver.store import requests
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.write import transforms
from kafka_archive.archiver.write.task import UnitFailure, archive_units
from kafka_archive.kcql.plan import Plan, Target

log = logging.getLogger(__name__)


def _shown(unit: WorkUnit) -> UnitProgress:
    return UnitProgress(
        unit.route_index, unit.tp.topic, unit.tp.partition, unit.start, unit.stop, unit.start
    )


class Session:
    """One job's open session: preflight done, locks held, Spark started on first need."""

    def __init__(
        self,
        settings: Settings,
        pre: Preflight,
        run_id: str,
        progress: Progress,
        written: Plan | None = None,
    ) -> None:
        """``written``: the plan as written (FROM `*` unresolved), for :meth:`discover`."""
        self.settings, self.pre, self.store, self.admin = settings, pre, pre.store, pre.kafka
        self.written = written
        self._discover_at = time.monotonic() + DISCOVER_SECONDS
        self.job, self.run_id, self.progress = pre.job, run_id, progress
        self.spark: driver.SparkOnDemand | None = None  # set once the locks are held
        self._adopt(pre.plan)
        self.partitions = self.admin.partitions(tuple(sorted({r.topic for r in self.plan.routes})))
        self.locks: dict[Target, JobLock] = {}
        self.tables: list[iceberg.TableRoute] = []
        # The states the last batch left as it knew them (see :meth:`batch`), and the
        # leases' lapse counts they are good for.
        self._known: dict[tuple[int, TopicPartition], checkpoint.LoadedState] = {}
        self._known_under: tuple[int, ...] | None = None
        # The state ETags that units of failed batches planned from and did not commit, by
        # (route index, partition): the next batch fences a partition still at one again
        # (a straggling attempt of such a unit must not pass for one of the later batch).
        self._unsettled: dict[tuple[int, TopicPartition], str] = {}
        # Each target's state index as read and proven at the start (:mod:`.state.index`).
        self._indexed: dict[Target, dict[TopicPartition, checkpoint.LoadedState]] = {}
        # This process's S3 requests when the last batch ended (or the session began): a
        # batch's result has the driver's since then (:meth:`driver_requests`).
        self.requests_mark = requests.PROCESS.read()
        # Each objects route's recorded column types (plan/columns.py), read at its first
        # batch with units, kept as this session writes them.
        self.columns: dict[int, route_columns.Recorded] = {}
        # commit_protocol=log: the targets' commit logs (:mod:`.commit_log`); None: states.
        self.commit_log: commit_log.CommitLog | None = None

    def driver_requests(self) -> S3Requests:
        """The driver's S3 requests since the last batch ended (or the session began); the
        mark moves to now."""
        now = requests.PROCESS.read()
        since, self.requests_mark = now - self.requests_mark, now
        return since

    def _adopt(self, plan: Plan) -> None:
        """``plan`` as the session's (at the start, and with the topics :meth:`discover`
        adds): its layouts checked, its value schemas and transforms loaded."""
        check_layouts(plan)
        self.plan = plan
        self.value_schemas = avsc.declared(plan, self.settings.schema_registry_url)
        self.transform_roots = transforms.load_plan(plan)

    def check_leases(self) -> None:
        for lock in self.locks.values():
            lock.check()

    def _tenure(self) -> tuple[int, ...]:
        return tuple(lock.lapses for lock in self.locks.values())

    def know_states(self, etags: dict[Target, dict[TopicPartition, str]]) -> None:
        """Under the leases, at the start: what the targets' listings (``etags``, each
        state's ETag) and state indexes prove of the plan's partitions
        (:func:`views.learn_states`), kept for the first batch as a batch keeps what it
        leaves (:meth:`batch`); the rest is read there."""
        proofs = learn_states(self.store, etags)
        self._indexed = {target: proof.indexed() for target, proof in proofs.items()}
        wanted = wanted_partitions(self.plan, self.partitions)
        self._known, self._known_under = proven_states(proofs, wanted), self._tenure()

    def save_states(self) -> None:
        """After the last batch, under the leases: each target's state index, from what the
        session knows of the states now (unchanged ones are not written again). Best
        effort: the index is a cache."""
        if self._known_under != self._tenure() or not self._known:
            return  # a failed batch or a lapse: what is known is not kept
        for target, before in self._indexed.items():
            after = dict(before)  # other routes' states under the target stay as proven
            after.update(
                (tp, loaded)
                for (number, tp), loaded in self._known.items()
                if self.plan.routes[number].target == target and loaded.state is not None
            )
            if after == before:
                continue
            try:
                self.locks[target].check()
                index.write(self.store, target, after, self.job)
            except ArchiveError as exc:
                log.info("could not write the state index (the next run reads more): %s", exc)

    def discover(self) -> None:
        """A follow session of a FROM `*` statement with a topics regex: the topics that
        match it since the session began join it (looked for at most every
        DISCOVER_SECONDS, one metadata request), as routes after the others (their numbers
        stay). They begin as a topic matched after the statement's first run does
        (:func:`.units.plan_work`). Not for Iceberg routes (their tables are prepared at the
        start): those join at the next start.

        First, at every call (each batch), partitions added to the session's topics join it
        (:meth:`_take_in_partitions`)."""
        self._take_in_partitions()
        written = self.written
        if (
            written is None
            or not self.settings.topics_regex
            or time.monotonic() < self._discover_at
        ):
            return
        self._discover_at = time.monotonic() + DISCOVER_SECONDS
        if any(r.all_topics and r.iceberg is not None for r in written.routes):
            return
        have = {(r.target, r.topic) for r in self.plan.routes}
        try:
            resolved = topics.resolve(written, self.settings, self.admin.topic_names, quiet=True)
            new = tuple(r for r in resolved.routes if r.matched and (r.target, r.topic) not in have)
            if not new:
                return
            found = self.admin.partitions(tuple(sorted({r.topic for r in new})))
        except (KafkaUnavailableError, TopicNotFoundError):
            return  # an outage is the batch's to meet; a topic gone again is not new
        plan = Plan(self.plan.routes + new)
        self._adopt(plan)
        self.partitions.update(found)
        self.pre = dataclasses.replace(self.pre, plan=plan)
        for route in new:
            log.info("%s: FROM `*` matches it now; it joins the session", route.topic)

    def _take_in_partitions(self) -> None:
        """Partitions added to the session's topics since it began join it: one metadata
        request, each batch. They begin at offset 0 (:func:`.units.plan_work`: a partition
        without state on a route that has begun)."""
        topics = tuple(sorted(t for t, found in self.partitions.items() if found))
        if not topics:
            return
        try:
            now = self.admin.partitions(topics)
        except (KafkaUnavailableError, TopicNotFoundError):
            return  # an outage or a deleted topic is the batch's to meet
        for topic, numbers in now.items():
            added = sorted(set(numbers) - set(self.partitions[topic]))
            if added:
                self.partitions[topic] = tuple(sorted({*self.partitions[topic], *added}))
                log.info(
                    "%s: partition(s) %s added to the topic; they join the session",
                    topic,
                    ", ".join(map(str, added)),
                )

    def _leave_deleted_topics(self) -> bool:
        """After the offsets could not be read: whether a topic of the session was deleted
        since it began (its partitions were found once, at the start). A topic a FROM `*`
        statement matched is left out from here on, as it no longer matches (True); one a
        statement names ends the session, as a run's preflight would refuse it (exit 4)."""
        try:
            existing = set(self.admin.topic_names())
        except KafkaUnavailableError:
            return False  # Kafka itself is out of reach: the batch's error stands
        gone = sorted(t for t, found in self.partitions.items() if found and t not in existing)
        for topic in gone:
            if any(r.topic == topic and not r.matched for r in self.plan.routes):
                raise TopicNotFoundError(
                    f"topic {topic!r} was deleted while this session archived it (archived "
                    "up to its last commit)",
                    hint="Remove its statement, or archive a topic re-created under its name "
                    "into a new prefix, and start again",
                )
            log.warning(
                "%s: the topic was deleted; FROM `*` archives it no more (archived up to its "
                "last commit)",
                topic,
            )
            self.partitions[topic] = ()
        return bool(gone)

    def batch(self, *, hold_tails: bool) -> Outcome:
        """Archive from each committed offset to the end as of now: what the units
        committed, with the error that failed the batch if one did (a unit's, the lease
        lost, records lost: :func:`.outcome.batch_error`). An error before the units ran
        (the offsets, the states, planning, Spark's start) is raised.

        A batch reads the state of each partition the session does not know: at the first
        batch all of them; then those the last batch ran units for (their tasks committed),
        wrote (a pin), or left with intent markers. A partition that had nothing new keeps
        the state and ETag the last batch read or fenced: while the session holds its
        leases, renewed each on the ETag of the one before, no other run writes under its
        targets, and every write is conditional on that ETag all the same (a stale one is
        refused: exit 18 or 9). Everything is read again after a failed batch, and when a
        lease renewal came late (a process frozen or starved past its safety margin)."""
        started = time.monotonic()
        self.check_leases()
        tenure = self._tenure()
        known = self._known if tenure == self._known_under else {}
        if self.commit_log is not None:
            known = self._log_known()
        self._known = {}  # kept again only when this batch succeeds
        try:
            views = partition_states(
                self.pre,
                partitions=self.partitions,
                tables=iceberg.offsets_by_route(self.tables),
                legacy=False,  # adopted at the session's start, under its lease
                known=known,
            )
        except (KafkaUnavailableError, TopicNotFoundError):
            if not self._leave_deleted_topics():
                raise
            return self.batch(hold_tails=hold_tails)
        work = self._plan(views, hold_tails=hold_tails)
        units = transforms.with_roots(work.units, self.transform_roots)
        if units:
            self.columns = route_columns.load(self.store, self.plan, self.columns)
            units = route_columns.with_columns(units, self.columns)
        ran = self._run_units(iceberg.with_data_layout(units, self.tables))
        if not hold_tails:  # a follow session's next batches take them: no news there
            batch_end.tell_held_back(self.plan, work.units, ran.done)
        self._record_columns(ran.done)
        check, epochs = self._table_fence()
        iceberg.commit_all(
            self.tables,
            ran.done,
            run_id=self.run_id,
            job=self.job,
            check_lease=check,
            epochs=epochs,
        )
        batch_end.mirror_to_group(self.admin, ran.done)
        batch_end.clear_markers(self.store, self.plan, ran.done)
        ended = time.monotonic()
        # The driver's requests, and those of the units that failed (not in ``ran.done``).
        other = self.driver_requests() + total_requests(f.s3_requests for f in ran.failures)
        result = RunResult(
            job=self.job,
            run_id=self.run_id,
            units=tuple(sorted(ran.done, key=lambda u: (u.route_index, u.tp))),
            skipped=work.skipped,
            seconds=ended - started,
            gaps=work.gaps,
            targets=tuple(str(r.target) for r in self.plan.routes),
            timings=ran.timings(started, ended),
            other_s3=other,
        )
        error = batch_error(
            [f.failure for f in ran.failures],
            lease_lost=any(lock.lost for lock in self.locks.values()),
            gaps=work.gaps,
        )
        if error is None:
            self._keep(work, ran.done, tenure)
        return Outcome(result, error)

    def _table_fence(self) -> tuple[Callable[[], None], dict[Target, int] | None]:
        """What fences an Iceberg table's commit: the leases, or in commit_protocol=log the
        claims (the log's tail read: a higher claim is exit 18) and their epochs, which the
        table's snapshots carry (:mod:`.iceberg.commits`)."""
        if self.commit_log is None:
            return self.check_leases, None
        cl = self.commit_log
        return cl.check_fenced, {target: cl.epoch(target) for target in cl.targets}

    def _log_known(self) -> dict[tuple[int, TopicPartition], checkpoint.LoadedState]:
        """commit_protocol=log: each partition's committed end in its target's log, as the
        states the planner knows (after the tail is read: a newer claim fences us, exit 18;
        partitions that joined a follow session are claimed first)."""
        assert self.commit_log is not None
        if self.commit_log.batches:
            self.commit_log.check_fenced()
        self.commit_log.claim(self.plan, self.partitions)
        wanted = wanted_partitions(self.plan, self.partitions)
        return self.commit_log.known(
            (number, r.target, tp)
            for number, r, tp in wanted
            if r.iceberg is None  # (a table is its own state: read from it)
        )

    def _record_columns(self, done: Sequence[UnitResult]) -> None:
        """The columns of the objects ``done`` committed, recorded for their routes (best
        effort: a failed write only leaves the next run the columns recorded before)."""
        try:
            self.columns = route_columns.record(self.store, self.plan, self.columns, done)
        except ArchiveError as exc:
            log.warning("the routes' column types were not recorded: %s", exc)

    def _plan(self, views: Sequence[PartitionView], *, hold_tails: bool) -> jobs.WorkPlan:
        """The batch's units (:func:`.units.plan_work`), noted as unsettled until the batch
        ends well, and announced."""
        work = jobs.plan_work(
            views,
            store=self.store,
            admin=self.admin,
            settings=self.settings,
            job=self.job,
            run_id=self.run_id,
            now_ms=int(time.time() * 1000),
            hold_tails=hold_tails,
            value_schemas=self.value_schemas,
            epochs={target: lock.epoch for target, lock in self.locks.items()},
            check_lease=lambda target: self.locks[target].check(),
            unsettled=self._unsettled,
            states=self.commit_log is None,
        )
        if self.commit_log is not None:
            idle = [s for s in work.skipped if s.reason == "nothing new"]
            units = self.commit_log.units(self.plan, work.units, idle, work.gaps)
            work = dataclasses.replace(work, units=tuple(units))
        # Until this batch ends well, attempts of its units may outlive it (a speculative
        # copy, a task on an executor the scheduler gave up on): same run, epoch and lease.
        self._unsettled.update(
            ((u.route_index, u.tp), u.state_etag)
            for u in work.units
            if u.state_etag is not None and u.epoch
        )
        if work.units:
            partitions = len({(u.route_index, u.tp) for u in work.units})
            pieces = len(work.units) - partitions
            split = f", {len(work.units)} pieces" if pieces else ""
            self.progress.step(
                f"archiving {partitions} partition(s){split} with Spark ({self.settings.master})"
            )
        return work

    def _run_units(self, units: Sequence[WorkUnit]) -> _Ran:
        """``units`` run as Spark tasks (Spark started first if need be, timed apart), the
        pieces of split partitions committed, and the results split into the units that
        committed and the failures."""
        assert self.spark is not None, "batch() runs inside session()"
        planned = time.monotonic()
        spark_start = 0.0
        if units and not self.spark.started:
            self.spark.context  # noqa: B018  (started here, timed apart from the job)
            spark_start = time.monotonic() - planned
        # Asked of the JVM before the job: a JVM stopped just after it (a signal to the whole
        # process group) must not turn a committed batch into a failure before its pieces
        # and tables are committed.
        slots = self.spark.context.defaultParallelism if units else 1
        job_started = time.monotonic()
        busy: list[float] = []
        results = driver.map_units(
            self.spark,
            units,
            functools.partial(archive_units, settings=self.settings),
            progress=self.progress,
            shown=_shown,
            pack=jobs.pack,
            busy=busy,
        )
        job_ended = time.monotonic()
        # The pieces of split partitions are committed here, in offset order, and merged
        # (commit_protocol=log: every partition, in one log entry per target).
        if self.commit_log is not None:
            results = self.commit_log.commit(units, results)
        else:
            results = subunits.settle(units, results, self.settings)
        failures = [r for r in results if isinstance(r, UnitFailure)]
        done: list[UnitResult] = [r for r in results if not isinstance(r, UnitFailure)]
        done += [f.committed for f in failures if f.committed is not None]
        # The tasks' own time spread over the task slots, at least the longest task.
        work = max(max(busy, default=0.0), sum(busy) / max(slots, 1))
        return _Ran(done, failures, planned, spark_start, job_started, job_ended, work)

    def _keep(
        self, work: jobs.WorkPlan, done: Sequence[UnitResult], tenure: tuple[int, ...]
    ) -> None:
        """After a batch that succeeded: what it left as it knows it, for the next batch —
        the partitions planning settled, and those whose units committed (the state
        written, with the ETag their PUT returned); its units are settled."""
        kept = dict(work.settled)
        kept.update(
            {
                (u.route_index, u.tp): u.state
                for u in done
                if isinstance(u.state, checkpoint.LoadedState)
            }
        )
        self._known, self._known_under = kept, tenure
        for unit in work.units:  # committed, or nothing to commit that any attempt makes
            self._unsettled.pop((unit.route_index, unit.tp), None)


@dataclasses.dataclass(frozen=True, slots=True)
class _Ran:
    """What a batch's Spark job returned, and when (``time.monotonic()``) its steps ran."""

    done: list[UnitResult]
    failures: list[UnitFailure]
    planned: float
    spark_start: float  # seconds
    job_started: float
    job_ended: float
    work: float  # seconds: the tasks' time over the task slots

    def timings(self, started: float, ended: float) -> BatchTimings:
        """Where the batch's time went, from its start to its end."""
        return BatchTimings(
            plan=self.planned - started,
            spark_start=self.spark_start,
            spark_job=self.job_ended - self.job_started,
            work=self.work,
            commit=ended - self.job_ended,
        )


@contextlib.contextmanager
def session(settings: Settings, plan: Plan, progress: Progress) -> Iterator[Session]:
    """Preflight, the conditional-write probe, the job's lease on every target, and the
    multipart uploads of crashed runs aborted; Spark is stopped at the end."""
    run_id = new_run_id()
    began = requests.PROCESS.read()  # the preflight's requests are the first batch's
    with preflight(settings, plan, spool_dir=True) as pre:
        archiver = Session(settings, pre, run_id, progress, written=plan)
        archiver.requests_mark = began
        probe.check_conditional_writes(
            pre.store,
            archiver.plan,
            pre.job,
            run_id,
            unsafe=settings.unsafe_single_writer_without_conditional_writes,
        )
        if commit_log.is_log(settings):
            yield from _log_session(archiver, settings, plan)
            return
        with (
            held_locks(pre.store, plan, pre.job, run_id, settings.lock_ttl_seconds) as locks,
            driver.spark_on_demand(settings, f"kafka-archive {pre.job}") as archiver.spark,
        ):
            archiver.locks = locks
            etags = _open_targets(pre.store, archiver.plan, pre.job, run_id, locks)
            archiver.know_states(etags)
            archiver.check_leases()  # an aborted upload must not be a newer run's
            aborted = jobs.abort_stale_uploads(pre.store, plan.routes)
            if aborted:
                log.info("aborted %d incomplete multipart upload(s) of earlier runs", aborted)
            archiver.tables = iceberg.prepare(
                archiver.plan, pre.store, settings.s3, run_id, pre.job, archiver.check_leases
            )
            yield archiver
            archiver.save_states()


def _log_session(archiver: Session, settings: Settings, plan: Plan) -> Iterator[Session]:
    """The rest of :func:`session` under commit_protocol=log: each target's log read and
    claimed, vacuum (:mod:`.commit_log`); no lock, fences or states. The session's presence
    on each target (:mod:`.presence`) first: a live session's there stops this one (exit 8)
    before it claims, and this one's is removed at its end."""
    with (
        presence.present(
            archiver.store,
            (r.target for r in archiver.plan.routes),
            run_id=archiver.run_id,
            job=archiver.job,
            command="run",
            ttl_seconds=settings.lock_ttl_seconds,
        ),
        driver.spark_on_demand(settings, f"kafka-archive {archiver.job}") as archiver.spark,
    ):
        archiver.commit_log = commit_log.CommitLog(archiver.store, settings, archiver.run_id)
        archiver.commit_log.open(archiver.plan, archiver.partitions, archiver.job)
        aborted = jobs.abort_stale_uploads(archiver.store, plan.routes)
        if aborted:
            log.info("aborted %d incomplete multipart upload(s) of earlier runs", aborted)
        # The tables fenced with the claims' epochs, then their orphans of lower epochs
        # removed (:mod:`.iceberg.orphans`), before anything is written.
        check, epochs = archiver._table_fence()
        archiver.tables = iceberg.prepare(
            archiver.plan, archiver.store, settings.s3, archiver.run_id, archiver.job, check, epochs
        )
        yield archiver


def _open_targets(
    store: S3Store, plan: Plan, job: str, run_id: str, locks: dict[Target, JobLock]
) -> dict[Target, dict[TopicPartition, str]]:
    """Under the targets' leases: one listing of each target's ``.kafka-archive/``, which
    gives the state an earlier version kept per job (taken over here) and the ETag of every
    partition state (returned, by target)."""
    etags: dict[Target, dict[TopicPartition, str]] = {}
    for target, lock in locks.items():
        listing = list(store.list_etags(target.bucket, f"{state_root(target)}/"))
        commit_log.refuse_logged(store, target, [key for key, _ in listing])
        found = legacy.scan(store, target, [key for key, _ in listing])
        legacy.retire_locks(store, target, found, run_id, lock.epoch)
        topics = {r.topic for r in plan.routes if r.target == target}
        lock.check()
        if legacy.adopt(store, target, topics, job, found):
            log.info(
                "adopted partition states of an earlier version under s3://%s/%s",
                target.bucket,
                target.prefix,
            )
            listing = list(store.list_etags(target.bucket, f"{state_root(target)}/"))
        etags[target] = index.state_etags(target, listing)
    return etags


def run(settings: Settings, plan: Plan, *, progress: Progress | None = None) -> Outcome:
    """Archive every route of the plan from its committed offset to the current end: the
    outcome of the session's one batch.

    Units that succeeded before another failed keep their commits (each partition is its
    own exactly-once stream): the outcome holds them, with the error of the first failed
    unit (:meth:`Session.batch`). An error before any unit ran is raised (an
    :class:`ArchiveError` subclass for every failure a user can act on).
    """
    started = time.monotonic()
    outcome: Outcome | None = None
    try:
        with session(settings, plan, progress or NullProgress()) as archiver:
            outcome = archiver.batch(hold_tails=False)
            outcome.unwrap()  # raised here: the session ends as a failed one does
    except ArchiveError as exc:
        if outcome is None or exc is not outcome.error:
            raise
        return Outcome(with_tail(outcome.result, archiver), outcome.error)
    result = dataclasses.replace(outcome.result, seconds=time.monotonic() - started)
    return Outcome(with_tail(result, archiver))


def with_tail(result: RunResult, archiver: Session) -> RunResult:
    """``result`` of a session's last batch with the driver's S3 requests after it (the
    state index written, the leases released)."""
    return dataclasses.replace(result, other_s3=result.other_s3 + archiver.driver_requests())


# How often a follow session looks for topics a FROM `*` regex newly matches (Session.discover).
DISCOVER_SECONDS = 10.0

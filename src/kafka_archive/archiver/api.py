"""Library entry points. The CLI calls these; they never print (progress is passed in)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from kafka_archive import kcql
from kafka_archive.archiver import iceberg, spool, topics, transforms
from kafka_archive.archiver import job as jobs
from kafka_archive.archiver import restore as restoring
from kafka_archive.archiver import verify as verifying
from kafka_archive.archiver.errors import (
    ArchiveError,
    ConfigError,
    NotInArchiveError,
    RecordsLostError,
)
from kafka_archive.archiver.formats import avsc
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.archiver.model import RunResult, TopicPartition, UnitResult, WorkUnit
from kafka_archive.archiver.partition.layouts import LayoutError, layout_for
from kafka_archive.archiver.progress import UnitProgress, listening
from kafka_archive.archiver.reading import listing, rendering
from kafka_archive.archiver.reading.records import find_records, partition_records
from kafka_archive.archiver.settings import Settings
from kafka_archive.archiver.spark import spark_context, stop_spark
from kafka_archive.archiver.state import lease, legacy, probe
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.state.paths import (
    state_root,
    topic_pending_prefix,
    topic_state_prefix,
)
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan, Route, Target

log = logging.getLogger(__name__)


class Progress(Protocol):
    """What a run tells the user while it works (the CLI draws it; the library never prints).

    ``units_started`` names the units of one Spark job before it runs; ``unit_update`` is
    called from a listener thread as tasks report (:mod:`.progress`), ``units_ended`` once
    the job is over.
    """

    def step(self, message: str) -> None: ...

    def units_started(self, units: Sequence[UnitProgress]) -> None: ...

    def unit_update(self, update: UnitProgress) -> None: ...

    def units_ended(self) -> None: ...


class NullProgress:
    def step(self, message: str) -> None:
        return None

    def units_started(self, units: Sequence[UnitProgress]) -> None:
        return None

    def unit_update(self, update: UnitProgress) -> None:
        return None

    def units_ended(self) -> None:
        return None


@contextlib.contextmanager
def _locks(
    store: S3Store, plan: Plan, job: str, run_id: str, ttl: int
) -> Iterator[dict[Target, JobLock]]:
    targets = sorted({r.target for r in plan.routes}, key=lambda t: (t.bucket, t.prefix))
    with contextlib.ExitStack() as stack:
        yield {
            target: stack.enter_context(_held(JobLock(store, target, job, run_id, ttl)))
            for target in targets
        }


@contextlib.contextmanager
def _held(lock: JobLock) -> Iterator[JobLock]:
    """Hold ``lock``; when the run fails, a lock that cannot be released (the S3 fault that
    failed the run) is logged, so that the run's own error is the one reported."""
    lock.acquire()
    try:
        yield lock
    except BaseException:
        try:
            lock.release()
        except ArchiveError as exc:
            log.warning("could not release the job lock (it expires after "
                        "lock_ttl_seconds): %s", exc)  # fmt: skip
        raise
    lock.release()


class _Archiver:
    """One job's open session: preflight done, locks held, Spark started on first need."""

    def __init__(
        self, settings: Settings, plan: Plan, store: S3Store, admin: KafkaAdmin, job: str,
        run_id: str, progress: Progress,
    ) -> None:
        self.settings, self.plan, self.store, self.admin = settings, plan, store, admin
        self.job, self.run_id, self.progress = job, run_id, progress
        self.plan = plan = topics.resolve(plan, settings, admin.topic_names)
        check_layouts(plan)
        self.value_schemas = avsc.load(plan)
        self.transform_roots = transforms.load_plan(plan)
        self.partitions = admin.partitions(tuple(sorted({r.topic for r in plan.routes})))
        self._spark: Any = None
        self._owned = False
        self.locks: dict[Target, JobLock] = {}
        self.tables: list[iceberg.TableRoute] = []

    def check_leases(self) -> None:
        for lock in self.locks.values():
            lock.check()

    def batch(self, *, hold_tails: bool) -> RunResult:
        """Archive from each committed offset to the end as of now; raise the first failure."""
        started = time.monotonic()
        self.check_leases()
        work = jobs.plan_work(
            self.plan, self.partitions, store=self.store, admin=self.admin,
            settings=self.settings, job=self.job, run_id=self.run_id,
            now_ms=int(time.time() * 1000), hold_tails=hold_tails,
            value_schemas=self.value_schemas,
            epochs={target: lock.epoch for target, lock in self.locks.items()},
            check_lease=lambda target: self.locks[target].check(),
            tables=iceberg.offsets_by_route(self.tables),
        )
        results: list[Any] = []
        if work.units:
            self.progress.step(
                f"archiving {len(work.units)} partition(s) with Spark ({self.settings.master})"
            )
            if self._spark is None:
                self._spark, self._owned = spark_context(self.settings, f"kafka-archive {self.job}")
            results = self._run_units(work.units)
        done, failures = jobs.split_results(results)
        iceberg.commit_all(self.tables, done, run_id=self.run_id, job=self.job,
                           check_lease=self.check_leases)  # fmt: skip
        _commit_group(self.admin, done)
        outcome = RunResult(
            job=self.job,
            run_id=self.run_id,
            units=tuple(sorted(done, key=lambda u: (u.route_index, u.tp))),
            skipped=work.skipped,
            seconds=time.monotonic() - started,
            gaps=work.gaps,
        )
        if failures:
            fenced = [f for f in failures if f.error_type == "FencedError"]
            error: ArchiveError = (fenced or failures)[0].to_error()
            error.result = outcome
            raise error
        lost = [lock for lock in self.locks.values() if lock.lost]
        if lost:
            error = lease.fenced("another run took the job's lease over during this batch")
            error.result = outcome
            raise error
        unpassed = [g for g in work.gaps if not g.passed]
        if unpassed:
            gaps = RecordsLostError(
                "Kafka deleted records before they were archived: "
                + ", ".join(f"{g.tp} offsets {g.first}..{g.last}" for g in unpassed),
                hint="Those partitions were left where they were (everything else was "
                "archived). To accept the loss and continue from the earliest retained "
                "offset, run again with --allow-gaps (config allow_gaps: true)",
            )
            gaps.result = outcome
            raise gaps
        return outcome

    def _run_units(self, units: tuple[WorkUnit, ...]) -> list[Any]:
        """Run the units on Spark while their tasks report progress to a listener here."""
        host = self._spark.getConf().get("spark.driver.host", "127.0.0.1")
        self.progress.units_started([
            UnitProgress(u.route_index, u.tp.topic, u.tp.partition, u.start, u.stop, u.start)
            for u in units
        ])  # fmt: skip
        try:
            with listening(host, self.progress.unit_update) as address:
                if address is not None:
                    units = tuple(dataclasses.replace(u, progress_to=address) for u in units)
                units = transforms.with_roots(units, self.transform_roots)
                units = iceberg.with_data_layout(units)
                return jobs.run_units_on_spark(self._spark, units, self.settings)
        finally:
            self.progress.units_ended()

    def close(self) -> None:
        if self._spark is not None and self._owned:
            stop_spark(self._spark)
        self._spark = None


def compile_plan(text: str, *, source: str = "kcql") -> Plan:
    """KCQL text -> the plan a run would use: :func:`kafka_archive.kcql.parse`, then every
    check a run makes of its plan before it reads Kafka (:func:`check_layouts`), each error
    at the text it concerns. ``validate``, ``plan`` and every command go through here.

    Raises:
        KcqlError: the text cannot be archived as written.
    """
    plan = kcql.parse(text, source=source)
    try:
        check_layouts(plan)
    except kcql.KcqlError as err:
        raise err.located(text=text, source=source) from None
    return plan


def check_layouts(plan: Plan) -> None:
    """Refuse, before anything runs, a route whose layout cannot give safe, unique keys
    (what depends on how values are encoded and on S3's key length) or whose Avro schema
    file cannot be read; the error points at the setting at fault."""
    for route in plan.routes:
        try:
            layout_for(route)
        except LayoutError as exc:
            raise kcql.KcqlSemanticError(
                f"the layout of the route for {route.topic}: {exc.message}",
                span=exc.span or route.span_of(exc.property), hint=exc.hint, label="layout",
                setting=exc.property,
            ) from None
        try:
            avsc.load(Plan((route,)))
        except ConfigError as exc:
            raise kcql.KcqlSemanticError(
                exc.message, span=route.span_of("avro.schema.file"), hint=exc.hint,
                label="schema-file", setting="avro.schema.file",
            ) from None
        try:
            transforms.load_plan(Plan((route,)))  # imports the user's function: fail fast
        except ConfigError as exc:
            raise kcql.KcqlSemanticError(
                exc.message, span=route.span_of("transform"), hint=exc.hint,
                label="transform", setting="transform",
            ) from None


@contextlib.contextmanager
def _archiver(settings: Settings, plan: Plan, progress: Progress) -> Iterator[_Archiver]:
    job = jobs.check_job_name(settings.job_name or jobs.job_name_for(plan))
    run_id = jobs.new_run_id()
    spool.check(settings.spool_dir)
    store = S3Store(settings.s3)
    for bucket in sorted({r.target.bucket for r in plan.routes}):
        store.check_bucket(bucket)
    with KafkaAdmin(settings.kafka, jobs.group_for(job)) as admin:
        archiver = _Archiver(settings, plan, store, admin, job, run_id, progress)
        probe.check_conditional_writes(
            store, archiver.plan, job, run_id,
            unsafe=settings.unsafe_single_writer_without_conditional_writes,
        )  # fmt: skip
        with _locks(store, plan, job, run_id, settings.lock_ttl_seconds) as locks:
            archiver.locks = locks
            _adopt_legacy_state(store, archiver.plan, job, run_id, locks)
            archiver.check_leases()  # an aborted upload must not be a newer run's
            aborted = jobs.abort_stale_uploads(store, plan.routes)
            if aborted:
                log.info("aborted %d incomplete multipart upload(s) of earlier runs", aborted)
            archiver.tables = iceberg.prepare(archiver.plan, store, settings.s3, run_id, job)
            try:
                yield archiver
            finally:
                archiver.close()


def _adopt_legacy_state(
    store: S3Store, plan: Plan, job: str, run_id: str, locks: dict[Target, JobLock]
) -> None:
    """Under the targets' leases: take over the state an earlier version kept per job."""
    for target, lock in locks.items():
        found = legacy.scan(store, target)
        legacy.retire_locks(store, target, found, run_id, lock.epoch)
        topics = {r.topic for r in plan.routes if r.target == target}
        lock.check()
        if legacy.adopt(store, target, topics, job, found):
            log.info("adopted partition states of an earlier version under s3://%s/%s",
                     target.bucket, target.prefix)  # fmt: skip


def run(settings: Settings, plan: Plan, *, progress: Progress | None = None) -> RunResult:
    """Archive every route of the plan from its committed offset to the current end.

    Raises an :class:`ArchiveError` subclass for every failure a user can act on. Units
    that succeeded before another failed keep their commits (each partition is its own
    exactly-once stream), and the error of the first failed unit is raised.
    """
    started = time.monotonic()
    with _archiver(settings, plan, progress or NullProgress()) as archiver:
        result = archiver.batch(hold_tails=False)
    return dataclasses.replace(result, seconds=time.monotonic() - started)


FOLLOW_BATCH_LIMIT = 1_000_000
FOLLOW_MAX_BACKOFF = 60.0


@dataclasses.dataclass(frozen=True, slots=True)
class FollowResult:
    job: str
    run_id: str
    batches: int
    records: int
    bytes: int
    objects: int
    seconds: float


def follow(
    settings: Settings,
    plan: Plan,
    *,
    poll_seconds: float,
    stop: threading.Event,
    on_batch: Callable[[RunResult], None],
    progress: Progress | None = None,
    on_error: Callable[[ArchiveError, float], None] | None = None,
) -> FollowResult:
    """Archive continuously in micro-batches until ``stop`` is set; returns the totals.

    Each micro-batch is a bounded run (at most ``max_records_per_partition`` offsets per
    partition, default 1,000,000, so a stop request is served soon) that holds back young
    tails (the route's flush interval, default one hour, on the driver's clock): objects
    roll by count and size as records arrive, and by interval even when none do. The lock
    and the SparkContext stay up between batches. Setting ``stop`` lets the current batch
    finish and commit.

    With ``on_error``, a batch failing on a retriable error (S3 or Kafka unavailable, an
    upload or read that ran out of retries) is reported to it with the back-off delay
    (poll interval doubling per failure in a row, at most a minute) and tried again; what
    its units committed before the failure is in the error's ``result``.
    """
    if settings.max_records_per_partition is None:
        settings = dataclasses.replace(settings, max_records_per_partition=FOLLOW_BATCH_LIMIT)
    started = time.monotonic()
    batches = records = size = objects = 0
    failed_in_a_row = 0
    with _archiver(settings, plan, progress or NullProgress()) as archiver:
        while True:
            try:
                result = archiver.batch(hold_tails=True)
            except ArchiveError as exc:
                # A service rides out an S3 or Kafka outage: what units committed stays
                # committed, the rest is read again by the next batch. Anything else (a bad
                # record under the fail policy, a fenced run, access denied) ends the run.
                if not exc.retriable or on_error is None:
                    raise
                failed_in_a_row += 1
                delay = min(poll_seconds * 2**failed_in_a_row, FOLLOW_MAX_BACKOFF)
                on_error(exc, delay)
                if stop.wait(delay):
                    break
                continue
            failed_in_a_row = 0
            batches += 1
            records, size, objects = (
                records + result.records, size + result.bytes, objects + result.objects
            )
            on_batch(result)
            if stop.wait(poll_seconds):
                break
    return FollowResult(
        job=archiver.job,
        run_id=archiver.run_id,
        batches=batches,
        records=records,
        bytes=size,
        objects=objects,
        seconds=time.monotonic() - started,
    )


def cancel_spark_jobs() -> None:
    """Cancel whatever the driver's SparkContext is running (a bounded shutdown gave up)."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        context.cancelAllJobs()


def _commit_group(admin: KafkaAdmin, done: list[UnitResult]) -> None:
    """Mirror the S3 commits into the consumer group, for lag tools. S3 stays the truth."""
    offsets = {u.tp: u.next_offset for u in done if u.next_offset > u.start}
    try:
        admin.commit_group(offsets)
    except Exception as exc:  # the archive is committed; a lag-tool mirror must not fail it
        log.warning("could not commit offsets to the consumer group: %s", exc)


def verify(
    settings: Settings, plan: Plan, *, offline: bool, progress: Progress | None = None
) -> verifying.VerifyResult:
    """Check the archive of every route: offline (objects and state), or also against Kafka.

    The checks run as Spark tasks, one per partition, like :func:`run`; Spark is started
    only when there is something to check.
    """
    progress = progress or NullProgress()
    started = time.monotonic()
    iceberg.refuse_tables(plan, "verify")
    job, checks = verifying.prepare(settings, plan, offline=offline)
    context: Any = None
    owned = False
    if checks:
        progress.step(f"verifying {len(checks)} partition(s) with Spark ({settings.master})")
        context, owned = spark_context(settings, f"kafka-archive verify {job}")
    try:
        verdicts = verifying.run_checks(checks, settings, context, progress)
    finally:
        if owned:
            stop_spark(context)
    return verifying.VerifyResult(job, offline, verdicts, time.monotonic() - started)


def _archived_route(store: S3Store, plan: Plan | None, target: Target, topic: str) -> Route:
    """The route that wrote ``topic`` to ``target``: from the plan, or the default layout."""
    iceberg.refuse_tables(plan, "cat and restore")
    store.check_bucket(target.bucket)
    if plan is None:
        return listing.default_route(store, target, topic)
    for route in plan.routes:
        if route.target == target and (route.topic == topic or route.all_topics):
            return dataclasses.replace(route, topic=topic)
    raise ConfigError(
        f"no KCQL statement writes {topic} to {target}",
        hint="Pass the statement that wrote the archive, or leave out --kcql",
    )


def cat(
    settings: Settings,
    plan: Plan | None,
    location: str,
    topic: str,
    partition: int,
    offset: int,
    count: int,
    output: str = "jsonl",
) -> Iterator[bytes]:
    """Up to ``count`` archived records of a partition from ``offset`` on, rendered for
    ``output`` (see :mod:`archiver.reading.rendering`): ``jsonl``, one JSON line each, or
    ``raw``, each value's bytes as stored.

    Without a plan the archive must use the default layout (its format is told by the
    objects' extension); with one, the route writing ``topic`` to ``location`` is used.
    """
    target = listing.parse_location(location)
    tp = TopicPartition(topic, partition)
    store = S3Store(settings.s3)
    route = _archived_route(store, plan, target, topic)
    committed = listing.committed_offsets(store, target).get(tp)
    for record in find_records(store, route, tp, offset, count, committed=committed):
        if output == "raw":
            yield rendering.raw(record)
        else:
            yield rendering.to_jsonl(record).encode("utf-8") + b"\n"


def restore(
    settings: Settings,
    plan: Plan | None,
    location: str,
    topic: str,
    to_topic: str,
    *,
    partition_map: str = "same",
    only: restoring.RestoreFilter | None = None,
    values_only: bool = False,
    max_records: int | None = None,
    progress: Progress | None = None,
) -> restoring.RestoreRun:
    """Replay the archive of ``topic`` into ``to_topic``; see :mod:`archiver.restore`.

    Raises an :class:`ArchiveError` for every failure a user can act on; units that finished
    before another failed keep their committed progress, and a re-run resumes.
    """
    progress = progress or NullProgress()
    only = only or restoring.RestoreFilter()
    started = time.monotonic()
    target = listing.parse_location(location)
    store = S3Store(settings.s3)
    route = _archived_route(store, plan, target, topic)
    committed = listing.committed_offsets(store, target)
    objects = {
        tp: tuple(o for o in objs if tp not in committed or o.start_offset < committed[tp])
        for tp, objs in listing.list_partition_objects(store, route).items()
        if tp.topic == topic
    }
    objects = {tp: objs for tp, objs in objects.items() if objs}
    if not objects:
        raise NotInArchiveError(f"nothing of {topic} is archived under {target}")
    first = next(iter(objects.values()))[0]
    sample = partition_records(store, route, (first,), None)
    has_envelope = next(sample).stored.has_envelope
    if not has_envelope and not values_only:
        raise ConfigError(
            f"the archive of {topic} stores values only (no keys, headers or timestamps)",
            hint="Pass --values-only to replay the values alone, or archive with "
            "PROPERTIES('store.envelope'=true) to restore whole records",
        )
    if not has_envelope and (only.from_ms is not None or only.to_ms is not None):
        raise ConfigError("--from-time/--to-time need the record timestamps the envelope keeps")
    with KafkaAdmin(settings.kafka, "kafka-archive.restore") as admin:
        target_partitions = admin.partitions((to_topic,))[to_topic]
    if partition_map == "same":
        missing = sorted(tp.partition for tp in objects if tp.partition not in target_partitions)
        if missing:
            raise ConfigError(
                f"{to_topic} has {len(target_partitions)} partition(s); the archive has "
                f"partition(s) {', '.join(map(str, missing))}",
                hint="Add partitions to the target topic, or pass --partition-map hash",
            )
    units = [
        restoring.RestoreUnit(
            route=route,
            tp=tp,
            objects=objs,
            committed=committed.get(tp),
            to_topic=to_topic,
            to_partition=tp.partition if partition_map == "same" else None,
            values_only=values_only,
            only=only,
            max_records=max_records,
        )
        for tp, objs in sorted(objects.items())
    ]
    progress.step(f"restoring {len(units)} partition(s) into {to_topic} with Spark "
                  f"({settings.master})")  # fmt: skip
    context, owned = spark_context(settings, f"kafka-archive restore {topic}")
    try:
        results: list[restoring.RestoreResult] = (
            context.parallelize(units, len(units))
            .mapPartitions(functools.partial(restoring.restore_units, settings=settings))
            .collect()
        )
    finally:
        if owned:
            stop_spark(context)
    outcome = restoring.RestoreRun(to_topic, tuple(sorted(results, key=lambda r: r.tp)),
                         time.monotonic() - started)  # fmt: skip
    failed = [r for r in outcome.units if r.error_type is not None]
    if failed:
        raise failed[0].to_error()
    return outcome


def reset_state(settings: Settings, plan: Plan) -> int:
    """Forget what the plan's routes archived: delete their partition states and intent
    markers (also those of the layout before routes owned their state; other topics under
    the same targets keep theirs), holding each target's lock (so never under a live run).
    Archived objects stay;
    the next run starts where ``--start`` says and may archive records again. Returns the
    number of state objects deleted."""
    iceberg.refuse_tables(plan, "reset")
    job = jobs.check_job_name(settings.job_name or jobs.job_name_for(plan))
    store = S3Store(settings.s3)
    for bucket in sorted({r.target.bucket for r in plan.routes}):
        store.check_bucket(bucket)
    deleted = 0
    with _locks(store, plan, job, jobs.new_run_id(), settings.lock_ttl_seconds):
        for target in sorted({r.target for r in plan.routes}, key=lambda t: (t.bucket, t.prefix)):
            topics = {r.topic for r in plan.routes if r.target == target}
            every = any(r.all_topics for r in plan.routes if r.target == target)
            folders = ([f"{state_root(target)}/state/", f"{state_root(target)}/pending/"]
                       if every else
                       [f(target, t) for t in topics
                        for f in (topic_state_prefix, topic_pending_prefix)])  # fmt: skip
            keys = [key for folder in folders for key in store.list_keys(target.bucket, folder)]
            keys += legacy.forget(store, target, topics, every=every)
            if keys:
                store.delete(target.bucket, keys)
            deleted += len(keys)
    return deleted

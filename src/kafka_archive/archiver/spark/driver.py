"""The driver's seam, shared by ``run``, ``follow``, ``verify``, ``status`` and ``restore``.

- :func:`preflight`: the job's name, the buckets checked, Kafka reached and the plan's topics
  resolved, before anything is read or written;
- :func:`partition_states`: each (route, partition) with its S3 state and Kafka's offsets
  (one batched lookup for all partitions, one GET of each state not already known on a
  bounded pool); :func:`learn_states` and :func:`proven_states`: which states a listing of
  each target's ``.kafka-archive/`` and its state index prove without a GET
  (:mod:`.state.index`), for a session under its leases and for the read-only commands;
- :class:`SparkOnDemand` and :func:`map_units`: run units as Spark tasks, one task each,
  their progress shown live; :func:`first_error` turns the failures the tasks returned back
  into our errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import ArchiveError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.kafka.admin import KafkaAdmin, Watermarks
from kafka_archive.archiver.plan import topics
from kafka_archive.archiver.plan import units as jobs
from kafka_archive.archiver.spark import tasktime
from kafka_archive.archiver.spark.context import spark_context, stop_spark
from kafka_archive.archiver.spark.progress import UnitProgress, listening
from kafka_archive.archiver.state import checkpoint, index, legacy
from kafka_archive.archiver.state.paths import state_root
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.write import spool
from kafka_archive.kcql.plan import Plan, Route, Target


class Progress(Protocol):
    """What a command tells the user while it works (the CLI draws it; the library never
    prints).

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


# -- preflight ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Preflight:
    """What every command knows once its checks passed: the job, the store, and (unless the
    command runs without Kafka) the admin client and the plan with its topics resolved."""

    job: str
    store: S3Store
    plan: Plan
    admin: KafkaAdmin | None

    @property
    def kafka(self) -> KafkaAdmin:
        assert self.admin is not None, "this preflight ran without Kafka"
        return self.admin


def targets_of(plan: Plan) -> list[Target]:
    """The plan's targets, each once, in a stable order (the order locks are taken in)."""
    return sorted({r.target for r in plan.routes}, key=lambda t: (t.bucket, t.prefix))


@contextlib.contextmanager
def preflight(
    settings: Settings, plan: Plan, *, kafka: bool = True, spool_dir: bool = False
) -> Iterator[Preflight]:
    """Fail fast, before anything is read or written: the job name, the spool directory
    (``spool_dir``), every target bucket, and with ``kafka`` the brokers and the topics the
    plan names (``FROM *`` resolved); the admin client stays open for the block."""
    job = jobs.check_job_name(settings.job_name or jobs.job_name_for(plan))
    if spool_dir:
        spool.check(settings.spool_dir)
    store = S3Store(settings.s3)
    for bucket in sorted({r.target.bucket for r in plan.routes}):
        store.check_bucket(bucket)
    if not kafka:
        yield Preflight(job, store, plan, None)
        return
    with KafkaAdmin(settings.kafka, jobs.group_for(job)) as admin:
        yield Preflight(job, store, topics.resolve(plan, settings, admin.topic_names), admin)


# -- partitions -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One (route, partition): its loaded S3 state and, with Kafka, its offsets."""

    route_index: int
    route: Route
    tp: TopicPartition
    loaded: checkpoint.LoadedState
    marks: Watermarks | None

    @property
    def state(self) -> checkpoint.PartitionState | None:
        return self.loaded.state

    @property
    def committed(self) -> int | None:
        """The next offset to archive as committed, None when the job has no state here."""
        return self.loaded.state.next_offset if self.loaded.state is not None else None


Known = dict[tuple[int, TopicPartition], checkpoint.LoadedState]
"""States by (route index, partition) known to be current: not read again."""


def partition_states(
    pre: Preflight,
    also: Mapping[int, Iterable[TopicPartition]] | None = None,
    *,
    partitions: Mapping[str, Sequence[int]] | None = None,
    tables: Mapping[int, Mapping[TopicPartition, int]] | None = None,
    legacy: bool = True,
    known: Mapping[tuple[int, TopicPartition], checkpoint.LoadedState] | None = None,
    listed: bool = False,
) -> list[PartitionView]:
    """Each route's partitions in order: ``partitions`` by topic (a session's, found once),
    else Kafka's (with a preflight that reached Kafka), and those ``also`` names by route
    index (e.g. what the archive holds). Each with Kafka's offsets (one batched lookup for
    all, None without Kafka) and its state: one GET each, on a bounded pool of threads.

    An Iceberg route's state is its table's latest snapshot, from ``tables`` by route index
    (:func:`.iceberg.offsets_by_route`), with no request. With ``legacy`` (read-only
    commands) a partition without state falls back to the state its job kept before routes
    owned it; without (a run, which adopted that state under its lease), the route's state
    is loaded with the ETag a commit must match.

    ``known``: states by (route index, partition) that the caller knows to be current (a
    session's, :class:`.session.Session`); they are not read again. ``listed`` (the
    read-only commands): one listing of each target's ``.kafka-archive/`` and its state
    index prove what they can (:func:`listed_states`); only the rest is read."""
    plan, admin = pre.plan, pre.admin
    if partitions is None:
        topics = tuple(sorted({r.topic for r in plan.routes}))
        partitions = admin.partitions(topics) if admin else {}
    wanted = wanted_partitions(plan, partitions, also)
    offsets = admin.offsets(tp for _, _, tp in wanted) if admin else {}
    known = {**(listed_states(pre, wanted) if listed else {}), **(known or {})}
    read = jobs.in_parallel(
        [
            functools.partial(_state, pre, route, tp, (tables or {}).get(index), legacy)
            for index, route, tp in wanted
            if (index, tp) not in known
        ]
    )
    unread = iter(read)
    states = [
        known[(index, tp)] if (index, tp) in known else next(unread) for index, _, tp in wanted
    ]
    return [
        PartitionView(index, route, tp, loaded, offsets.get(tp))
        for (index, route, tp), loaded in zip(wanted, states, strict=True)
    ]


Wanted = list[tuple[int, Route, TopicPartition]]


def wanted_partitions(
    plan: Plan,
    partitions: Mapping[str, Sequence[int]],
    also: Mapping[int, Iterable[TopicPartition]] | None = None,
) -> Wanted:
    """(route index, route, partition) of each route's topic's ``partitions`` and of those
    ``also`` names by route index, in order."""
    wanted: Wanted = []
    for number, route in enumerate(plan.routes):
        tps = set((also or {}).get(number, ()))
        tps |= {TopicPartition(route.topic, p) for p in partitions.get(route.topic, ())}
        wanted += [(number, route, tp) for tp in sorted(tps)]
    return wanted


def learn_states(
    store: S3Store, etags: Mapping[Target, Mapping[TopicPartition, str]]
) -> dict[Target, index.Proof]:
    """What each target's listing (``etags``: each state's ETag) and its state index (read
    here, one GET a target, in parallel) prove."""
    targets = sorted(etags, key=lambda t: (t.bucket, t.prefix))
    entries = jobs.in_parallel([functools.partial(index.read, store, t) for t in targets])
    return {t: index.Proof(etags[t], found) for t, found in zip(targets, entries, strict=True)}


def proven_states(proofs: Mapping[Target, index.Proof], wanted: Wanted) -> Known:
    """Of ``wanted``, the states of routes with state objects that ``proofs`` prove."""
    known: Known = {}
    for number, route, tp in wanted:
        proof = proofs.get(route.target)
        loaded = proof.state(tp) if proof is not None and route.iceberg is None else None
        if loaded is not None:
            known[(number, tp)] = loaded
    return known


def listed_states(pre: Preflight, wanted: Wanted) -> Known:
    """For the read-only commands (``status``, ``verify``), which write nothing: one listing
    of each target's ``.kafka-archive/`` and its state index, as a session learns them
    under its leases (:meth:`.session.Session.know_states`). A partition without a route
    state whose job kept one in the layout before routes owned it is left to be read."""
    targets = sorted(
        {r.target for _, r, _ in wanted if r.iceberg is None}, key=lambda t: (t.bucket, t.prefix)
    )
    listings = jobs.in_parallel(
        [functools.partial(_listing, pre.store, target) for target in targets]
    )
    etags: dict[Target, dict[TopicPartition, str]] = {}
    older: set[tuple[Target, TopicPartition]] = set()
    for target, listing in zip(targets, listings, strict=True):
        etags[target] = index.state_etags(target, listing)
        layout = legacy.scan(pre.store, target, [key for key, _ in listing])
        older |= {(target, tp) for tp, jobs_ in layout.states.items() if pre.job in jobs_}
    known = proven_states(learn_states(pre.store, etags), wanted)
    routes = pre.plan.routes
    return {
        (number, tp): loaded
        for (number, tp), loaded in known.items()
        if loaded.state is not None or (routes[number].target, tp) not in older
    }


def _listing(store: S3Store, target: Target) -> list[tuple[str, str]]:
    return list(store.list_etags(target.bucket, f"{state_root(target)}/"))


def _state(
    pre: Preflight,
    route: Route,
    tp: TopicPartition,
    table: Mapping[TopicPartition, int] | None,
    legacy: bool,
) -> checkpoint.LoadedState:
    if route.iceberg is not None:  # no state objects: the table's snapshot
        next_offset = (table or {}).get(tp)
        if next_offset is None:
            return checkpoint.LoadedState(None, None)
        return checkpoint.LoadedState(checkpoint.PartitionState(next_offset, "", ""), None)
    if legacy:
        return checkpoint.LoadedState(checkpoint.read(pre.store, route.target, pre.job, tp), None)
    return checkpoint.load(pre.store, route.target, pre.job, tp)


# -- running units on Spark -----------------------------------------------------------


class SparkOnDemand:
    """The driver's SparkContext, started the first time units run (a command with nothing
    to do never starts Spark) and stopped by :meth:`close` when this process started it."""

    def __init__(self, settings: Settings, app_name: str) -> None:
        self.settings, self.app_name = settings, app_name
        self._context: Any = None
        self._owned = False

    @classmethod
    def running(cls, context: Any, settings: Settings) -> SparkOnDemand:
        """An already running SparkContext (not stopped by :meth:`close`)."""
        spark = cls(settings, "")
        spark._context = context
        return spark

    @property
    def started(self) -> bool:
        return self._context is not None

    @property
    def context(self) -> Any:
        if self._context is None:
            self._context, self._owned = spark_context(self.settings, self.app_name)
        return self._context

    def cancel_jobs(self) -> None:
        """Cancel what the context is running (from another thread; tasks stop, nothing
        they did not commit counts)."""
        if self._context is not None:
            self._context.cancelAllJobs()

    def close(self) -> None:
        if self._context is not None and self._owned:
            stop_spark(self._context)
        self._context = None


@contextlib.contextmanager
def spark_on_demand(settings: Settings, app_name: str) -> Iterator[SparkOnDemand]:
    spark = SparkOnDemand(settings, app_name)
    try:
        yield spark
    finally:
        spark.close()


U = TypeVar("U")
R = TypeVar("R")


def map_units(
    spark: SparkOnDemand | None,
    units: Sequence[U],
    task: Callable[[Iterable[U]], Iterable[R]],
    *,
    progress: Progress | None = None,
    shown: Callable[[U], UnitProgress] | None = None,
    pack: Callable[[Sequence[U], int], list[list[U]]] | None = None,
    busy: list[float] | None = None,
) -> list[R]:
    """Run ``task`` (a ``mapPartitions`` function) on each unit as one Spark task (in this
    process without ``spark``) and collect the results, ``results[i]`` being ``units[i]``'s.

    ``pack`` groups the units into Spark tasks instead (given the units and Spark's default
    parallelism; ``task`` then gets a group's units, in order). ``busy`` is given the wall
    time of each Spark task in its worker (from its first unit to its last result).

    With ``shown``, the units' tasks report to a listener here (each unit gets its address
    as ``progress_to``) and ``progress`` draws them. Errors of our taxonomy come back as
    results (see :func:`first_error`); anything else fails the Spark job.
    """
    if not units:
        return []
    show = progress is not None and shown is not None
    host = "127.0.0.1"
    if spark is not None:
        host = spark.context.getConf().get("spark.driver.host", "127.0.0.1")
    if show:
        assert progress is not None and shown is not None
        progress.units_started([shown(u) for u in units])
    try:
        with (
            listening(host, progress.unit_update)
            if show and progress
            else (contextlib.nullcontext()) as address
        ):
            if address is not None:
                units = [dataclasses.replace(cast(Any, u), progress_to=address) for u in units]
            if spark is None:
                return list(task(units))
            timed = functools.partial(tasktime.timed, task)
            if pack is None:
                collected = (
                    spark.context.parallelize(list(units), len(units))
                    .mapPartitions(timed)
                    .collect()
                )
                return _untimed(collected, busy)
            return _packed(spark.context, units, timed, pack, busy)
    finally:
        if show and progress is not None:
            progress.units_ended()


def _untimed(collected: list[Any], busy: list[float] | None) -> list[Any]:
    """The results without the tasks' :class:`TaskTime` (given to ``busy``)."""
    if busy is not None:
        busy.extend(r.seconds for r in collected if isinstance(r, tasktime.TaskTime))
    return [r for r in collected if not isinstance(r, tasktime.TaskTime)]


def _packed(
    context: Any,
    units: Sequence[U],
    task: Callable[[Iterable[U]], Iterable[Any]],
    pack: Callable[[Sequence[U], int], list[list[U]]],
    busy: list[float] | None,
) -> list[R]:
    groups = pack(units, context.defaultParallelism)
    flat = [unit for group in groups for unit in group]
    results = context.parallelize(groups, len(groups)).flatMap(tasktime.group).mapPartitions(task)
    position = {id(unit): i for i, unit in enumerate(units)}
    ordered: list[Any] = [None] * len(units)
    for unit, result in zip(flat, _untimed(results.collect(), busy), strict=True):
        ordered[position[id(unit)]] = result
    return ordered


class Failed(Protocol):
    """A unit's result that carries an error of our taxonomy back from its task."""

    def to_error(self) -> ArchiveError: ...


def first_error(failures: Sequence[Failed], prefer: str | None = None) -> ArchiveError | None:
    """The error to raise for failed units: the first of type ``prefer`` if any (a fenced
    run explains the others), else the first; None when nothing failed."""
    chosen = [f for f in failures if prefer and getattr(f, "error_type", None) == prefer]
    failed = (chosen or list(failures))[:1]
    return failed[0].to_error() if failed else None

"""Units run as Spark tasks from the driver, shared by ``run``, ``follow``, ``verify`` and
``restore``: :class:`SparkOnDemand` starts Spark the first time units run, :func:`map_units`
runs them (one task each, or packed), their progress shown live. Errors of our taxonomy come
back as values (:class:`.core.failure.TaskFailure`) among the results."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar, cast

from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.spark import tasktime
from kafka_archive.archiver.spark.context import spark_context, stop_spark
from kafka_archive.archiver.spark.progress import Progress, UnitProgress, listening

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
    results (:class:`.core.failure.TaskFailure`); anything else fails the Spark job.
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

"""What :func:`kafka_archive.archiver.spark.driver.map_units` runs in the Spark worker around a
command's task function: a group's units as one element, and the task's wall time.

A module of its own, with nothing but the standard library, so that the worker daemon
(:mod:`kafka_archive.archiver.spark.daemon`) imports it without the driver's modules: the
functions here are pickled by reference, so a worker imports their module to run them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

U = TypeVar("U")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class TaskTime:
    """The last element a Spark task yields: its wall time in the worker."""

    seconds: float


def timed(task: Callable[[Iterable[U]], Iterable[R]], units: Iterable[U]) -> Iterator[Any]:
    """``task``'s results, then its :class:`TaskTime`."""
    started = time.monotonic()
    yield from task(units)
    yield TaskTime(time.monotonic() - started)


def group(units: list[U]) -> list[U]:
    """One Spark element per group (``parallelize`` slices one element per task)."""
    return units

"""Calls run side by side on a bounded pool of threads: the driver's S3 and Kafka requests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

# Concurrent S3 requests of the driver's planning: botocore's connection pool holds 10.
PLAN_THREADS = 10
_T = TypeVar("_T")


def in_parallel(calls: Sequence[Callable[[], _T]]) -> list[_T]:
    """The results of ``calls``, in order, run on at most PLAN_THREADS threads; the first
    exception (in order) is raised once the calls started are over."""
    if len(calls) <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(min(PLAN_THREADS, len(calls))) as pool:
        futures = [pool.submit(call) for call in calls]
        try:
            return [future.result() for future in futures]
        finally:
            for future in futures:
                future.cancel()

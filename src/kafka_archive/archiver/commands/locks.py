"""The job's lease on each target of a plan, held for a session (``run``, ``follow``,
``run --reset-state``): taken in order, released at the end; a release that fails after the
session failed is logged, so that the session's own error is the one reported."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from kafka_archive.archiver.core.errors import ArchiveError
from kafka_archive.archiver.plan.preflight import targets_of
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan, Target

log = logging.getLogger(__name__)


@contextlib.contextmanager
def held_locks(
    store: S3Store, plan: Plan, job: str, run_id: str, ttl: int
) -> Iterator[dict[Target, JobLock]]:
    """The job's lock on every target of ``plan``, held for the block."""
    with contextlib.ExitStack() as stack:
        yield {
            target: stack.enter_context(_held(JobLock(store, target, job, run_id, ttl)))
            for target in targets_of(plan)
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
            log.warning(
                "could not release the job lock (it expires after lock_ttl_seconds): %s", exc
            )
        raise
    lock.release()

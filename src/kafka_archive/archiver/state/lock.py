"""A lease per target prefix, with a fencing epoch, so two runs writing the same routes never
interleave their writes — two runs of one job, or of two jobs whose statements share a
target (state belongs to the route, :mod:`.paths`).

The lock is a JSON object created with If-None-Match; a lock that was released, whose lease
expired, or whose holder is provably dead is taken over with If-Match on its ETag, so
exactly one contender wins, with an epoch above the previous holder's. The holder renews
the lease from a background thread (If-Match on its own last ETag; a renewal whose response
was lost is recognised by re-reading the lock) and proves it before every destructive step
(:meth:`JobLock.check`). Release marks the lock released, again with If-Match: it never
removes another run's lock, and the object stays so that epochs keep growing.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from kafka_archive.archiver.core.errors import ArchiveError, JobLockedError
from kafka_archive.archiver.state import lease, versions
from kafka_archive.archiver.state.paths import lock_key
from kafka_archive.archiver.store.s3 import PreconditionFailed, S3Store
from kafka_archive.kcql.plan import Target

log = logging.getLogger(__name__)


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


@dataclass
class JobLock:
    store: S3Store
    target: Target
    job: str
    run_id: str
    ttl_seconds: int
    epoch: int = 0
    _etag: str | None = None
    _renewal: int = 0
    _valid_until: float = 0.0  # monotonic: when the last successful renewal's proof ends
    _lost: str | None = None
    _lapses: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _mutex: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None
    _here: lease.Identity = field(default_factory=lease.Identity.here)

    @property
    def key(self) -> str:
        return lock_key(self.target)

    @property
    def lapses(self) -> int:
        """How often a renewal went out after this run stopped trusting its lease (past its
        safety margin: a frozen or starved process). Unchanged between two readings, the
        lease was held throughout, each renewal conditional on the one before, so no other
        run wrote under the target meanwhile (what a follow session's cached states rely
        on)."""
        return self._lapses

    @property
    def lost(self) -> bool:
        """Whether another run took the lease over (this run must not write any more)."""
        return self._lost is not None

    def _body(self, renewal: int, *, released: bool = False) -> dict[str, object]:
        now = lease.now_ms()
        expires = now if released else now + self.ttl_seconds * 1000
        return {
            "version": versions.LOCK_VERSION,
            "job": self.job,
            "run_id": self.run_id,
            "epoch": self.epoch,
            **self._here.fields(),
            "renewal": renewal,
            "renewed_at": _iso(now),
            "expires_at": _iso(expires),
            "expires_at_ms": expires,
            "released": released,
        }

    def released_body(self) -> dict[str, object]:
        """This run's lock at its epoch, released: what ``export-states`` puts in the place of
        the commit log's migrated marker, so that the next states run takes it over at once
        (with an epoch above it)."""
        return self._body(0, released=True)

    def acquire(self) -> None:
        bucket = self.target.bucket
        sent = time.monotonic()
        for _ in range(3):
            held = self.store.get_document(bucket, self.key)
            if held is not None:  # a newer version's lease: not ours to judge or take over
                versions.require(
                    held.body, versions.LOCK_VERSION, f"the lock s3://{bucket}/{self.key}"
                )
            if (
                held is not None
                and self.epoch
                and lease.renewal_applied(held.body, self.run_id, self.epoch, 0)
            ):  # our acquisition was applied, its response lost (the retry saw 412)
                self._etag, self._valid_until = held.etag, sent + self.ttl_seconds
                break
            previous = lease.epoch_of(held.body) if held is not None else None
            self.epoch = lease.next_epoch(previous, lease.now_ms())
            if held is not None and not lease.may_take_over(held.body, lease.now_ms(), self._here):
                raise JobLockedError(
                    f"job {held.body.get('job', self.job)!r} is already running on "
                    f"s3://{bucket}/{self.target.prefix} (run {held.body.get('run_id')} on "
                    f"host {held.body.get('host')}, pid {held.body.get('pid')}, lease until "
                    f"{held.body.get('expires_at')})",
                    hint="One run at a time writes a target prefix, whatever its job name: "
                    "wait for it to finish (if it died, its lease expires at that time), or "
                    "write to another prefix",
                )
            sent = time.monotonic()
            try:
                self._etag = self.store.put_document(
                    bucket,
                    self.key,
                    self._body(0),
                    if_match=held.etag if held is not None else None,
                )
            except PreconditionFailed:
                continue  # it changed between our two requests: look again
            self._valid_until = sent + self.ttl_seconds
            break
        else:
            raise JobLockedError(
                f"job {self.job!r}: another run took the lock first",
                hint="Only one run of a job may run at a time",
            )
        self._thread = threading.Thread(target=self._renew_loop, daemon=True, name="job-lock")
        self._thread.start()

    def _renew_once(self) -> None:
        """One renewal; a lost response is told from a lost lease by reading the lock."""
        with self._mutex:
            if self._lost is not None or self._etag is None:
                return
            renewal = self._renewal + 1
            late = not self._provable()
            sent = time.monotonic()
            try:
                try:
                    etag = self.store.put_document(
                        self.target.bucket, self.key, self._body(renewal), if_match=self._etag
                    )
                except PreconditionFailed:
                    held = self.store.get_document(self.target.bucket, self.key)
                    body = held.body if held is not None else None
                    if held is None or not lease.renewal_applied(
                        body, self.run_id, self.epoch, renewal
                    ):
                        holder = body.get("run_id") if body is not None else None
                        self._lost = f"run {holder} took the job's lease over"
                        log.warning("lost the lease of job %s to %s", self.job, holder)
                        return
                    etag = held.etag  # ours: the response of our PUT was lost
            except ArchiveError as exc:
                log.warning("could not renew the lease of job %s: %s", self.job, exc)
                return
            self._etag, self._renewal = etag, renewal
            self._valid_until = sent + self.ttl_seconds
            self._lapses += late

    def _renew_loop(self) -> None:
        while not self._stop.wait(lease.renew_interval(self.ttl_seconds)):
            self._renew_once()
            if self._lost is not None:
                return

    def _provable(self) -> bool:
        margin = lease.safety_margin_ms(self.ttl_seconds) / 1000
        return self._lost is None and time.monotonic() < self._valid_until - margin

    def check(self) -> None:
        """Return if this run provably holds the lease (with its safety margin), renewing it
        now if the background renewals have not; else raise FencedError."""
        if self._provable():
            return
        self._renew_once()
        if not self._provable():
            raise lease.fenced(self._lost or "the job's lease could not be renewed in time")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._mutex:
            if self._lost is not None or self._etag is None:
                return
            try:
                self.store.put_document(
                    self.target.bucket,
                    self.key,
                    self._body(self._renewal + 1, released=True),
                    if_match=self._etag,
                )
            except PreconditionFailed:
                held = self.store.get_document(self.target.bucket, self.key)
                body: Any = held.body if held is not None else {}
                mine = (body.get("run_id"), lease.epoch_of(body), body.get("renewal"))
                if mine != (self.run_id, self.epoch, self._renewal + 1):
                    log.warning("the lock of job %s was taken over before release", self.job)
            except ArchiveError as exc:
                log.warning(
                    "could not release the lock of job %s (it expires in %d s): %s",
                    self.job,
                    self.ttl_seconds,
                    exc,
                )
            self._etag = None

    def __enter__(self) -> JobLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

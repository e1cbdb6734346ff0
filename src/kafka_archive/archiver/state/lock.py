"""A lease per job and target prefix, so two runs of one job never interleave their writes.

The lock is a JSON object created with If-None-Match; a lock whose lease expired (its run
died) is taken over with If-Match on its ETag, so exactly one contender wins. The holder
renews the lease from a background thread while the run lasts.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import threading
from dataclasses import dataclass, field
from types import TracebackType

from kafka_archive.archiver.errors import JobLockedError
from kafka_archive.archiver.state.paths import lock_key
from kafka_archive.archiver.store.s3 import PreconditionFailed, S3Store
from kafka_archive.kcql.plan import Target


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _iso(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _holder_is_dead(body: dict[str, object]) -> bool:
    """Whether the lock's holder was a process of this host that no longer exists (a run
    killed or crashed here): its lease need not be waited out."""
    if body.get("host") != socket.gethostname():
        return False
    pid = body.get("pid")
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # alive, another user's
    return False


@dataclass
class JobLock:
    store: S3Store
    target: Target
    job: str
    run_id: str
    ttl_seconds: int
    _etag: str | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    lost: bool = False

    @property
    def key(self) -> str:
        return lock_key(self.target, self.job)

    def _body(self) -> dict[str, object]:
        now = _now()
        return {
            "job": self.job,
            "run_id": self.run_id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "renewed_at": _iso(now),
            "expires_at": _iso(now + dt.timedelta(seconds=self.ttl_seconds)),
        }

    def acquire(self) -> None:
        bucket = self.target.bucket
        try:
            self._etag = self.store.put_document(bucket, self.key, self._body(), if_match=None)
        except PreconditionFailed:
            held = self.store.get_document(bucket, self.key)
            if held is None:  # released between our two requests: try once more
                self._etag = self.store.put_document(bucket, self.key, self._body(), if_match=None)
            else:
                expires = dt.datetime.strptime(
                    str(held.body.get("expires_at")), "%Y-%m-%dT%H:%M:%SZ"
                ).replace(tzinfo=dt.UTC)
                if expires > _now() and not _holder_is_dead(held.body):
                    raise JobLockedError(
                        f"job {self.job!r} is already running on s3://{bucket}/"
                        f"{self.target.prefix} (run {held.body.get('run_id')} on host "
                        f"{held.body.get('host')}, pid {held.body.get('pid')}, lease until "
                        f"{held.body.get('expires_at')})",
                        hint="Wait for it to finish; if it died, its lease expires at that time",
                    ) from None
                try:
                    self._etag = self.store.put_document(
                        bucket, self.key, self._body(), if_match=held.etag
                    )
                except PreconditionFailed:
                    raise JobLockedError(
                        f"job {self.job!r}: another run took over the expired lock first",
                        hint="Only one run of a job may run at a time",
                    ) from None
        self._thread = threading.Thread(target=self._renew_loop, daemon=True, name="job-lock")
        self._thread.start()

    def _renew_loop(self) -> None:
        interval = max(1.0, self.ttl_seconds / 3)
        while not self._stop.wait(interval):
            try:
                self._etag = self.store.put_document(
                    self.target.bucket, self.key, self._body(), if_match=self._etag
                )
            except PreconditionFailed:
                self.lost = True
                return
            except Exception:
                continue  # transient: the next renewal tries again within the lease

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if not self.lost and self._etag is not None:
            self.store.delete_document(self.target.bucket, self.key)

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

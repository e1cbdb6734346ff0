"""commit_protocol=log: a live session's advisory presence on each of its targets, so that a
second writer of the target (``run``, ``--follow``, ``compact``, ``erase``, ``expire``,
``export-states``) stops with exit 8 instead of fencing it (issue 37).

The log's claims are the fence: a newer claim stops an older writer at its next commit
(exit 18), which is what keeps exactly once. The presence changes nothing of that: it is
politeness, the states protocol's user contract (its lease, :mod:`.state.lock`) in log mode.
``<prefix>/.kafka-archive/presence.json`` holds the session's run id, job, command, host
(name, boot id, PID namespace, pid), its start and its ``ttl_seconds``. It is created
If-None-Match at the session's start and renewed (If-Match on its own ETag) every
``ttl_seconds``/3 from a background thread; its Last-Modified is the heartbeat, by the
store's clock, as is "now" (the Date of the response that read it). A newcomer that finds
it (:func:`judge`):

- not renewed for the holder's ``ttl_seconds`` (a crashed, frozen or cut-off session), or
  its holder provably dead (a process of this very kernel that no longer exists, as the
  lease's :func:`.lease.holder_provably_dead`): takes it over (If-Match on the ETag it
  judged) and claims, fencing that session if it ever comes back;
- otherwise: exit 8, one line (who, since when, what to do). No command overrides it, as
  none overrides the states protocol's lease.

A clean end deletes it (If-Match on its own ETag: never another's). A session that finds
its presence taken over stops renewing it and carries on until its claim is fenced.
Cost: one PUT and one DELETE a session, one PUT every ``ttl_seconds``/3 (900 s by default:
one every 300 s, whatever the batches); a GET only when a presence is found.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_archive.archiver.core.errors import ArchiveError, JobLockedError
from kafka_archive.archiver.state import lease
from kafka_archive.archiver.state.paths import state_root
from kafka_archive.archiver.store.s3 import Document, PreconditionFailed, S3Store
from kafka_archive.kcql.plan import Target

log = logging.getLogger(__name__)

VERSION = 1
_TRIES = 3  # looks at a presence that changed between our read and our write


def presence_key(target: Target) -> str:
    return f"{state_root(target)}/presence.json"


def renew_interval(ttl_seconds: int) -> float:
    """Seconds between renewals: three per ``ttl_seconds``, so one lost renewal never lets
    the presence expire."""
    return max(0.2, ttl_seconds / 3)


class Verdict(enum.Enum):
    OURS = "ours"  # this session's own (a create whose answer was lost)
    LIVE = "live"  # another session's, renewed in time: stop (exit 8)
    EXPIRED = "expired"  # not renewed within its ttl by the store's clock: take it over
    DEAD = "dead"  # its holder is a process of this kernel that exists no more: take it over


@dataclass(frozen=True, slots=True)
class Seen:
    """A presence as read: its document, and by the store's clock when it was last written
    (``modified``) and when it was read (``now``)."""

    body: Mapping[str, Any]
    modified: float
    now: float


def ttl_of(body: Mapping[str, Any], default: int) -> float:
    """The holder's promise: renewed within this many seconds (``default`` when unreadable)."""
    value = body.get("ttl_seconds")
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return float(default)


def judge(
    seen: Seen,
    run_id: str,
    default_ttl: int,
    here: lease.Identity,
    alive: Callable[[int], bool] = lease.pid_alive,
) -> Verdict:
    """What a session of run ``run_id`` that finds ``seen`` does (pure)."""
    if seen.body.get("run_id") == run_id:
        return Verdict.OURS
    if seen.now - seen.modified >= ttl_of(seen.body, default_ttl):
        return Verdict.EXPIRED
    if lease.holder_provably_dead(seen.body, here, alive):
        return Verdict.DEAD
    return Verdict.LIVE


def locked_error(target: Target, seen: Seen) -> JobLockedError:
    """Exit 8, as the states protocol's lease says it: who, since when, what to do."""
    body = seen.body
    ttl = ttl_of(body, 0)
    who = str(body.get("command") or "a run")
    if body.get("job"):
        who += f" of job {body.get('job')!r}"
    return JobLockedError(
        f"{who} is writing "
        f"s3://{target.bucket}/{target.prefix} (run {body.get('run_id')} on host "
        f"{body.get('host')}, pid {body.get('pid')}, since {body.get('started')}, last seen "
        f"{max(0.0, seen.now - seen.modified):.0f} s ago)",
        hint="One run at a time writes a target prefix, whatever its job name: wait for it "
        f"to finish (if it died, its presence expires {ttl:.0f} s after it was last seen), "
        "stop it, or write to another prefix",
    )


@dataclass
class Presence:
    """This session's presence on one target (the module's doc)."""

    store: S3Store
    target: Target
    run_id: str
    job: str
    command: str
    ttl_seconds: int
    _etag: str | None = None
    _lost: bool = False
    _stop: threading.Event = field(default_factory=threading.Event)
    _mutex: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None
    _here: lease.Identity = field(default_factory=lease.Identity.here)
    _started: str = ""

    @property
    def key(self) -> str:
        return presence_key(self.target)

    @property
    def lost(self) -> bool:
        """Whether another session took the presence over (ours expired)."""
        return self._lost

    def _body(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "run_id": self.run_id,
            "job": self.job,
            "command": self.command,
            **self._here.fields(),
            "started": self._started,
            "ttl_seconds": self.ttl_seconds,
        }

    def acquire(self) -> None:
        """Create the presence, or take over an expired or dead one; exit 8 on a live one."""
        self._started = at_time(time.time())
        bucket = self.target.bucket
        found: Document | None = None
        for _ in range(_TRIES):
            try:
                self._etag = self.store.put_document(
                    bucket, self.key, self._body(), if_match=found.etag if found else None
                )
                break
            except PreconditionFailed:
                pass  # it exists, or changed since we read it: look again
            found = self.store.get_document(bucket, self.key)
            if found is None:
                continue
            # (The store's clock; a store that sends no Date: ours.)
            seen = Seen(found.body, found.modified, found.served or time.time())
            verdict = judge(seen, self.run_id, self.ttl_seconds, self._here)
            if verdict is Verdict.LIVE:
                raise locked_error(self.target, seen)
            if verdict is not Verdict.OURS:
                log.info(
                    "s3://%s/%s: the presence of run %s is %s; this %s takes the target",
                    bucket,
                    self.target.prefix,
                    seen.body.get("run_id"),
                    verdict.value,
                    self.command,
                )
        else:
            raise JobLockedError(
                f"s3://{bucket}/{self.target.prefix}: another run took the target first",
                hint="One run at a time writes a target prefix: wait for it to finish",
            )
        self._thread = threading.Thread(target=self._renew_loop, daemon=True, name="presence")
        self._thread.start()

    def renew(self) -> None:
        """One renewal, If-Match on our own ETag; refused: another session took it over."""
        with self._mutex:
            if self._lost or self._etag is None:
                return
            try:
                self._etag = self.store.put_document(
                    self.target.bucket, self.key, self._body(), if_match=self._etag
                )
            except PreconditionFailed:
                self._lost = True
                log.warning(
                    "s3://%s/%s: another run took this session's presence over (it was not "
                    "renewed in time); its claim fences this session at its next commit",
                    self.target.bucket,
                    self.target.prefix,
                )
            except ArchiveError as exc:
                log.warning("could not renew the presence on %s: %s", self.target, exc)

    def _renew_loop(self) -> None:
        while not self._stop.wait(renew_interval(self.ttl_seconds)):
            self.renew()
            if self._lost:
                return

    def release(self) -> None:
        """Stop renewing; delete the presence while it is still ours."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._mutex:
            if self._etag is not None and not self._lost:
                self.store.delete_if_match(self.target.bucket, self.key, self._etag)
            self._etag = None


@contextlib.contextmanager
def present(
    store: S3Store,
    targets: Iterable[Target],
    *,
    run_id: str,
    job: str,
    command: str,
    ttl_seconds: int,
) -> Iterator[dict[Target, Presence]]:
    """This session's presence on each of ``targets`` (in order) for the block; removed at
    its end (a removal that fails is logged: the session's own error is the one reported,
    and the presence expires after ``ttl_seconds``)."""
    with contextlib.ExitStack() as stack:
        held: dict[Target, Presence] = {}
        for target in sorted(set(targets), key=lambda t: (t.bucket, t.prefix)):
            p = Presence(store, target, run_id, job, command, ttl_seconds)
            p.acquire()
            stack.callback(_release, p)
            held[target] = p
        yield held


def _release(p: Presence) -> None:
    try:
        p.release()
    except ArchiveError as exc:
        log.warning(
            "could not remove the presence on %s (it expires after %d s): %s",
            p.target,
            p.ttl_seconds,
            exc,
        )


def at_time(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))

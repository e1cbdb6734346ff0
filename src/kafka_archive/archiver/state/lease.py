"""The job's lease, as data: fencing epochs, who may take a lease over, whether a lease is
still this run's. Pure functions (the S3 side is in :mod:`.lock`), plus :class:`LeaseView`,
the lease as a Spark task sees it.

A lock document holds ``run_id``, ``epoch`` (the fencing token: every acquisition gets one
strictly greater than the previous holder's), ``expires_at_ms`` (wall clock), the holder's
``host``, ``boot_id``, ``pid_ns`` and ``pid``, a ``renewal`` counter and ``released``.
"""

from __future__ import annotations

import calendar
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_archive.archiver.core.errors import FencedError


def safety_margin_ms(ttl_seconds: int) -> int:
    """How long before its expiry a holder stops trusting its lease (a third of it): room
    for clock skew between hosts and for a renewal or two that fail."""
    return ttl_seconds * 1000 // 3


def renew_interval(ttl_seconds: int) -> float:
    """Seconds between renewals: six per lease, so a lost renewal never costs it."""
    return max(0.2, ttl_seconds / 6)


def next_epoch(previous: int | None, now_ms: int) -> int:
    """The fencing epoch of a new acquisition: the wall-clock millisecond, bumped past the
    previous holder's epoch when the clock lags (so epochs only grow, even when the lock
    object was deleted and its last epoch is unknown, as long as clocks do not run back
    further than the time between two runs)."""
    return now_ms if previous is None else max(previous + 1, now_ms)


def epoch_of(body: Mapping[str, Any] | None) -> int | None:
    value = None if body is None else body.get("epoch")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def expires_ms(body: Mapping[str, Any]) -> int:
    """When the lease in ``body`` ends (ms since the epoch); 0 when unreadable (expired)."""
    value = body.get("expires_at_ms")
    if isinstance(value, int):
        return value
    text = str(body.get("expires_at", ""))
    try:
        parsed = time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return 0
    return calendar.timegm(parsed) * 1000


@dataclass(frozen=True, slots=True)
class Identity:
    """What tells processes apart: the pid alone means nothing across hosts, containers with
    their own PID namespace, or a reboot."""

    host: str
    boot_id: str
    pid_ns: str
    pid: int

    @classmethod
    def here(cls) -> Identity:
        return cls(
            socket.gethostname(),
            _read("/proc/sys/kernel/random/boot_id"),
            _link("/proc/self/ns/pid"),
            os.getpid(),
        )

    def fields(self) -> dict[str, object]:
        return {"host": self.host, "boot_id": self.boot_id, "pid_ns": self.pid_ns, "pid": self.pid}


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as file:
            return file.read().strip()
    except OSError:
        return ""


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True


def holder_provably_dead(
    held: Mapping[str, Any], here: Identity, alive: Callable[[int], bool] = pid_alive
) -> bool:
    """Whether the holder was a process of this very kernel instance (same host name, boot
    id and PID namespace) that no longer exists. A shared host name alone proves nothing:
    containers with host networking share it, each with its own PID namespace."""
    pid = held.get("pid")
    if not (here.boot_id and here.pid_ns):
        return False  # cannot tell (not Linux): wait for the lease to expire
    if (held.get("host"), held.get("boot_id"), held.get("pid_ns")) != (
        here.host,
        here.boot_id,
        here.pid_ns,
    ):
        return False
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or pid == here.pid:
        return False
    return not alive(pid)


def may_take_over(
    held: Mapping[str, Any],
    now_ms: int,
    here: Identity,
    alive: Callable[[int], bool] = pid_alive,
) -> bool:
    """Whether a held lock may be taken over now: released, expired, or its holder is
    provably dead."""
    if held.get("released") is True:
        return True
    return now_ms >= expires_ms(held) or holder_provably_dead(held, here, alive)


@dataclass(frozen=True, slots=True)
class LeaseStatus:
    ok: bool
    remaining_ms: int
    reason: str = ""


def lease_status(
    body: Mapping[str, Any] | None, run_id: str, epoch: int, now_ms: int, margin_ms: int
) -> LeaseStatus:
    """Whether the lock document ``body`` proves that run ``run_id`` holds the lease of
    ``epoch`` for at least ``margin_ms`` more, and for how long beyond that margin."""
    if body is None:
        return LeaseStatus(False, 0, "the job's lock is gone")
    if body.get("run_id") != run_id or epoch_of(body) != epoch:
        return LeaseStatus(False, 0, f"run {body.get('run_id')} took the job's lease over")
    if body.get("released") is True:
        return LeaseStatus(False, 0, "this run released the job's lease")
    remaining = expires_ms(body) - now_ms - margin_ms
    if remaining <= 0:
        return LeaseStatus(False, 0, "the job's lease was not renewed in time")
    return LeaseStatus(True, remaining)


def renewal_applied(body: Mapping[str, Any] | None, run_id: str, epoch: int, renewal: int) -> bool:
    """After a renewal answered 412: whether the lock is that very renewal (it was applied,
    its response lost, and the retry saw the new ETag) rather than another run's."""
    return (
        body is not None
        and body.get("run_id") == run_id
        and epoch_of(body) == epoch
        and body.get("renewal") == renewal
        and body.get("released") is not True
    )


def now_ms() -> int:
    return int(time.time() * 1000)


class LeaseView:
    """The lease as a task sees it: the lock is read when the last reading's proof runs
    out, so a task re-reads it about once per lease, not once per object; a task frozen
    past its lease reads it again before its next write, and stops."""

    def __init__(
        self,
        read: Callable[[], Mapping[str, Any] | None],
        run_id: str,
        epoch: int,
        ttl_seconds: int,
    ) -> None:
        self._read = read
        self._run_id = run_id
        self._epoch = epoch
        self._margin = safety_margin_ms(ttl_seconds)
        self._valid_until = 0.0  # monotonic seconds

    def check(self, *, force: bool = False) -> None:
        """Return if the lease is provably this run's; else raise :class:`FencedError`."""
        if not force and time.monotonic() < self._valid_until:
            return
        asked = time.monotonic()
        status = lease_status(self._read(), self._run_id, self._epoch, now_ms(), self._margin)
        if not status.ok:
            raise fenced(status.reason)
        self._valid_until = asked + status.remaining_ms / 1000


def fenced(reason: str) -> FencedError:
    return FencedError(
        f"this run stopped writing: {reason}",
        hint="Nothing further was committed; another run of the job holds the lease (or "
        "the next run takes it over and cleans up what this one left)",
    )

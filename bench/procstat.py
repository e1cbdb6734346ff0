"""What one measured process tree costs: wall time, CPU-seconds and peak RSS, from /proc.

CPU-seconds are user + system time of the whole tree, children included once they are gone:
``os.wait4`` on the top process gives its own times plus those of every descendant that its
parent reaped (the kernel adds a reaped child's times to its parent's cumulative child times,
so the JVM's Python workers count through the JVM, the JVM through the CLI). A descendant
orphaned before it was reaped would escape that sum, so the benchmark makes itself a child
subreaper: such orphans are re-parented to it, belong to the tree from then on, and
:func:`measure` reaps them at the end and adds their times (so nothing else may start
children of the benchmark while it measures). Servers the benchmark started before (broker,
S3 endpoint) are not in the tree and never count.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphans of measured trees are re-parented to this process (Linux; a no-op elsewhere)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return parents


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


class TreeSampler:
    """Samples a process tree every ``interval`` seconds: peak summed RSS, every pid seen,
    and when a process named ``watch`` (e.g. ``java``: Spark starting) first appeared."""

    def __init__(self, pid: int, adopted_since: set[int], watch: str = "java",
                 interval: float = 0.1) -> None:
        self.pid = pid
        self._not_adopted = adopted_since
        self.peak = 0
        self.seen: set[int] = set()
        self.watch = watch
        self.watch_seen_at: float | None = None
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for pid, ppid in _parents().items():
            children.setdefault(ppid, []).append(pid)
        # Our own children that were not ours before: the tree's orphans, adopted by us.
        adopted = [p for p in children.get(os.getpid(), []) if p not in self._not_adopted]
        out, todo = [], [self.pid, *adopted]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(children.get(pid, []))
        return out

    def _run(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while True:
            total = 0
            for pid in self._tree():
                if pid not in self.seen:
                    self.seen.add(pid)
                    if self.watch_seen_at is None and _comm(pid) == self.watch:
                        self.watch_seen_at = time.monotonic()
                try:
                    with open(f"/proc/{pid}/statm") as f:
                        total += int(f.read().split()[1]) * page
                except (OSError, IndexError, ValueError):
                    pass
            self.peak = max(self.peak, total)
            if self._stop.wait(self._interval):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass(frozen=True)
class Usage:
    seconds: float
    cpu_seconds: float
    peak_rss: int
    code: int
    #: seconds from start until the watched process (the Spark JVM) appeared, if it did
    until_watch: float | None = None


def _children() -> set[int]:
    me = os.getpid()
    return {pid for pid, ppid in _parents().items() if ppid == me}


def _reap_orphans(before: set[int]) -> float:
    """Reap the tree's orphans, re-parented to us (their subreaper); their CPU-seconds."""
    cpu = 0.0
    orphans = _children() - before
    deadline = time.monotonic() + 30
    while orphans and time.monotonic() < deadline:
        for pid in list(orphans):
            try:
                done, _, usage = os.wait4(pid, os.WNOHANG)
            except ChildProcessError:
                orphans.discard(pid)
                continue
            if done:
                orphans.discard(pid)
                cpu += usage.ru_utime + usage.ru_stime
        if orphans:
            time.sleep(0.1)
    return cpu


def measure(command: Sequence[str], env: Mapping[str, str], **kw: object) -> Usage:
    """Run ``command`` to its end; its wall time, CPU-seconds and peak RSS (whole tree)."""
    before = _children()
    started = time.monotonic()
    process = subprocess.Popen(  # type: ignore[call-overload]
        command, env=env, start_new_session=True, **kw)
    sampler = TreeSampler(process.pid, before | {process.pid})
    try:
        _, status, usage = os.wait4(process.pid, 0)
    except BaseException:  # interrupted: the measured tree goes with the benchmark
        sampler.stop()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait()
        raise
    seconds = time.monotonic() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    sampler.stop()
    cpu = usage.ru_utime + usage.ru_stime + _reap_orphans(before)
    watch = sampler.watch_seen_at
    return Usage(seconds, cpu, sampler.peak, process.returncode,
                 None if watch is None else watch - started)

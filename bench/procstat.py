"""What one measured process tree costs: wall time, CPU-seconds and peak RSS, from /proc.

CPU-seconds are user + system time of the whole tree, counted two ways, each a lower bound,
and the larger one is reported:

- reaped: ``os.wait4`` on the top process gives its own times plus those of every descendant
  that its parent reaped (the kernel adds a reaped child's times to its parent's cumulative
  child times). Orphans are re-parented to the benchmark, which makes itself a child
  subreaper, and are reaped and counted at the end (so nothing else may start children of
  the benchmark while it measures). A descendant that its parent never reaped and that died
  with it escapes this sum: measured, Spark's Python workers at the end of a run (the CLI
  does not wait for the JVM, nor the JVM's daemon for its workers);
- sampled: every 0.1 s the sampler reads each process's own utime + stime from
  ``/proc/<pid>/stat``; the sum of the last values misses at most the last 0.1 s of each
  process, and processes that lived less than that.

Servers the benchmark started before (broker, S3 endpoint) are not in the tree and never
count.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

_PR_SET_CHILD_SUBREAPER = 36
_TICKS = os.sysconf("SC_CLK_TCK")


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

    def __init__(
        self,
        pid: int,
        adopted_since: set[int],
        watch: str = "java",
        interval: float = 0.1,
        threads: bool = False,
    ) -> None:
        self.pid = pid
        #: with ``threads``: last sampled own CPU-seconds and name of every thread, by
        #: (pid, tid)
        self.threads: dict[tuple[int, int], tuple[str, float]] | None = {} if threads else None
        self._not_adopted = adopted_since
        self.peak = 0
        #: peak RSS of each process of the tree, by pid
        self.peak_by_pid: dict[int, int] = {}
        #: every process of the tree seen, by pid: its command name when last sampled
        self.seen: dict[int, str] = {}
        #: last sampled own CPU-seconds of every process of the tree
        self.cpu: dict[int, float] = {}
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
                    self.seen[pid] = _comm(pid)
                    if self.watch_seen_at is None and self.seen[pid] == self.watch:
                        self.watch_seen_at = time.monotonic()
                try:
                    with open(f"/proc/{pid}/statm") as f:
                        rss = int(f.read().split()[1]) * page
                    total += rss
                    self.peak_by_pid[pid] = max(self.peak_by_pid.get(pid, 0), rss)
                    with open(f"/proc/{pid}/stat") as f:
                        head, tail = f.read().rsplit(")", 1)
                    fields = tail.split()
                    # utime, stime: fields 14 and 15 of stat, 12 and 13 after the name
                    self.cpu[pid] = (int(fields[11]) + int(fields[12])) / _TICKS
                    self.seen[pid] = head.split("(", 1)[1]  # its name now (after an exec)
                except (OSError, IndexError, ValueError):
                    pass
                if self.threads is not None:
                    self._sample_threads(pid)
            self.peak = max(self.peak, total)
            if self._stop.wait(self._interval):
                return

    def _sample_threads(self, pid: int) -> None:
        assert self.threads is not None
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    head, tail = f.read().rsplit(")", 1)
                fields = tail.split()
                cpu = (int(fields[11]) + int(fields[12])) / _TICKS
                self.threads[(pid, int(tid))] = (head.split("(", 1)[1], cpu)
            except (OSError, IndexError, ValueError):
                continue

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
    #: the two lower bounds whose larger one is ``cpu_seconds``
    reaped_cpu_seconds: float = 0.0
    sampled_cpu_seconds: float = 0.0
    #: sampled CPU-seconds by command name (java, python, …): where the time went
    sampled_by_name: dict[str, float] = field(default_factory=dict)
    #: the largest peak RSS of one process, by command name (kafka-archive: the driver;
    #: java: Spark's JVM; python3…: the worker daemon and its workers)
    peak_rss_by_name: dict[str, int] = field(default_factory=dict)
    #: with ``measure(threads=True)``: sampled CPU-seconds by (process name, thread name),
    #: thread names with their digits replaced by ``#`` (one row for a pool of threads)
    sampled_by_thread: dict[tuple[str, str], float] = field(default_factory=dict)


def _children() -> set[int]:
    me = os.getpid()
    return {pid for pid, ppid in _parents().items() if ppid == me}


def _reap_orphans(before: set[int]) -> float:
    """Reap the tree's orphans, re-parented to us (their subreaper); their CPU-seconds."""
    cpu = 0.0
    deadline = time.monotonic() + 30
    # An orphan that exits leaves its own children to us: look again until none is left.
    while (orphans := _children() - before) and time.monotonic() < deadline:
        for pid in orphans:
            with contextlib.suppress(ChildProcessError):
                done, _, usage = os.wait4(pid, os.WNOHANG)
                if done:
                    cpu += usage.ru_utime + usage.ru_stime
        time.sleep(0.1)
    return cpu


def measure(
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    started_hook: Callable[[subprocess.Popen[bytes]], None] | None = None,
    threads: bool = False,
    **kw: object,
) -> Usage:
    """Run ``command`` to its end; its wall time, CPU-seconds and peak RSS (whole tree).

    ``started_hook`` is given the process once it runs (from another thread, e.g. to stop a
    ``--follow`` run that ``measure`` waits for). With ``threads``, every thread's CPU is
    sampled too (``Usage.sampled_by_thread``)."""
    before = _children()
    started = time.monotonic()
    process = subprocess.Popen(  # type: ignore[call-overload]
        command, env=env, start_new_session=True, **kw
    )
    if started_hook is not None:
        started_hook(process)
    sampler = TreeSampler(process.pid, before | {process.pid}, threads=threads)
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
    sampled = sum(sampler.cpu.values())
    by_name: dict[str, float] = {}
    for pid, seconds_of_pid in sampler.cpu.items():
        name = sampler.seen.get(pid, "?")
        by_name[name] = by_name.get(name, 0.0) + seconds_of_pid
    peak_by_name: dict[str, int] = {}
    for pid, rss in sampler.peak_by_pid.items():
        name = sampler.seen.get(pid, "?")
        peak_by_name[name] = max(peak_by_name.get(name, 0), rss)
    by_thread: dict[tuple[str, str], float] = {}
    for (pid, _), (thread, seconds_of_thread) in (sampler.threads or {}).items():
        key = (sampler.seen.get(pid, "?"), re.sub(r"\d+", "#", thread))
        by_thread[key] = by_thread.get(key, 0.0) + seconds_of_thread
    return Usage(
        seconds,
        max(cpu, sampled),
        sampler.peak,
        process.returncode,
        None if watch is None else watch - started,
        cpu,
        sampled,
        by_name,
        peak_by_name,
        by_thread,
    )


def stop_measured(
    running: Sequence[subprocess.Popen[bytes]], runner: threading.Thread, grace: float = 120
) -> None:
    """Stop a process that ``measure`` runs on ``runner`` (``running`` holds it once started):
    SIGTERM to it alone, as a service manager stops its main process (it finishes its work and
    stops what it started); SIGKILL to its process group if it has not ended within ``grace``
    seconds. Returns once ``runner`` has."""
    if running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(running[0].pid, signal.SIGTERM)
        runner.join(grace)
        if runner.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(running[0].pid, signal.SIGKILL)
    runner.join()

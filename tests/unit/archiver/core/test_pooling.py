"""The per-process pool: keyed take and give, reset on give-back, a bounded idle set, idle
objects closed after their time and at exit, and a forked child that forgets its parent's."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

import pytest

from kafka_archive.archiver.core.pooling import Pool


@dataclass(eq=False)
class Thing:
    spec: str
    used: int = 0
    closed: bool = False
    events: list[str] = field(default_factory=list)


class Recorder:
    """A pool of :class:`Thing` that notes what it made and closed."""

    def __init__(self, keep: bool = True) -> None:
        self.made: list[Thing] = []
        self.closed: list[Thing] = []
        self.keep = keep

    def make(self, spec: str) -> Thing:
        thing = Thing(spec)
        self.made.append(thing)
        return thing

    def reset(self, thing: Thing) -> bool:
        thing.used = 0
        thing.events.append("reset")
        return self.keep

    def reuse(self, thing: Thing) -> None:
        thing.events.append("reuse")

    def close(self, thing: Thing) -> None:
        thing.closed = True
        self.closed.append(thing)

    def pool(self, max_idle: int = 16, max_idle_seconds: float | None = None) -> Pool[str, Thing]:
        return Pool(
            self.make,
            lambda spec: spec.split("#")[0],  # "a#1" and "a#2" share a key
            reset=self.reset,
            close=self.close,
            reuse=self.reuse,
            max_idle=max_idle,
            max_idle_seconds=max_idle_seconds,
        )


def test_an_object_given_back_serves_the_next_user_of_its_key_reset() -> None:
    r = Recorder()
    pool = r.pool()
    a = pool.take("a")
    a.used = 3
    pool.give("a", a)
    assert len(pool) == 1
    again = pool.take("a#2")  # another spec of the same key
    assert again is a and a.used == 0 and a.events == ["reset", "reuse"]
    assert pool.take("a") is not a, "one user at a time: taken, it is not idle"
    assert pool.take("b") is not a, "another key: another object"
    assert len(r.made) == 3 and r.closed == []


def test_the_last_object_given_back_is_taken_first() -> None:
    r = Recorder()
    pool = r.pool()
    first, second = pool.take("a"), pool.take("a")
    pool.give("a", first)
    pool.give("a", second)
    assert pool.take("a") is second
    assert pool.take("a") is first


def test_an_object_that_cannot_be_reset_is_closed_not_kept() -> None:
    r = Recorder(keep=False)
    pool = r.pool()
    a = pool.take("a")
    pool.give("a", a)
    assert a.closed and len(pool) == 0

    def failing(thing: Thing) -> bool:
        raise RuntimeError("in doubt")

    pool = Pool(r.make, str, reset=failing, close=r.close)
    b = pool.take("b")
    pool.give("b", b)
    assert b.closed and len(pool) == 0


def test_an_object_that_cannot_be_reused_is_closed_and_replaced() -> None:
    r = Recorder()

    def failing(thing: Thing) -> None:
        raise RuntimeError("stale")

    pool = Pool(r.make, str, reset=r.reset, close=r.close, reuse=failing)
    a = pool.take("a")
    pool.give("a", a)
    b = pool.take("a")
    assert b is not a and a.closed


def test_the_idle_set_is_bounded_the_oldest_closed_first() -> None:
    r = Recorder()
    pool = r.pool(max_idle=2)
    things = [pool.take(str(i)) for i in range(4)]
    for i, thing in enumerate(things):
        pool.give(str(i), thing)
    assert len(pool) == 2
    assert r.closed == things[:2]
    assert pool.take("3") is things[3] and pool.take("2") is things[2]


def test_close_errors_are_dropped() -> None:
    def failing(thing: Thing) -> None:
        raise RuntimeError("cannot close")

    r = Recorder()
    pool = Pool(r.make, str, reset=r.reset, close=failing, max_idle=0)
    pool.give("a", pool.take("a"))  # evicted at once; its close fails quietly
    assert len(pool) == 0


def test_idle_objects_are_closed_after_their_idle_time_without_another_take() -> None:
    r = Recorder()
    pool = r.pool(max_idle_seconds=0.2)
    a, b = pool.take("a"), pool.take("b")
    pool.give("a", a)
    pool.give("b", b)
    deadline = time.monotonic() + 30  # generous: the machine is shared
    while len(r.closed) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(t.spec for t in r.closed) == ["a", "b"] and len(pool) == 0
    # The reaper ended with the idle set, and starts again with the next give.
    c = pool.take("c")
    pool.give("c", c)
    while not c.closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert c.closed


def test_an_object_taken_before_its_idle_time_is_not_closed() -> None:
    r = Recorder()
    pool = r.pool(max_idle_seconds=3600)
    a = pool.take("a")
    pool.give("a", a)
    assert pool.take("a") is a and not a.closed


def test_clear_closes_every_idle_object() -> None:
    r = Recorder()
    pool = r.pool()
    things = [pool.take(s) for s in "abc"]
    for thing in things:
        pool.give(thing.spec, thing)
    pool.clear()
    assert len(pool) == 0 and sorted(t.spec for t in r.closed) == ["a", "b", "c"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork")
def test_a_forked_child_forgets_its_parents_idle_objects() -> None:
    r = Recorder()
    pool = r.pool(max_idle_seconds=3600)
    parents = pool.take("a")
    pool.give("a", parents)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running the parent's test machinery
        try:
            taken = pool.take("a")
            pool.give("a", taken)
            report = f"{taken is parents} {len(pool)} {parents.closed} {len(r.closed)}"
        except BaseException as exc:  # any failure is the parent's to report
            report = f"error {exc!r}"
        os.write(write_end, report.encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        report = f.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The child made its own, kept it, and closed nothing of the parent's.
    assert report == "False 1 False 0"
    assert pool.take("a") is parents and not parents.closed, "the parent keeps its own"


def test_idle_objects_are_closed_at_exit() -> None:
    script = """
from kafka_archive.archiver.core.pooling import Pool
class Thing:
    def close(self):
        print("closed", flush=True)
pool = Pool(lambda spec: Thing(), str, reset=lambda t: True, close=Thing.close)
pool.give("a", pool.take("a"))
pool.give("b", pool.take("b"))
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.splitlines() == ["closed", "closed"]

"""Live progress over TCP (archiver/spark/progress.py): what a worker's units send reaches the
driver's listener, over one connection per worker thread rather than one per unit."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import pytest

from kafka_archive.archiver.spark import progress
from kafka_archive.archiver.spark.progress import ProgressSender, UnitProgress, listening


def _unit(partition: int) -> UnitProgress:
    return UnitProgress(0, "t", partition, 0, 3, 0)


def _wait(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every connection a sender opens to a listener."""
    made: list[tuple[str, int]] = []
    real = socket.create_connection

    def counted(address: tuple[str, int], *args: object, **kw: object) -> socket.socket:
        made.append(address)
        return real(address, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(progress.socket, "create_connection", counted)
    progress.LINKS.clear()  # a connection another test left idle is not counted
    yield made
    progress.LINKS.clear()


def _run_units(address: str | None, partitions: range) -> None:
    for p in partitions:
        sender = ProgressSender(address, _unit(p))
        sender.update(offset=1, force=True)
        sender.finish(offset=3, records=3)


def test_units_one_after_another_share_one_connection(connects: list[tuple[str, int]]) -> None:
    done: list[UnitProgress] = []
    with listening("127.0.0.1", lambda u: done.append(u) if u.done else None) as address:
        _run_units(address, range(50))
        _wait(lambda: len(done) == 50)
    assert sorted(u.partition for u in done) == list(range(50))
    assert len(connects) == 1  # was one per unit: 50 connections (and 50 driver threads)


def test_threads_have_a_connection_each_at_most(connects: list[tuple[str, int]]) -> None:
    done: list[UnitProgress] = []
    with listening("127.0.0.1", lambda u: done.append(u) if u.done else None) as address:
        threads = [
            threading.Thread(target=_run_units, args=(address, range(i * 40, i * 40 + 40)))
            for i in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        _wait(lambda: len(done) == 160)
    assert sorted(u.partition for u in done) == list(range(160))
    assert len(connects) <= 4


def test_a_stopped_listeners_connection_is_not_reused(connects: list[tuple[str, int]]) -> None:
    """A follow session's next batch has a new listener: a unit connects to it, and what it
    sends reaches it, never the old one's handler."""
    first: list[UnitProgress] = []
    with listening("127.0.0.1", first.append) as address:
        _run_units(address, range(3))
        _wait(lambda: sum(u.done for u in first) == 3)
    second: list[UnitProgress] = []
    with listening("127.0.0.1", second.append) as address:
        _run_units(address, range(3, 6))
        _wait(lambda: sum(u.done for u in second) == 3)
    assert {u.partition for u in second} == {3, 4, 5}
    assert {u.partition for u in first} == {0, 1, 2}
    assert len(connects) == 2


def test_a_listener_gone_mid_run_costs_nothing_but_progress(
    connects: list[tuple[str, int]],
) -> None:
    with listening("127.0.0.1", lambda u: None) as address:
        _run_units(address, range(2))
    _run_units(address, range(2, 5))  # the listener is gone: units go on, no error
    _run_units(None, range(5, 7))  # no listener at all

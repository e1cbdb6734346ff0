"""Objects of one process kept from one use to the next, by key (Kafka consumers, S3 stores).

A :class:`Pool` hands out an idle object made from the same spec (config, settings) or a new
one, and takes it back once its user is done: reset for the next user, or closed when it
cannot be reused. It keeps at most ``max_idle`` idle objects (the oldest is closed first)
and, with ``max_idle_seconds``, closes one idle that long (a thread that runs while objects
are idle, so an object nobody takes again does not stay open for the life of the process).

Objects are made lazily in the process that uses them. A forked child forgets its parent's
idle objects (``os.register_at_fork``): their threads (librdkafka's) and connections
(boto3's) belong to the parent. At interpreter exit idle objects are closed.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

S = TypeVar("S")  # what an object is made from: a config, settings
T = TypeVar("T")  # the pooled object

log = logging.getLogger(__name__)


def _nothing(item: object) -> None:
    return None


class Pool(Generic[S, T]):
    """Idle objects of this process by key; an object serves one user at a time.

    ``make(spec)`` makes a new object, ``key(spec)`` says which specs may share one.
    ``reset(item)`` prepares an object given back for its next user and says whether it can
    be kept (an exception counts as no). ``reuse(item)`` runs when an idle object is handed
    out again. ``close(item)`` ends an object that is not kept; its exceptions are logged
    (debug) and dropped: closing what nobody uses any more must not fail a user.
    """

    def __init__(
        self,
        make: Callable[[S], T],
        key: Callable[[S], Hashable],
        *,
        reset: Callable[[T], bool],
        close: Callable[[T], None] = _nothing,
        reuse: Callable[[T], None] = _nothing,
        max_idle: int = 16,
        max_idle_seconds: float | None = None,
    ) -> None:
        self._make = make
        self._key = key
        self._reset = reset
        self._close = close
        self._reuse = reuse
        self.max_idle = max_idle
        self.max_idle_seconds = max_idle_seconds
        self._fresh()
        _POOLS.add(self)

    def _fresh(self) -> None:
        self._lock = threading.Lock()
        # (key, when given back, object), oldest first.
        self._idle: list[tuple[Hashable, float, T]] = []
        self._reaper: threading.Thread | None = None

    def take(self, spec: S) -> T:
        """An idle object of ``spec``'s key (the last given back), else a new one."""
        key = self._key(spec)
        found: list[T] = []
        with self._lock:
            expired = self._expired(time.monotonic())
            for i in range(len(self._idle) - 1, -1, -1):
                if self._idle[i][0] == key:
                    found.append(self._idle.pop(i)[2])
                    break
        self._close_all(expired)
        if found:
            item = found[0]
            try:
                self._reuse(item)
                return item
            except Exception as exc:  # not reusable after all: a new one
                log.debug("reusing an idle %s: %s", type(item).__name__, exc)
                self._close_quietly(item)
        return self._make(spec)

    def give(self, spec: S, item: T) -> None:
        """Keep ``item`` for the next user of ``spec``'s key, reset; closed when it cannot be."""
        try:
            kept = self._reset(item)
        except Exception as exc:  # an object in doubt is closed, not reused
            log.debug("resetting a %s: %s", type(item).__name__, exc)
            kept = False
        if not kept:
            self._close_quietly(item)
            return
        key = self._key(spec)
        with self._lock:
            self._idle.append((key, time.monotonic(), item))
            evicted = [entry[2] for entry in self._idle[: -self.max_idle or None]]
            del self._idle[: len(evicted)]
            if self.max_idle_seconds is not None and self._reaper is None and self._idle:
                self._reaper = threading.Thread(target=self._reap, name="pool-reaper", daemon=True)
                self._reaper.start()
        self._close_all(evicted)

    def clear(self) -> None:
        """Close every idle object."""
        with self._lock:
            idle, self._idle = self._idle, []
        self._close_all([entry[2] for entry in idle])

    def __len__(self) -> int:
        return len(self._idle)

    def _expired(self, now: float) -> list[T]:
        """Removes and returns the idle objects past ``max_idle_seconds`` (lock held)."""
        limit = self.max_idle_seconds
        if limit is None:
            return []
        expired = [entry[2] for entry in self._idle if now - entry[1] >= limit]
        if expired:
            self._idle = [entry for entry in self._idle if now - entry[1] < limit]
        return expired

    def _reap(self) -> None:
        """Close idle objects as they reach ``max_idle_seconds``; ends when none is idle."""
        limit = self.max_idle_seconds
        assert limit is not None
        while True:
            with self._lock:
                expired = self._expired(time.monotonic())
                if not self._idle:
                    self._reaper = None
                    wait = None
                else:
                    wait = self._idle[0][1] + limit - time.monotonic()
            self._close_all(expired)
            if wait is None:
                return
            time.sleep(max(wait, 0.01))

    def _close_all(self, items: list[T]) -> None:
        for item in items:
            self._close_quietly(item)

    def _close_quietly(self, item: T) -> None:
        try:
            self._close(item)
        except Exception as exc:  # closing what nobody uses any more
            log.debug("closing an idle %s: %s", type(item).__name__, exc)


# Every pool of this process, for the fork and exit hooks.
_POOLS: weakref.WeakSet[Pool[Any, Any]] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A fresh lock, no idle objects and no reaper: a parent's thread may have held the lock
    # at the fork, and the parent's objects' threads and connections are not the child's.
    for pool in list(_POOLS):
        pool._fresh()


def _close_at_exit() -> None:
    for pool in list(_POOLS):
        pool.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_at_exit)

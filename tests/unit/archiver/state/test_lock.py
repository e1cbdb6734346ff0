"""JobLock's lapse count: what a follow session's cached partition states rely on."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from kafka_archive.archiver.core.errors import FencedError, FormatVersionError
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.store.s3 import Document, PreconditionFailed
from kafka_archive.kcql.plan import Target


class OneObjectStore:
    """The lock object in memory, written conditionally as S3 does (ETag per write)."""

    def __init__(self) -> None:
        self.doc: Document | None = None
        self._etags = (f"etag-{n}" for n in itertools.count())

    def get_document(self, bucket: str, key: str) -> Document | None:
        return self.doc

    def put_document(
        self, bucket: str, key: str, body: dict[str, Any], *, if_match: str | None
    ) -> str:
        current = self.doc.etag if self.doc is not None else None
        if current != if_match:
            raise PreconditionFailed(key)
        self.doc = Document(body, next(self._etags))
        return self.doc.etag


def _lock(store: OneObjectStore) -> JobLock:
    target = Target(bucket="bkt", prefix="arch")
    return JobLock(store, target, "job", "run-a", ttl_seconds=600)  # type: ignore[arg-type]


def test_a_renewal_after_the_safety_margin_counts_as_a_lapse() -> None:
    store = OneObjectStore()
    lock = _lock(store)
    lock.acquire()
    try:
        lock.check()
        assert lock.lapses == 0, "a lease proved in time is no lapse"
        lock._valid_until = 0.0  # as after a SIGSTOP longer than the lease
        lock.check()  # renewed: nobody took the lock over meanwhile
        assert lock.lapses == 1 and not lock.lost
        lock.check()
        assert lock.lapses == 1
    finally:
        lock.release()


def test_a_lease_taken_over_while_frozen_is_lost_not_renewed() -> None:
    store = OneObjectStore()
    lock = _lock(store)
    lock.acquire()
    try:
        assert store.doc is not None
        store.doc = Document({**store.doc.body, "run_id": "run-b"}, "etag-b")
        lock._valid_until = 0.0
        with pytest.raises(FencedError):
            lock.check()
        assert lock.lost and lock.lapses == 0
    finally:
        lock.release()


def test_the_lock_names_its_format_and_a_newer_one_is_refused_not_taken_over() -> None:
    store = OneObjectStore()
    lock = _lock(store)
    lock.acquire()
    lock.release()
    assert store.doc is not None and store.doc.body["version"] == 1
    # Released, so an older lock would be taken over; a newer version's is not judged.
    newer = {**store.doc.body, "version": 2}
    store.doc = Document(newer, "etag-newer")
    with pytest.raises(FormatVersionError) as caught:
        _lock(store).acquire()
    assert caught.value.exit_code == 24
    assert "the lock s3://bkt/arch/.kafka-archive/lock.json is in format version 2" in str(
        caught.value
    )
    assert store.doc.body == newer, "left as it was"
    # Without a version field (versions before it wrote none): read as version 1.
    store.doc = Document({k: v for k, v in newer.items() if k != "version"}, "etag-old")
    taken = _lock(store)
    taken.acquire()
    taken.release()

"""MemoryUpload: an object written into memory is uploaded whole, from bounded buffers."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive.archiver.core.errors import UploadError
from kafka_archive.archiver.store.s3 import PreconditionFailed
from kafka_archive.archiver.store.streaming import MemoryUpload, PartBuffers


class PartStore:
    """The S3Store calls of an upload, kept in memory; parts may be held or refused."""

    def __init__(self, fail_part: int | None = None) -> None:
        self.put: dict[str, bytes] = {}
        self.parts: dict[int, bytes] = {}
        self.completed: dict[str, bytes] = {}
        self.aborted: list[str] = []
        self.buffers: set[int] = set()  # ids of the part bodies sent
        self.fail_part = fail_part
        self.release = threading.Event()
        self.release.set()
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()

    def upload_bytes(self, bucket: str, key: str, body: bytes | bytearray) -> None:
        self.put[key] = bytes(body)

    def start_multipart(self, bucket: str, key: str) -> str:
        return "upload-1"

    def upload_part(
        self, bucket: str, key: str, upload_id: str, number: int, body: bytes | bytearray
    ) -> str:
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            self.release.wait(10)
            if number == self.fail_part:
                raise UploadError(f"S3 refused to upload part {number} of s3://b/{key}: 500")
            self.buffers.add(id(body))
            self.parts[number] = bytes(body)
            return f"etag-{number}"
        finally:
            with self._lock:
                self.in_flight -= 1

    def complete_multipart(self, bucket: str, key: str, upload_id: str, etags: list[str]) -> None:
        assert etags == [f"etag-{n}" for n in range(1, len(etags) + 1)]
        self.completed[key] = b"".join(self.parts[n] for n in range(1, len(etags) + 1))

    def abort_upload(self, bucket: str, key: str, upload_id: str) -> None:
        self.aborted.append(key)


def upload(store: PartStore, part_size: int, **kwargs: Any) -> MemoryUpload:
    kwargs.setdefault("buffers", PartBuffers())
    return MemoryUpload(store, "b", "k", part_size=part_size, **kwargs)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    writes=st.lists(st.binary(min_size=0, max_size=40), max_size=30),
    part_size=st.integers(1, 32),
    views=st.booleans(),
)
def test_the_object_is_the_bytes_written_in_parts_of_part_size(
    writes: list[bytes], part_size: int, views: bool
) -> None:
    store = PartStore()
    sink = upload(store, part_size)
    for data in writes:
        assert sink.write(memoryview(data) if views else data) == len(data)
    expected = b"".join(writes)
    assert sink.tell() == sink.size == len(expected)
    sink.complete(len(expected))
    if len(expected) <= part_size:
        assert store.put == {"k": expected} and not store.parts, "one PUT, no multipart"
    else:
        assert store.completed == {"k": expected} and not store.put
        sizes = [len(store.parts[n]) for n in sorted(store.parts)]
        assert all(size == part_size for size in sizes[:-1]) and 0 < sizes[-1] <= part_size


def test_parts_are_sent_while_writing_from_at_most_max_buffers() -> None:
    """A writer that fills a buffer while the others are all in flight waits for one; the
    process's next object reuses the buffers of the one before (``buffers``, bounded)."""
    store = PartStore()
    idle = PartBuffers(max_idle=2)
    first = upload(store, 10, max_buffers=3, buffers=idle)
    first.write(b"a" * 35)  # three full parts sent, the fourth being filled
    assert first.started
    first.complete()
    assert store.completed["k"] == b"a" * 35
    assert store.most_in_flight <= 2
    assert len(store.buffers) <= 3, "full part buffers reused from part to part"
    assert 1 <= len(idle) <= 2, "sent full buffers kept, at most max_idle (the last part's not)"
    kept = [idle.take(10) for _ in range(len(idle))]
    assert {id(b) for b in kept} <= store.buffers and idle.take(10) is None
    for buffer in kept:  # given back
        idle.give(cast(bytearray, buffer))
    second = MemoryUpload(store, "b", "k2", part_size=10, max_buffers=3, buffers=idle)  # type: ignore[arg-type]
    second.write(b"b" * 25)
    second.abort()  # the buffer being filled goes back, the one in flight when it is sent
    assert "k2" not in store.completed and store.aborted == ["k2"]
    assert 1 <= len(idle) <= 2


def test_a_writer_waits_while_every_buffer_is_in_flight() -> None:
    store = PartStore()
    store.release.clear()  # parts hang until released
    sink = upload(store, 4, max_buffers=2)
    sink.write(b"x" * 8)  # part 1 in flight, the second buffer full
    writer = threading.Thread(target=sink.write, args=(b"y",))
    writer.start()
    writer.join(0.3)
    assert writer.is_alive(), "a third buffer would exceed max_buffers: the write waits"
    store.release.set()
    writer.join(10)
    assert not writer.is_alive()
    sink.complete()
    assert store.completed["k"] == b"x" * 8 + b"y"
    assert store.most_in_flight == 1


def test_a_failed_part_fails_the_object_and_abort_leaves_no_upload() -> None:
    store = PartStore(fail_part=1)
    sink = upload(store, 4, max_buffers=2)
    with pytest.raises(UploadError, match="part 1"):
        for _ in range(10):
            sink.write(b"z" * 4)
    sink.abort()
    sink.abort()  # twice is fine
    assert store.aborted == ["k"] and not store.completed and not store.put


def test_a_held_back_object_is_aborted_without_appearing() -> None:
    store = PartStore()
    sink = upload(store, 4)
    sink.write(b"q" * 9)
    sink.close()
    sink.abort()
    assert store.aborted == ["k"] and not store.completed and not store.put


class RefusingStore(PartStore):
    """Refuses the first PUT or completion (If-None-Match: the key exists), then applies."""

    def __init__(self) -> None:
        super().__init__()
        self.refused = 0

    def _refuse_once(self) -> None:
        if not self.refused:
            self.refused += 1
            raise PreconditionFailed("k")

    def upload_bytes(self, bucket: str, key: str, body: bytes | bytearray) -> None:
        self._refuse_once()
        super().upload_bytes(bucket, key, body)

    def complete_multipart(self, bucket: str, key: str, upload_id: str, etags: list[str]) -> None:
        self._refuse_once()
        super().complete_multipart(bucket, key, upload_id, etags)


@settings(max_examples=100, deadline=None)
@given(writes=st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=20))
def test_a_refused_completion_sent_again_sends_the_same_object(writes: list[bytes]) -> None:
    """A create refused because the key exists is sent again once the existing object was
    replaced (``fencing.UnitFencing.create``): the object must be the bytes written, not
    an empty one."""
    store = RefusingStore()
    sink = upload(store, 16)
    for data in writes:
        sink.write(data)
    with pytest.raises(PreconditionFailed):
        sink.complete()
    sink.complete()
    expected = b"".join(writes)
    assert (store.completed if len(expected) > 16 else store.put) == {"k": expected}


@pytest.mark.parametrize("part_size", [16, 4], ids=["one-put", "multipart"])
def test_a_completed_object_is_never_sent_again_empty(part_size: int) -> None:
    """Its bytes are given back once it is visible: a second complete() fails the object
    instead of sending it with nothing in it."""
    store = PartStore()
    sink = upload(store, part_size)
    sink.write(b"0123456789")
    sink.complete(10)
    store.put.clear()
    store.completed.clear()
    with pytest.raises(UploadError, match="cannot be sent again"):
        sink.complete(10)
    assert not store.completed and not store.put

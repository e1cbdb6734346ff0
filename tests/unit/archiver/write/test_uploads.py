"""Closed objects on their way to S3 (write/uploads.py): when they are sent, that one marker
names them all before any is created, and that what is not sent lets its bytes go."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import ObjectWritten
from kafka_archive.archiver.write.lifecycle import Stage
from kafka_archive.archiver.write.objects import Closed
from kafka_archive.archiver.write.uploads import MARK_BYTES, MARK_OBJECTS, Uploads, due


@given(
    waiting=st.integers(0, 2 * MARK_OBJECTS),
    size=st.integers(0, 2 * MARK_BYTES),
    streaming=st.booleans(),
)
def test_due_when_streaming_or_a_bound_is_reached(waiting: int, size: int, streaming: bool) -> None:
    assert due(waiting, size, streaming) == (
        streaming or waiting >= MARK_OBJECTS or size >= MARK_BYTES
    )


class FakeLifecycle:
    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[str] = []
        self.stages: dict[str, Stage] = {}
        self.fail_on = fail_on

    def stage(self, key: str) -> Stage | None:
        return self.stages.get(key, Stage.WRITING)

    def discard(self, key: str) -> None:
        self.calls.append(f"discard {key}")

    def mark_all(self, objects: Sequence[tuple[str, int]]) -> None:
        self.calls.append("mark " + ",".join(f"{k}@{o}" for k, o in objects))
        for key, _ in objects:
            self.stages[key] = Stage.MARKED

    def create(
        self,
        key: str,
        send: Callable[[], None],
        written: ObjectWritten | None = None,
        of: ObjectWritten | None = None,
    ) -> None:
        if key == self.fail_on:
            raise OSError("S3 refused")
        send()
        self.calls.append(f"create {key}")
        self.stages[key] = Stage.UPLOADED


class FakeStore:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def upload_file(self, bucket: str, key: str, path: Path) -> None:
        self.objects[key] = path.read_bytes()

    def put_bytes(self, bucket: str, key: str, body: bytes) -> None:
        self.objects[key] = body


def closed(tmp_path: Path, n: int, index: bool = False) -> Closed:
    path = tmp_path / f"{n}.spool"
    path.write_bytes(b"x" * n)
    keys = (f"o{n}", f"o{n}.index") if index else (f"o{n}",)
    return Closed(
        f"o{n}", path, None, keys, ObjectWritten(f"o{n}", n, n, 1, n), b"i" if index else None
    )


def test_one_marker_names_every_object_before_any_is_created(tmp_path: Path) -> None:
    lifecycle, store = FakeLifecycle(), FakeStore()
    uploads = Uploads("bkt", store, lifecycle)  # type: ignore[arg-type]
    for n in (1, 2):
        uploads.add(closed(tmp_path, n, index=n == 2))
    assert lifecycle.calls == [] and uploads.bytes == 3
    assert list(uploads.last_offsets()) == [1, 2]
    uploads.send()
    assert lifecycle.calls == [
        "mark o1@1,o2@2,o2.index@2",
        "create o1",
        "create o2",
        "create o2.index",
    ]
    assert store.objects == {"o1": b"x", "o2": b"xx", "o2.index": b"i"}
    assert uploads.bytes == 0 and list(uploads.last_offsets()) == []
    assert list(tmp_path.iterdir()) == []  # spool files removed once uploaded


def test_a_failed_upload_lets_every_waiting_object_go(tmp_path: Path) -> None:
    lifecycle, store = FakeLifecycle(fail_on="o2"), FakeStore()
    uploads = Uploads("bkt", store, lifecycle)  # type: ignore[arg-type]
    for n in (1, 2, 3):
        uploads.add(closed(tmp_path, n))
    with pytest.raises(OSError, match="S3 refused"):
        uploads.send()
    assert store.objects == {"o1": b"x"}
    # Marked ones stay marked (recovery's): nothing is discarded, every spool file goes.
    assert not [c for c in lifecycle.calls if c.startswith("discard")]
    assert list(tmp_path.iterdir()) == []


def test_discard_drops_what_waits_without_a_request(tmp_path: Path) -> None:
    lifecycle, store = FakeLifecycle(), FakeStore()
    uploads = Uploads("bkt", store, lifecycle)  # type: ignore[arg-type]
    uploads.add(closed(tmp_path, 1))
    uploads.discard()
    assert lifecycle.calls == ["discard o1"]
    assert store.objects == {} and uploads.bytes == 0
    assert list(tmp_path.iterdir()) == []

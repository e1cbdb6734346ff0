"""Recovery's watches: the keys of a fenced run's uncommitted objects stay watched after its
markers go, so that a create of that run landing late is removed by a later recovery."""

from __future__ import annotations

import itertools
import json
from typing import Any

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.state import pending
from kafka_archive.archiver.state.checkpoint import PartitionState
from kafka_archive.archiver.store.s3 import ObjectHead
from kafka_archive.kcql.plan import Target

TARGET = Target(bucket="bkt", prefix="arch")
TP = TopicPartition("orders", 0)
HOUR_MS = pending.WATCH_SECONDS * 1000


class Bucket:
    """Objects in memory with their metadata and ETags."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, dict[str, str], str]] = {}
        self._etags = (f'"e{n}"' for n in itertools.count())

    def put(self, key: str, body: bytes, metadata: dict[str, str] | None = None) -> None:
        self.objects[key] = (body, metadata or {}, next(self._etags))

    def put_bytes(self, bucket: str, key: str, body: bytes) -> None:
        self.put(key, body)

    def get_bytes(self, bucket: str, key: str) -> bytes | None:
        found = self.objects.get(key)
        return found[0] if found is not None else None

    def head(self, bucket: str, key: str) -> ObjectHead | None:
        found = self.objects.get(key)
        return ObjectHead(found[2], found[1]) if found is not None else None

    def delete(self, bucket: str, keys: list[str]) -> None:
        for key in keys:
            self.objects.pop(key, None)

    def delete_if_match(self, bucket: str, key: str, etag: str) -> bool:
        found = self.objects.get(key)
        if found is None or found[2] != etag:
            return False
        del self.objects[key]
        return True

    def list_keys(self, bucket: str, prefix: str, start_after: str = "") -> Any:
        return iter(sorted(k for k in self.objects if k.startswith(prefix)))


def _data(n: int) -> str:
    return f"arch/orders/0/{n:012d}.json"


def _recover(store: Bucket, state: PartitionState | None, now_ms: int) -> pending.Recovery:
    return pending.recover(store, TARGET, "job", TP, state, now_ms=now_ms)  # type: ignore[arg-type]


def test_a_late_create_of_a_recovered_marker_is_removed_by_a_later_recovery() -> None:
    store = Bucket()
    a = pending.writer_metadata("run-a", 5, "0-2000-None")
    b = pending.writer_metadata("run-b", 7, "0-2000-None")
    objects = [(_data(0), 0), (_data(1000), 1000)]
    pending.mark_all(store, TARGET, "job", TP, objects, "run-a", 5)  # type: ignore[arg-type]
    store.put(_data(0), b"a0", a)  # A uploaded its first object; its second is held
    fenced = PartitionState(0, "", "t", epoch=5)
    first = _recover(store, fenced, now_ms=0)
    assert first.deleted_objects == (_data(0), _data(1000))
    assert not [k for k in store.objects if "/pending/" in k], "the marker goes"
    (watch,) = [k for k in store.objects if "/.kafka-archive/watch/" in k]
    # B commits with other boundaries: its objects at 0 and 700; then A's held PUT lands.
    store.put(_data(0), b"b0", b)
    store.put(_data(700), b"b700", b)
    store.put(_data(1000), b"a1000", a)
    committed = PartitionState(1400, "run-b", "t", epoch=7, commits=((0, 7),))
    second = _recover(store, committed, now_ms=1000)
    assert second.deleted_objects == (_data(1000),)
    assert sorted(k for k in store.objects if "/.kafka-archive/" not in k) == [
        _data(0),
        _data(700),
    ]
    assert store.get_bytes("bkt", _data(0)) == b"b0", "B's object at a watched key stays"
    assert watch in store.objects, "watched until the window ends"
    # After the window, one more look, then the watch goes.
    store.put(_data(1000), b"a1000 again", a)
    last = _recover(store, committed, now_ms=HOUR_MS + 1)
    assert last.deleted_objects == (_data(1000),)
    assert not [k for k in store.objects if "/.kafka-archive/" in k]


def test_a_watch_with_nothing_late_writes_nothing() -> None:
    store = Bucket()
    pending.mark_all(store, TARGET, "job", TP, [(_data(0), 0)], "run-a", 5)  # type: ignore[arg-type]
    _recover(store, PartitionState(0, "", "t", epoch=5), now_ms=0)
    calls: list[str] = []
    state = PartitionState(1000, "run-b", "t", epoch=7, commits=((0, 7),))
    recovery = pending.recover(
        store,  # type: ignore[arg-type]
        TARGET,
        "job",
        TP,
        state,
        before_delete=lambda: calls.append("fence"),
        now_ms=10,
    )
    assert recovery == pending.Recovery((), 0) and calls == []


def test_the_committing_runs_markers_and_unfenced_runs_leave_no_watch() -> None:
    store = Bucket()
    pending.mark_all(store, TARGET, "job", TP, [(_data(0), 0)], "run-b", 7)  # type: ignore[arg-type]
    pending.mark_all(store, TARGET, "job", TP, [(_data(1000), 1000)], "unsafe", 0)  # type: ignore[arg-type]
    state = PartitionState(1000, "run-b", "t", epoch=7, commits=((0, 7),))
    _recover(store, state, now_ms=0)
    assert not [k for k in store.objects if "/.kafka-archive/" in k]


def test_a_watch_names_its_writer_and_keys() -> None:
    marker = pending.Marker("arch/.kafka-archive/pending/orders/0/" + "0" * 20 + "-ab.json", 0)
    key = pending.watch_key(marker, TARGET, TP)
    assert key.startswith("arch/.kafka-archive/watch/orders/0/" + "0" * 20 + "-")
    found = pending.markers_of_job(_one(key), TARGET, "job")
    assert found == {TP: [pending.Marker(key, 0, watch=True)]}
    body = json.loads(pending.watch_body([(_data(0), 0)], "run-a", 5, "job", 99))
    assert (body["run"], body["epoch"], body["until_ms"]) == ("run-a", 5, 99)
    assert pending.marked_objects(body) == [(_data(0), 0)]


def _one(key: str) -> Bucket:
    store = Bucket()
    store.put(key, b"{}")
    return store


def test_the_recovering_runs_own_markers_leave_no_watch() -> None:
    """A follow session recovering its own failed batch writes the same keys again as the
    same writer (run and epoch): a watch would delete what it commits next."""
    store = Bucket()
    mine = pending.writer_metadata("session", 7, "0-1000-None")
    pending.mark_all(store, TARGET, "job", TP, [(_data(0), 0)], "session", 7)  # type: ignore[arg-type]
    store.put(_data(0), b"failed batch", mine)
    state = PartitionState(0, "session", "t", epoch=7)
    recovery = pending.recover(store, TARGET, "job", TP, state, now_ms=0, own_run="session")  # type: ignore[arg-type]
    assert recovery.deleted_objects == (_data(0),)
    assert not [k for k in store.objects if "/.kafka-archive/" in k]
    store.put(_data(0), b"next batch, committed", mine)
    pending.recover(store, TARGET, "job", TP, state, now_ms=1, own_run="session")  # type: ignore[arg-type]
    assert store.get_bytes("bkt", _data(0)) == b"next batch, committed"

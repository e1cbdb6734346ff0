"""The object lifecycle of the write path: each move, the moves it refuses, and the invariant
every sequence of legal moves keeps (an object marked or uploaded and not committed has its
marker in S3; only uploaded objects are in S3; the state moves once, over them)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.errors import TopicRecreatedError
from kafka_archive.archiver.core.model import ObjectWritten, TopicPartition, WorkUnit
from kafka_archive.archiver.write.lifecycle import MOVES, IllegalMove, Lifecycle, Stage

MARKERS = "/.kafka-archive/pending/"


class FakeStore:
    """The S3 calls of the lifecycle (markers, state, clearing), kept in memory in order."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.calls: list[str] = []

    def put_bytes(self, bucket: str, key: str, body: bytes) -> None:
        self.calls.append(f"put {key}")
        self.objects[key] = body

    def put_document(
        self, bucket: str, key: str, body: dict[str, Any], *, if_match: str | None
    ) -> str:
        self.calls.append(f"state {body['next_offset']}")
        self.objects[key] = json.dumps(body).encode()
        return "etag"

    def delete(self, bucket: str, keys: list[str]) -> None:
        self.calls.append(f"delete {len(keys)}")
        for key in keys:
            self.objects.pop(key, None)

    def marked(self) -> dict[str, str]:
        """Object key -> its marker's key, for the markers in S3 (one names one object, or
        several under ``objects``)."""
        found: dict[str, str] = {}
        for key, body in self.objects.items():
            if MARKERS in key:
                doc = json.loads(body)
                for name, _ in doc.get("objects", [[doc["key"], doc["start"]]]):
                    found[name] = key
        return found


class FakeFencing:
    """Lease proofs and create-only uploads, logged into the store's calls."""

    def __init__(self, store: FakeStore) -> None:
        self.store = store

    def check(self) -> None:
        self.store.calls.append("lease")

    def create(self, key: str, send: Callable[[], None], content: str | None = None) -> None:
        self.check()
        send()


def _unit(*, iceberg: bool = False, deferred: bool = False) -> WorkUnit:
    table = "PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.t')"
    fmt = f"PARQUET {table}" if iceberg else "JSON"
    route = kcql.parse(f"INSERT INTO bkt:arch SELECT * FROM t STOREAS {fmt}").routes[0]
    unit = WorkUnit(0, route, TopicPartition("t", 0), 0, 1000, "run", "job", "g", epoch=3)
    return dataclasses.replace(unit, part_start=0, part_stop=2000) if deferred else unit


def _lifecycle(unit: WorkUnit | None = None) -> tuple[Lifecycle, FakeStore]:
    store = FakeStore()
    fencing = FakeFencing(store)
    return Lifecycle(unit or _unit(), store, fencing), store  # type: ignore[arg-type]


def _written(key: str, first: int, last: int) -> ObjectWritten:
    return ObjectWritten(key, first, last, records=last - first + 1, size=10)


def _upload(life: Lifecycle, store: FakeStore, key: str, written: ObjectWritten | None) -> None:
    life.create(key, lambda: store.put_bytes("bkt", key, b"data"), written)


def test_an_object_moves_from_its_spool_file_to_the_commit() -> None:
    life, store = _lifecycle()
    life.open("arch/t/0/0.json")
    assert life.stage("arch/t/0/0.json") is Stage.WRITING
    life.mark(["arch/t/0/0.json", "arch/t/0/0.json.index"], 0)
    assert set(store.marked()) == {"arch/t/0/0.json", "arch/t/0/0.json.index"}
    _upload(life, store, "arch/t/0/0.json", _written("arch/t/0/0.json", 0, 9))
    _upload(life, store, "arch/t/0/0.json.index", None)
    assert life.uploaded() == (_written("arch/t/0/0.json", 0, 9),)  # data objects only
    (marker,) = life.markers()  # one marker names both
    written = life.commit(10)
    assert written is not None and written.etag == "etag" and written.state is not None
    assert written.state.next_offset == 10
    assert life.stage("arch/t/0/0.json") is Stage.COMMITTED
    # The commit leaves the stale marker to its caller (the driver clears a batch's at once).
    assert life.markers() == () and life.committed_markers == (marker,)
    # A lease proof before the marker, before each upload and before the commit; the
    # marker before the uploads.
    assert store.calls == [
        "lease",
        f"put {marker}",
        "lease",
        "put arch/t/0/0.json",
        "lease",
        "put arch/t/0/0.json.index",
        "lease",
        "state 10",
    ]


def test_objects_marked_together_share_one_marker_naming_each_with_its_offset() -> None:
    life, store = _lifecycle()
    for key in ("a", "b", "c"):
        life.open(key)
    life.mark_all([("a", 0), ("b", 10), ("c", 20)])
    (marker,) = life.markers()
    assert store.marked() == {"a": marker, "b": marker, "c": marker}
    assert json.loads(store.objects[marker])["objects"] == [["a", 0], ["b", 10], ["c", 20]]
    assert [c for c in store.calls if c.startswith("put")] == [f"put {marker}"]


def test_an_iceberg_route_keeps_no_markers_and_leaves_the_commit_to_the_driver() -> None:
    life, store = _lifecycle(_unit(iceberg=True))
    life.open("arch/data/a.parquet")
    life.mark(["arch/data/a.parquet"], 0)
    _upload(life, store, "arch/data/a.parquet", _written("arch/data/a.parquet", 0, 4))
    assert life.markers() == () and store.marked() == {}
    assert not life.commits_here
    with pytest.raises(IllegalMove, match="the driver's"):
        life.commit(5)


def test_a_piece_hands_its_markers_to_the_driver() -> None:
    life, store = _lifecycle(_unit(deferred=True))
    life.mark(["arch/t/0/0.json"], 0)
    _upload(life, store, "arch/t/0/0.json", _written("arch/t/0/0.json", 0, 9))
    assert life.markers() == (store.marked()["arch/t/0/0.json"],)
    assert not life.commits_here
    with pytest.raises(IllegalMove):
        life.commit(10)


def _apply(life: Lifecycle, store: FakeStore, op: str, key: str) -> None:
    """One move of ``key`` (a data object whose records start at 10 x its place in KEYS)."""
    first = KEYS.index(key) * 10
    if op == "open":
        life.open(key)
    elif op == "discard":
        life.discard(key)
    elif op == "mark":
        life.mark([key], first)
    elif op == "create":
        _upload(life, store, key, _written(key, first, first + 9))
    else:
        life.commit(COMMIT)
        store.delete("bkt", list(life.committed_markers))  # the driver's bulk clear


KEYS = ("a", "b", "c")
COMMIT = 100
TO = {"open": Stage.WRITING, "discard": Stage.DISCARDED, "mark": Stage.MARKED}
TO["create"] = Stage.UPLOADED


@pytest.mark.parametrize(
    ("before", "refused", "message"),
    [
        ([], ("create", "a"), "new -> uploaded"),
        ([], ("discard", "a"), "new -> discarded"),
        ([("open", "a")], ("open", "a"), "writing -> writing"),
        ([("mark", "a")], ("mark", "a"), "marked -> marked"),
        ([("mark", "a")], ("discard", "a"), "marked -> discarded"),
        ([("open", "a"), ("discard", "a")], ("open", "a"), "discarded -> writing"),
        ([("mark", "a"), ("create", "a")], ("mark", "a"), "uploaded -> marked"),
        ([("open", "a")], ("commit", "a"), "a: it is writing"),
        ([("open", "b"), ("mark", "b")], ("commit", "a"), "b: it is marked"),
        ([("mark", "a"), ("create", "a")], ("open", "a"), "uploaded -> writing"),
        ([("commit", "a")], ("commit", "a"), "committed already"),
        ([("mark", "a"), ("create", "a"), ("commit", "a")], ("open", "b"), "committed already"),
    ],
)
def test_an_illegal_move_is_refused_and_writes_nothing(
    before: list[tuple[str, str]], refused: tuple[str, str], message: str
) -> None:
    life, store = _lifecycle()
    for op, key in before:
        _apply(life, store, op, key)
    calls = list(store.calls)
    with pytest.raises(IllegalMove, match=message):
        _apply(life, store, *refused)
    assert store.calls == calls


def test_no_commit_below_an_uploaded_object() -> None:
    life, store = _lifecycle()
    life.mark(["a"], 0)
    _upload(life, store, "a", _written("a", 0, 5))
    with pytest.raises(IllegalMove, match="ends at or after the commit offset 5"):
        life.commit(5)


@given(st.lists(st.tuples(st.sampled_from([*TO, "commit"]), st.sampled_from(KEYS)), max_size=30))
def test_every_sequence_of_moves_keeps_the_invariant(moves: list[tuple[str, str]]) -> None:
    life, store = _lifecycle()
    stages: dict[str, Stage] = {}  # the model
    order: list[str] = []  # data objects, in upload order
    committed = False
    for op, key in moves:
        if op == "commit":
            blocked = any(s in (Stage.WRITING, Stage.MARKED) for s in stages.values())
            legal = not committed and not blocked
        else:
            legal = not committed and TO[op] in MOVES[stages.get(key)]
        calls = list(store.calls)
        if not legal:
            with pytest.raises(IllegalMove):
                _apply(life, store, op, key)
            assert store.calls == calls, "a refused move writes nothing"
            continue
        _apply(life, store, op, key)
        if op == "commit":
            committed = True
            stages = {k: Stage.COMMITTED if s is Stage.UPLOADED else s for k, s in stages.items()}
        else:
            stages[key] = TO[op]
            order += [key] if op == "create" else []
        assert {k: life.stage(k) for k in stages} == stages
        # Every object marked or uploaded and not committed has its marker in S3, and the
        # markers handed on are exactly theirs.
        pending = {k for k, s in stages.items() if s in (Stage.MARKED, Stage.UPLOADED)}
        assert set(store.marked()) == pending
        assert sorted(life.markers()) == sorted(store.marked().values())
        # Only uploaded objects are in S3 (beside the markers and the state).
        data = {k for k in store.objects if not k.startswith("arch/")}
        assert data == {k for k, s in stages.items() if s in (Stage.UPLOADED, Stage.COMMITTED)}
        assert [o.key for o in life.uploaded()] == order
    states = [c for c in store.calls if c.startswith("state")]
    assert states == ([f"state {COMMIT}"] if committed else [])


def test_the_topic_is_confirmed_before_each_marker_and_the_commit() -> None:
    """What the unit read is the planned topic's (state.identity.TopicProof) before anything
    of it is marked or committed: a refusal there leaves nothing marked."""
    store = FakeStore()

    def confirm() -> None:
        store.calls.append("topic")

    life = Lifecycle(_unit(), store, FakeFencing(store), confirm_topic=confirm)  # type: ignore[arg-type]
    life.open("arch/t/0/0.json")
    life.mark(["arch/t/0/0.json"], 0)
    _upload(life, store, "arch/t/0/0.json", _written("arch/t/0/0.json", 0, 9))
    life.commit(10)
    topics = [i for i, call in enumerate(store.calls) if call == "topic"]
    assert len(topics) == 2 and store.calls[topics[0] + 1] == "lease"
    assert store.calls[topics[1] + 1] == "lease"

    def refuse() -> None:
        raise TopicRecreatedError("re-created")

    store = FakeStore()
    life = Lifecycle(_unit(), store, FakeFencing(store), confirm_topic=refuse)  # type: ignore[arg-type]
    life.open("arch/t/0/0.json")
    with pytest.raises(TopicRecreatedError):
        life.mark(["arch/t/0/0.json"], 0)
    assert store.marked() == {} and life.stage("arch/t/0/0.json") is Stage.WRITING

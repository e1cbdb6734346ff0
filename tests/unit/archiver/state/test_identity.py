"""The recorded topic id of a route: recorded once, compared by every command reading Kafka."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from kafka_archive import kcql
from kafka_archive.archiver.config.settings import KafkaSettings
from kafka_archive.archiver.core.errors import FormatVersionError, TopicRecreatedError
from kafka_archive.archiver.core.model import TopicPartition, WorkUnit
from kafka_archive.archiver.state import identity
from kafka_archive.archiver.store.s3 import Document, PreconditionFailed
from kafka_archive.kcql.plan import Target

from .test_lock import OneObjectStore


def _target() -> Target:
    return Target(bucket=f"b{uuid.uuid4().hex[:8]}", prefix="arch")  # a fresh cache entry


def test_the_first_run_records_the_id_and_later_ones_accept_it() -> None:
    store, target = OneObjectStore(), _target()
    identity.check(store, [(target, "t")], {"t": "id-1"}, record=True)  # type: ignore[arg-type]
    assert store.doc is not None
    assert store.doc.body["topic_id"] == "id-1" and store.doc.body["version"] == 1
    identity.check(store, [(target, "t")], {"t": "id-1"}, record=True)  # type: ignore[arg-type]


def test_another_id_is_refused_also_once_confirmed_in_this_process() -> None:
    """A follow session confirms the document once; the topic re-created between two of its
    batches is still caught (the id Kafka reports is compared every time)."""
    store, target = OneObjectStore(), _target()
    identity.check(store, [(target, "t")], {"t": "id-1"}, record=True)  # type: ignore[arg-type]
    with pytest.raises(TopicRecreatedError) as caught:
        identity.check(store, [(target, "t")], {"t": "id-2"}, record=True)  # type: ignore[arg-type]
    assert caught.value.exit_code == 17
    assert "re-created" in str(caught.value) and "new prefix" in str(caught.value)
    assert store.doc is not None and store.doc.body["topic_id"] == "id-1", "never rewritten"


def test_readers_record_nothing_and_topics_without_an_id_are_not_checked() -> None:
    store, target = OneObjectStore(), _target()
    identity.check(store, [(target, "t")], {"t": "id-1"}, record=False)  # type: ignore[arg-type]
    assert store.doc is None, "status and verify write nothing"
    identity.check(store, [(target, "t")], {}, record=True)  # type: ignore[arg-type]
    assert store.doc is None


def test_a_newer_format_is_refused() -> None:
    store, target = OneObjectStore(), _target()
    store.put_document("b", "k", {"version": 2, "topic_id": "id-1"}, if_match=None)
    with pytest.raises(FormatVersionError):
        identity.check(store, [(target, "t")], {"t": "id-1"}, record=True)  # type: ignore[arg-type]


class ManyObjectStore:
    """Documents by key, written create-only or If-Match as S3 does."""

    def __init__(self) -> None:
        self.docs: dict[str, Document] = {}

    def get_document(self, bucket: str, key: str) -> Document | None:
        return self.docs.get(f"{bucket}/{key}")

    def put_document(
        self, bucket: str, key: str, body: dict[str, Any], *, if_match: str | None
    ) -> str:
        current = self.docs.get(f"{bucket}/{key}")
        if (current.etag if current else None) != if_match:
            raise PreconditionFailed(key)
        self.docs[f"{bucket}/{key}"] = Document(body, f"etag-{len(self.docs)}")
        return f"etag-{len(self.docs)}"


def test_many_routes_are_recorded_and_checked_each_against_its_topic() -> None:
    store, target = ManyObjectStore(), _target()
    routes = [(target, f"t{i}") for i in range(25)]
    ids = {f"t{i}": f"id-{i}" for i in range(25)}
    identity.check(store, routes, ids, record=True)  # type: ignore[arg-type]
    assert {d.body["topic"]: d.body["topic_id"] for d in store.docs.values()} == ids
    with pytest.raises(TopicRecreatedError, match="'t7'"):
        identity.check(store, routes, {**ids, "t7": "id-new"}, record=True)  # type: ignore[arg-type]


def test_readers_get_every_re_created_route_with_its_error_and_record_nothing() -> None:
    """status and verify report every route, those of a re-created topic marked."""
    store, target = ManyObjectStore(), _target()
    routes = [(target, f"t{i}") for i in range(3)]
    identity.check(store, routes, {"t0": "a", "t1": "b", "t2": "c"}, record=True)  # type: ignore[arg-type]
    before = dict(store.docs)
    now = {"t0": "a", "t1": "B", "t2": "C", "t9": "x"}
    found = identity.compare(store, [*routes, (target, "t9")], now, record=False)  # type: ignore[arg-type]
    assert sorted(topic for _, topic in found) == ["t1", "t2"]
    assert all(e.exit_code == 17 and "re-created" in e.message for e in found.values())
    assert "'t2'" in found[(target, "t2")].message
    assert store.docs == before, "nothing recorded"


def _earlier_record(body: dict[str, Any]) -> tuple[ManyObjectStore, Target, str]:
    """A store holding ``body`` at the key earlier versions kept topic ``lock``'s record at
    (the key of the old layout's lock of a job ``topics``)."""
    store, target = ManyObjectStore(), _target()
    earlier = f"{target.bucket}/arch/.kafka-archive/topics/lock.json"
    store.docs[earlier] = Document(body, "etag-e")
    return store, target, earlier


def test_a_record_at_an_earlier_versions_key_is_read_and_a_run_copies_it() -> None:
    for record in (False, True):  # status and verify; a run
        store, target, earlier = _earlier_record({"topic": "lock", "topic_id": "id-1"})
        found = identity.compare(store, [(target, "lock")], {"lock": "id-2"}, record=record)  # type: ignore[arg-type]
        assert found[(target, "lock")].exit_code == 17
        if not record:
            assert list(store.docs) == [earlier], "status and verify write nothing"
    store, target, earlier = _earlier_record({"topic": "lock", "topic_id": "id-1"})
    identity.check(store, [(target, "lock")], {"lock": "id-1"}, record=True)  # type: ignore[arg-type]
    copied = store.docs[f"{target.bucket}/arch/.kafka-archive/topics/lock/topic.json"].body
    assert copied["topic_id"] == "id-1" and copied["copied_from"].endswith("topics/lock.json")
    assert store.docs[earlier].etag == "etag-e", "the earlier record is left as it was"


def test_a_lock_at_the_earlier_key_is_no_record() -> None:
    """A lock of the old layout's job ``topics`` (or one an earlier version wrote over topic
    ``lock``'s record when it retired it) names no topic: the run records the id anew."""
    lock = {"job": "topics", "retired": True, "epoch": 3, "run_id": "none: retired"}
    store, target, earlier = _earlier_record(lock)
    identity.check(store, [(target, "lock")], {"lock": "id-2"}, record=True)  # type: ignore[arg-type]
    recorded = store.docs[f"{target.bucket}/arch/.kafka-archive/topics/lock/topic.json"].body
    assert recorded["topic_id"] == "id-2" and store.docs[earlier].body == lock


def _proof(
    planned: str | None, answers: list[str | None], monkeypatch: Any
) -> tuple[identity.TopicProof, list[str]]:
    asked: list[str] = []

    def now(kafka: object, topic: str, timeout: float) -> str | None:
        asked.append(topic)
        return answers.pop(0)

    monkeypatch.setattr(identity, "topic_id_now", now)
    route = kcql.parse("INSERT INTO bkt:arch SELECT * FROM t").routes[0]
    unit = WorkUnit(0, route, TopicPartition("t", 0), 0, 10, "run", "job", "g", topic_id=planned)
    return identity.TopicProof(KafkaSettings("k:9092"), unit, 5.0), asked


def test_a_task_confirms_the_planned_topic_id_once_per_read(monkeypatch: Any) -> None:
    proof, asked = _proof("id-1", ["id-1", "id-1", ""], monkeypatch)
    proof.confirm()
    assert asked == [], "nothing read, nothing to prove"
    proof.read()
    proof.confirm()
    proof.confirm()
    assert asked == ["t"], "the markers and the commit after one read: one request"
    proof.read()
    proof.confirm()
    proof.read()
    proof.confirm()  # a cluster that tells no id now: not checked
    assert asked == ["t", "t", "t"]


@pytest.mark.parametrize("now", ["id-2", None])
def test_a_task_refuses_a_topic_re_created_or_deleted_since_its_plan(
    now: str | None, monkeypatch: Any
) -> None:
    proof, _ = _proof("id-1", [now], monkeypatch)
    proof.read()
    with pytest.raises(TopicRecreatedError) as caught:
        proof.confirm()
    assert caught.value.exit_code == 17 and "while this run read it" in str(caught.value)
    assert ("now id-2" if now else "deleted") in str(caught.value)


def test_a_unit_without_a_planned_id_is_not_checked(monkeypatch: Any) -> None:
    proof, asked = _proof(None, [], monkeypatch)
    proof.read()
    proof.confirm()
    assert asked == []


def _proofs(count: int, monkeypatch: Any, *, delay: float = 0.0) -> tuple[list[Any], list[float]]:
    """``count`` units' proofs of topic ``u``; the times (monotonic) each request was sent."""
    sent: list[float] = []

    def now(kafka: object, topic: str, timeout: float) -> str | None:
        sent.append(time.monotonic())
        time.sleep(delay)
        return "id-1"

    monkeypatch.setattr(identity, "topic_id_now", now)
    route = kcql.parse("INSERT INTO bkt:arch SELECT * FROM u").routes[0]
    units = [
        WorkUnit(0, route, TopicPartition("u", p), 0, 10, "run", "job", "g", topic_id="id-1")
        for p in range(count)
    ]
    return [identity.TopicProof(KafkaSettings("k:9092"), u, 5.0) for u in units], sent


def test_units_that_confirm_at_once_share_a_request(monkeypatch: Any) -> None:
    """A worker's unit threads confirming one topic at once (a task's units are a topic's
    partitions) send one DescribeTopics request between them, not one each; every request
    any proof takes was sent after that proof's read."""
    proofs, sent = _proofs(8, monkeypatch, delay=0.2)
    for proof in proofs:
        proof.read()
    read_at = time.monotonic()
    threads = [threading.Thread(target=p.confirm) for p in proofs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 <= len(sent) <= 2, sent  # one each before: 8
    assert all(at >= read_at for at in sent)


def test_a_request_sent_before_a_read_ended_does_not_prove_it(monkeypatch: Any) -> None:
    """A proof whose read ended while another's request was on its way waits for the next
    request: the one on its way cannot tell whether the topic was deleted after it."""
    proofs, sent = _proofs(2, monkeypatch, delay=0.3)
    first, second = proofs
    first.read()
    one = threading.Thread(target=first.confirm)
    one.start()
    while not sent:  # the first request is on its way
        time.sleep(0.005)
    second.read()
    read_at = time.monotonic()
    second.confirm()
    one.join()
    assert len(sent) == 2 and sent[1] >= read_at

"""Which Kafka topic a route archived: the topic's id, kept beside the route's states (an
Iceberg route's too: its table's snapshot holds offsets, which mean as little for a new topic).

A topic deleted and re-created under the same name is another topic to Kafka (a new topic
id) whose offsets start again at 0. The partition states say "archived up to offset N";
taken for the new topic they would skip its records below N without a word, and put its
records from N on beside the old topic's objects (or, once an offset repeats, over them).
So the first run that archives a route records the topic's id
(``<prefix>/.kafka-archive/topics/<topic>/topic.json``, create-only, under the run's lease;
earlier versions' ``topics/<topic>.json`` is still read, and copied there by a run),
and every command that reads Kafka for a route (``run``, ``--follow`` batches, ``status``,
``verify``) compares the id Kafka reports now with it: another id is refused, exit 17
(:class:`.errors.TopicRecreatedError`), before anything is read or written (``status`` and
``verify``, which write nothing, report every route first, that one marked,
:func:`recreated`).

A topic re-created after that check, while the batch's tasks read it, would be read as the
planned one: each unit carries the id its plan confirmed (``WorkUnit.topic_id``) and its task
confirms it again (:class:`TopicProof`) after reading and before it marks objects or commits,
so what a unit writes was read before any deletion (a topic id never comes back): exit 17,
nothing of the new topic marked, uploaded or committed.

Routes archived before ids were kept record the current id at their next run: a topic
re-created before that is only caught when its offsets are below the archive's
(:func:`.units.plan_work`). ``--reset-state`` keeps the document, as it keeps the objects: it
names the topic whose objects the prefix holds, so a reset does not let a re-created topic
write over them (delete it with those objects to give the prefix to the new topic). A
broker that does not report ids (before Kafka 2.8; the demo's) is not checked.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafka_archive.archiver.core.errors import TopicRecreatedError
from kafka_archive.archiver.core.model import WorkUnit
from kafka_archive.archiver.kafka.admin import topic_id_now
from kafka_archive.archiver.state import versions
from kafka_archive.archiver.state.checkpoint import now_iso
from kafka_archive.archiver.state.paths import earlier_topic_identity_key, topic_identity_key
from kafka_archive.archiver.store.s3 import PreconditionFailed, S3Store
from kafka_archive.kcql.plan import Route, Target

if TYPE_CHECKING:
    from kafka_archive.archiver.config.settings import KafkaSettings
    from kafka_archive.archiver.kafka.admin import KafkaAdmin

FORMAT_VERSION = versions.TOPIC_ID_VERSION

# Documents confirmed in this process, (bucket, key) -> topic id: they are only ever created
# (never rewritten), so a follow session reads each once, not once per batch.
_confirmed: dict[tuple[str, str], str] = {}
_guard = threading.Lock()


def shown(topic_id: str | None) -> str:
    """A topic id as Kafka's tools print it (``kafka-topics.sh --describe``: URL-safe base64
    without padding); librdkafka, whose text is what is recorded and compared, writes
    standard base64 (``+`` and ``/``)."""
    return "" if topic_id is None else topic_id.replace("+", "-").replace("/", "_").rstrip("=")


def recreated(
    store: S3Store, admin: KafkaAdmin | None, routes: Iterable[Route]
) -> dict[tuple[Target, str], TopicRecreatedError]:
    """For the commands that read Kafka but write no state (``status``, ``verify``): the
    routes, by (target, topic), whose recorded topic id is not the topic's id now, each
    with its error (they report every route, these marked, then exit 17). Nothing is
    recorded. Without Kafka (``admin`` None), none."""
    if admin is None:
        return {}
    wanted = {(r.target, r.topic) for r in routes}
    return compare(store, wanted, admin.topic_ids(t for _, t in wanted), record=False)


def check(
    store: S3Store,
    routes: Iterable[tuple[Target, str]],
    topic_ids: Mapping[str, str],
    *,
    record: bool,
) -> None:
    """Refuse (TopicRecreatedError) a route whose recorded topic id is not the topic's id
    now (``topic_ids``: Kafka's, by topic name; a topic without one is not checked). With
    ``record`` (a run holding the target's lease), a route without a recorded id gets the
    current one."""
    found = compare(store, routes, topic_ids, record=record)
    if found:
        raise found[min(found, key=lambda r: (r[0].bucket, r[0].prefix, r[1]))]


def compare(
    store: S3Store,
    routes: Iterable[tuple[Target, str]],
    topic_ids: Mapping[str, str],
    *,
    record: bool,
) -> dict[tuple[Target, str], TopicRecreatedError]:
    """The routes of ``routes`` whose recorded topic id is not ``topic_ids``' (by target and
    topic, each with its error); with ``record``, a route without one gets it (:func:`check`)."""
    todo = sorted(
        (
            (target, topic, topic_ids[topic])
            for target, topic in set(routes)
            if topic_ids.get(topic)
        ),
        key=lambda r: (r[0].bucket, r[0].prefix, r[1]),
    )
    if len(todo) <= 1:
        errors = [_check_one(store, *r, record=record) for r in todo]
    else:
        # A GET each the first time (many topics: FROM `*`), on a bounded pool like the
        # states'.
        with ThreadPoolExecutor(max_workers=min(10, len(todo))) as pool:
            errors = list(pool.map(lambda r: _check_one(store, *r, record=record), todo))
    return {(r[0], r[1]): e for r, e in zip(todo, errors, strict=True) if e is not None}


def _check_one(
    store: S3Store, target: Target, topic: str, current: str, *, record: bool
) -> TopicRecreatedError | None:
    key = topic_identity_key(target, topic)
    with _guard:
        known = _confirmed.get((target.bucket, key))
    if known is None:
        known = _read(store, target, key)
        if known is None:
            known = _earlier(store, target, topic, key, record=record)
        if known is None and record:
            body = {"version": FORMAT_VERSION, "topic": topic, "topic_id": current}
            body["recorded_at"] = now_iso()
            try:
                store.put_document(target.bucket, key, body, if_match=None)
                known = current
            except PreconditionFailed:  # another run recorded it meanwhile
                known = _read(store, target, key)
        if known is None:
            return None
        with _guard:
            _confirmed[(target.bucket, key)] = known
    if known == current:
        return None
    return TopicRecreatedError(
        f"topic {topic!r} was deleted and re-created since s3://{target.bucket}/"
        f"{target.head} archived it (topic id {shown(known)}, now {shown(current)}): its "
        "offsets are "
        "another topic's",
        hint="Archive the new topic into a new prefix (another INSERT INTO target: state "
        "belongs to the target, not to --job-name); continuing here would skip its records "
        "below the archived offsets and mix the two topics' objects",
    )


def _earlier(store: S3Store, target: Target, topic: str, key: str, *, record: bool) -> str | None:
    """The id an earlier version recorded at its key (copied to ``key`` with ``record``, so
    that later runs read one document)."""
    earlier = earlier_topic_identity_key(target, topic)
    known = _read(store, target, earlier)
    if known is not None and record:
        body = {"version": FORMAT_VERSION, "topic": topic, "topic_id": known}
        body |= {"recorded_at": now_iso(), "copied_from": earlier}
        try:
            store.put_document(target.bucket, key, body, if_match=None)
        except PreconditionFailed:  # another run copied or recorded it meanwhile
            return _read(store, target, key)
    return known


def _read(store: S3Store, target: Target, key: str) -> str | None:
    doc = store.get_document(target.bucket, key)
    if doc is None:
        return None
    versions.require(doc.body, FORMAT_VERSION, f"the topic record s3://{target.bucket}/{key}")
    found = doc.body.get("topic_id")
    return str(found) if found else None


class TopicProof:
    """Executor side: that the records a unit read are of the topic its plan confirmed.

    :meth:`read` after each batch read; :meth:`confirm` before a marker or a commit asks
    Kafka for the topic's id (once per call after a read, none otherwise) and refuses
    another one, or a topic that is gone (TopicRecreatedError, exit 17). The id seen now
    being the planned one proves no deletion came before now, so every record read so far
    is the planned topic's. A unit without a planned id (a broker that tells none) is not
    checked."""

    def __init__(self, kafka: KafkaSettings, unit: WorkUnit, timeout: float) -> None:
        self._kafka, self._unit, self._timeout = kafka, unit, timeout
        self._stale = False
        self._read_at = 0.0  # time.monotonic() when the last read ended

    def read(self) -> None:
        self._stale = self._unit.topic_id is not None
        self._read_at = time.monotonic()

    def confirm(self) -> None:
        if not self._stale:
            return
        unit = self._unit
        now = _ASKED.since(self._kafka, unit.tp.topic, self._read_at, self._timeout)
        if now != "" and now != unit.topic_id:
            target = unit.route.target
            became = f"now {shown(now)}" if now is not None else "now none: deleted"
            raise TopicRecreatedError(
                f"topic {unit.tp.topic!r} was deleted (and re-created) while this run read it "
                f"for s3://{target.bucket}/{target.head} (topic id {shown(unit.topic_id)}, "
                f"{became}): what it read since its last check may be another topic's and was "
                "not written",
                tp=unit.tp,
                hint="Archive the new topic into a new prefix (another INSERT INTO target: "
                "state belongs to the target, not to --job-name); this prefix keeps the old "
                "topic's records up to its last commit",
            )
        self._stale = False


@dataclass
class _Request:
    """One DescribeTopics request of a worker process (:class:`_Requests`)."""

    sent: float  # time.monotonic() just before it was sent
    done: threading.Event = field(default_factory=threading.Event)
    topic_id: str | None = None
    error: BaseException | None = None


class _Requests:
    """A worker's topic id requests, shared by the units that confirm a topic at once.

    A proof needs an answer to a request sent after its read ended (:class:`TopicProof`):
    it takes the last request's when that was sent after its read (waiting for it if it is
    on its way), else it sends the next one, after the one on its way, for every proof that
    waits by then (as a group commit). A task's units are mostly one topic's partitions
    (:func:`.plan.units.pack`): its unit threads send a request or two where they sent one
    each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[tuple[KafkaSettings, str], _Request] = {}

    def since(self, kafka: KafkaSettings, topic: str, read_at: float, timeout: float) -> str | None:
        key = (kafka, topic)
        while True:
            with self._lock:
                last = self._last.get(key)
                lead = last is None or (last.done.is_set() and last.sent < read_at)
                if lead:
                    last = self._last[key] = _Request(time.monotonic())
            assert last is not None
            if lead:
                try:
                    last.topic_id = topic_id_now(kafka, topic, timeout)
                except BaseException as exc:
                    last.error = exc
                    with self._lock:  # the next proof asks again
                        if self._last.get(key) is last:
                            del self._last[key]
                    raise
                finally:
                    last.done.set()
                return last.topic_id
            last.done.wait()
            if last.sent >= read_at:
                if last.error is not None:
                    raise last.error
                return last.topic_id
            # Sent before this proof's read ended: the next request, after it.


_ASKED = _Requests()

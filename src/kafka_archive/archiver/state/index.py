"""A target's state index: the partition states a session left, each with its ETag, in one
object (``<prefix>/.kafka-archive/index.json``), so that the next session learns thousands
of states from one listing and one GET instead of a GET each.

The index is a cache, never the truth. An entry counts only while a listing of the target's
state objects shows the same ETag for its state's key: S3 lists consistently, and an ETag
names one content (the same trust every conditional state write puts in If-Match). A state
the listing does not show does not exist (no GET either). Any other partition is read as
before. Every state write stays conditional on the ETag it was planned from, so a listing
overtaken by a write could only make a write fail (exit 9 or 18), never let one through; and
under the session's lease no other run writes the target's states.

A missing, damaged or newer index is ignored (everything is read); one the lease's holder
did not write can only hold entries whose ETags no longer match (read again).

``status`` and ``verify`` learn states the same way without a lease (``views.listed_states``)
and never write the index: what they show is the states as the listing found them, as a GET
each would have at about the same moment.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.state.checkpoint import LoadedState, PartitionState
from kafka_archive.archiver.state.paths import index_key, state_root
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Target

log = logging.getLogger(__name__)

INDEX_VERSION = 1
_STATE_DIR = "state/"
_STATE_SUFFIX = ".json"


def state_etags(target: Target, listing: Iterable[tuple[str, str]]) -> dict[TopicPartition, str]:
    """The ETag of each partition state among the ``(key, ETag)`` of a listing of the
    target's ``.kafka-archive/`` (other keys are ignored)."""
    root = f"{state_root(target)}/{_STATE_DIR}"
    found: dict[TopicPartition, str] = {}
    for key, etag in listing:
        if not key.startswith(root) or not key.endswith(_STATE_SUFFIX):
            continue
        topic, _, name = key[len(root) : -len(_STATE_SUFFIX)].partition("/")
        if topic and name.isdigit():
            found[TopicPartition(topic, int(name))] = etag
    return found


def read(store: S3Store, target: Target) -> dict[TopicPartition, LoadedState]:
    """The index's entries (empty when there is none, or it is damaged or newer)."""
    raw = store.get_bytes(target.bucket, index_key(target))
    if raw is None:
        return {}
    try:
        body = json.loads(raw)
        if body.get("version") != INDEX_VERSION:
            raise ValueError(f"index version {body.get('version')!r}")
        return {
            TopicPartition(topic, int(partition)): LoadedState(
                PartitionState.from_json(entry["state"]), str(entry["etag"])
            )
            for topic, partitions in body["states"].items()
            for partition, entry in partitions.items()
        }
    except Exception as exc:  # a cache: anything unreadable is read from the states
        log.debug("ignoring the state index of s3://%s/%s: %s", target.bucket, target.prefix, exc)
        return {}


def proven(
    etags: Mapping[TopicPartition, str],
    entries: Mapping[TopicPartition, LoadedState],
    tps: Iterable[TopicPartition],
) -> dict[TopicPartition, LoadedState]:
    """Of ``tps``, the states the listing (``etags``) proves without a GET: no state (not
    listed), or the index entry with the listed ETag."""
    known: dict[TopicPartition, LoadedState] = {}
    for tp in tps:
        etag = etags.get(tp)
        if etag is None:
            known[tp] = LoadedState(None, None)
            continue
        entry = entries.get(tp)
        if entry is not None and entry.etag == etag:
            known[tp] = entry
    return known


@dataclass(frozen=True, slots=True)
class Proof:
    """What one listing of a target's ``.kafka-archive/`` (``etags``: each state's ETag)
    and the target's index (``entries``, as read) prove."""

    etags: Mapping[TopicPartition, str]
    entries: Mapping[TopicPartition, LoadedState]

    def state(self, tp: TopicPartition) -> LoadedState | None:
        """``tp``'s state if proven (:func:`proven`), else None (to be read)."""
        return proven(self.etags, self.entries, (tp,)).get(tp)

    def indexed(self) -> dict[TopicPartition, LoadedState]:
        """The index entries still current (those a session's new index starts from)."""
        return {
            tp: loaded
            for tp, loaded in proven(self.etags, self.entries, self.entries).items()
            if loaded.state is not None
        }


def document(states: Mapping[TopicPartition, LoadedState], job: str) -> bytes:
    by_topic: dict[str, dict[str, object]] = {}
    for tp in sorted(states):
        loaded = states[tp]
        if loaded.state is None or not loaded.etag:
            continue
        by_topic.setdefault(tp.topic, {})[str(tp.partition)] = {
            "etag": loaded.etag,
            "state": loaded.state.to_json(tp, job),
        }
    return json.dumps(
        {"version": INDEX_VERSION, "states": by_topic}, separators=(",", ":")
    ).encode()


def write(
    store: S3Store, target: Target, states: Mapping[TopicPartition, LoadedState], job: str
) -> None:
    """Replace the index with ``states`` (those with a state and an ETag)."""
    store.put_bytes(target.bucket, index_key(target), document(states, job))

"""Where the runtime keeps its own objects, under ``<prefix>/.kafka-archive/``.

State belongs to the route (target bucket and prefix, and topic), not to the job: adding or
removing a statement leaves every other route's progress where it is. The lease is one per
target prefix (``lock.json``), so two runs writing the same route — of one job or of two —
are fenced against each other.

The layout before routes owned their state put each job in a folder
(``<prefix>/.kafka-archive/<job>/lock.json``, ``<job>/state/<topic>/<partition>.json``,
``<job>/pending/<topic>/<partition>/<marker>``, :func:`legacy_root`): its keys are always one
folder deeper than these, so the two never read as each other (a topic's keys here are in a
folder of its own, whatever its name: ``tests/unit/archiver/state/test_paths.py`` tries
every key; the one exception, :func:`earlier_topic_identity_key` of a topic named ``lock``,
:mod:`.legacy` tells apart by its content). The leading dot keeps Hive-style readers
(Athena, Spark, Presto) from treating these as data.
"""

from __future__ import annotations

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.kcql.plan import Target

STATE_DIR = ".kafka-archive"


def state_root(target: Target) -> str:
    return f"{target.head}{STATE_DIR}"


def topic_state_prefix(target: Target, topic: str) -> str:
    return f"{state_root(target)}/state/{topic}/"


def state_key(target: Target, tp: TopicPartition) -> str:
    return f"{topic_state_prefix(target, tp.topic)}{tp.partition}.json"


def topic_identity_key(target: Target, topic: str) -> str:
    """Which Kafka topic (its id) the route of ``topic`` archived (:mod:`.identity`): one
    folder per topic, as :func:`columns_key`."""
    return f"{state_root(target)}/topics/{topic}/topic.json"


def earlier_topic_identity_key(target: Target, topic: str) -> str:
    """Where versions before :func:`topic_identity_key` kept the record (still read). For a
    topic named ``lock`` it is the old layout's lock of a job named ``topics``
    (:mod:`.legacy` tells the two apart by what the document holds)."""
    return f"{state_root(target)}/topics/{topic}.json"


def columns_key(target: Target, topic: str) -> str:
    """The column types the route of ``topic`` committed objects with (:mod:`.plan.columns`):
    one folder per topic, so that no topic's key reads as the old layout's ``<job>/lock.json``
    (:mod:`.legacy`; a topic named ``lock``)."""
    return f"{state_root(target)}/columns/{topic}/columns.json"


def pending_root(target: Target) -> str:
    """Where the intent markers of every route under ``target`` are (``<topic>/<partition>/``)."""
    return f"{state_root(target)}/pending/"


def topic_pending_prefix(target: Target, topic: str) -> str:
    return f"{pending_root(target)}{topic}/"


def pending_prefix(target: Target, tp: TopicPartition) -> str:
    return f"{topic_pending_prefix(target, tp.topic)}{tp.partition}/"


def watch_root(target: Target) -> str:
    """Where recovery's watches of every route under ``target`` are (``<topic>/<partition>/``:
    the keys of objects a fenced or crashed run may still create late, :mod:`.pending`)."""
    return f"{state_root(target)}/watch/"


def watch_prefix(target: Target, tp: TopicPartition) -> str:
    return f"{watch_root(target)}{tp.topic}/{tp.partition}/"


def lock_key(target: Target) -> str:
    return f"{state_root(target)}/lock.json"


def index_key(target: Target) -> str:
    """The state index (:mod:`.index`): a cache of the states, never the truth."""
    return f"{state_root(target)}/index.json"


def probe_key(target: Target, run_id: str) -> str:
    return f"{state_root(target)}/probe-{run_id}.json"


def legacy_root(target: Target, job: str) -> str:
    """The folder of job ``job`` in the layout before routes owned their state."""
    return f"{state_root(target)}/{job}"

"""Where the runtime keeps its own objects, under ``<prefix>/.kafka-archive/<job>/``.

The leading dot keeps Hive-style readers (Athena, Spark, Presto) from treating these as data.
"""

from __future__ import annotations

from kafka_archive.archiver.model import TopicPartition
from kafka_archive.kcql.plan import Target

STATE_DIR = ".kafka-archive"


def state_root(target: Target, job: str) -> str:
    head = f"{target.prefix}/" if target.prefix else ""
    return f"{head}{STATE_DIR}/{job}"


def state_key(target: Target, job: str, tp: TopicPartition) -> str:
    return f"{state_root(target, job)}/state/{tp.topic}/{tp.partition}.json"


def pending_root(target: Target, job: str) -> str:
    """Where the intent markers of every partition of the job are (``<topic>/<partition>/``)."""
    return f"{state_root(target, job)}/pending/"


def pending_prefix(target: Target, job: str, tp: TopicPartition) -> str:
    return f"{pending_root(target, job)}{tp.topic}/{tp.partition}/"


def lock_key(target: Target, job: str) -> str:
    return f"{state_root(target, job)}/lock.json"

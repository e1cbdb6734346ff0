"""Pure flush decisions: when does an open object roll? Record data only, never the clock."""

from __future__ import annotations

from dataclasses import dataclass

from kafka_archive.kcql.plan import FlushPolicy


@dataclass(frozen=True, slots=True)
class ChunkStats:
    """What an open object holds so far."""

    records: int
    bytes: int
    first_timestamp: int | None


def is_full(policy: FlushPolicy, stats: ChunkStats) -> bool:
    """True once the object reached the count or size limit: roll it after this record."""
    return stats.records >= policy.count or stats.bytes >= policy.size


def interval_elapsed(policy: FlushPolicy, stats: ChunkStats, timestamp: int | None) -> bool:
    """True when a record ``timestamp`` (ms) lies a full interval after the object's first.

    The object is rolled before that record is written, so the record starts the next one.
    Measured on record timestamps, so a retried run chunks identically.
    """
    if timestamp is None or stats.first_timestamp is None or stats.records == 0:
        return False
    return timestamp - stats.first_timestamp >= policy.interval_seconds * 1000

"""Pure flush decisions: when does an open object roll? Record data only, never the clock."""

from __future__ import annotations

from collections.abc import Sequence
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


def rolling_interval_ms(policy: FlushPolicy) -> int | None:
    """The record-time span (ms) after which an object rolls, or None when the interval does
    not roll objects (``'flush.interval.time'='arrival'``)."""
    return policy.interval_seconds * 1000 if policy.interval_by_record_time else None


def interval_elapsed(policy: FlushPolicy, stats: ChunkStats, timestamp: int | None) -> bool:
    """True when a record ``timestamp`` (ms) lies a full interval after the object's first.

    The object is rolled before that record is written, so the record starts the next one.
    Measured on record timestamps, so a retried run chunks identically. Never with
    ``'flush.interval.time'='arrival'``: there the interval does not roll inside a read.
    """
    if not policy.interval_by_record_time:
        return False
    if timestamp is None or stats.first_timestamp is None or stats.records == 0:
        return False
    return timestamp - stats.first_timestamp >= policy.interval_seconds * 1000


@dataclass(frozen=True, slots=True)
class OpenSpan:
    """An open object at the end of a unit: its first and last offsets and first time."""

    first_offset: int
    last_offset: int
    first_timestamp: int | None


def commit_cut(
    open_spans: Sequence[OpenSpan], written_end: int, stop: int, young_after_ms: int
) -> int:
    """Where a unit may commit when young open objects are held back.

    The result ``c`` is a clean cut: every object already uploaded ends before it
    (``written_end < c``) and no open object straddles it (``first < c <= last``), so open
    objects split into those flushed now (ending before ``c``) and those held back (starting
    at or after ``c``, read again by the next run). Among the first offsets of young objects
    (first record newer than ``young_after_ms``) the smallest clean one is chosen, which
    holds back the most; if there is none, ``stop`` (everything is flushed).
    """
    young = sorted(
        s.first_offset
        for s in open_spans
        if s.first_timestamp is not None and s.first_timestamp > young_after_ms
    )
    for candidate in young:
        if candidate <= written_end:
            continue
        if any(s.first_offset < candidate <= s.last_offset for s in open_spans):
            continue
        return candidate
    return stop

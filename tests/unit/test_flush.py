"""Flush decisions are pure: count, size and record-time interval, never the clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.flush import ChunkStats, interval_elapsed, is_full
from kafka_archive.kcql.plan import FlushPolicy

POLICY = FlushPolicy(count=3, size=100, interval_seconds=60)


def test_full_at_count() -> None:
    assert not is_full(POLICY, ChunkStats(2, 10, 0))
    assert is_full(POLICY, ChunkStats(3, 10, 0))


def test_full_at_size() -> None:
    assert not is_full(POLICY, ChunkStats(1, 99, 0))
    assert is_full(POLICY, ChunkStats(1, 100, 0))


def test_interval_measured_on_record_time() -> None:
    stats = ChunkStats(1, 10, 1_000_000)
    assert not interval_elapsed(POLICY, stats, 1_000_000 + 59_999)
    assert interval_elapsed(POLICY, stats, 1_000_000 + 60_000)


def test_interval_ignores_records_without_timestamps() -> None:
    assert not interval_elapsed(POLICY, ChunkStats(1, 10, None), 10**12)
    assert not interval_elapsed(POLICY, ChunkStats(1, 10, 0), None)


def test_interval_never_rolls_an_empty_chunk() -> None:
    assert not interval_elapsed(POLICY, ChunkStats(0, 0, 0), 10**12)


@given(
    count=st.integers(1, 10_000),
    records=st.integers(0, 20_000),
    size=st.integers(1, 10**9),
    written=st.integers(0, 2 * 10**9),
)
def test_full_is_exactly_either_limit(count: int, records: int, size: int, written: int) -> None:
    policy = FlushPolicy(count=count, size=size)
    assert is_full(policy, ChunkStats(records, written, None)) == (
        records >= count or written >= size
    )

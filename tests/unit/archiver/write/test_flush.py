"""Flush decisions are pure: count, size and record-time interval, never the clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.write.flush import (
    ChunkStats,
    OpenSpan,
    commit_cut,
    interval_elapsed,
    is_full,
)
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


@given(st.integers(min_value=0, max_value=10**13), st.integers(min_value=1, max_value=10**6))
def test_an_arrival_interval_never_rolls_inside_a_read(first: int, later: int) -> None:
    """'flush.interval.time'='arrival' (Lenses' wall-clock interval, made deterministic): the
    interval does not roll by record time; --follow holds young objects back instead."""
    arrival = FlushPolicy(count=3, size=100, interval_seconds=60, interval_by_record_time=False)
    assert not interval_elapsed(arrival, ChunkStats(1, 10, first), first + later * 1000)
    assert interval_elapsed(POLICY, ChunkStats(1, 10, first), first + 60_000 + later)


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


spans_strategy = st.lists(
    st.tuples(st.integers(0, 200), st.integers(0, 50), st.one_of(st.none(), st.integers(0, 100))),
    max_size=8,
).map(lambda items: [OpenSpan(first, first + length, ts) for first, length, ts in items])


@given(spans=spans_strategy, written_end=st.integers(-1, 150), young_after=st.integers(0, 100))
def test_commit_cut_is_clean_and_holds_the_most(
    spans: list[OpenSpan], written_end: int, young_after: int
) -> None:
    stop = 300
    cut = commit_cut(spans, written_end, stop, young_after)
    if cut == stop:
        return
    assert cut > written_end, "every uploaded object ends before the cut"
    assert not any(s.first_offset < cut <= s.last_offset for s in spans), "nothing straddles"
    assert any(
        s.first_offset == cut and s.first_timestamp is not None and s.first_timestamp > young_after
        for s in spans
    ), "the cut starts a young object"
    for s in spans:  # no smaller clean young start exists
        young = s.first_timestamp is not None and s.first_timestamp > young_after
        if young and written_end < s.first_offset < cut:
            assert any(o.first_offset < s.first_offset <= o.last_offset for o in spans)


def test_commit_cut_without_partitionby_holds_the_young_tail() -> None:
    tail = [OpenSpan(500, 620, first_timestamp=10_000)]
    assert commit_cut(tail, written_end=499, stop=621, young_after_ms=9_000) == 500
    assert commit_cut(tail, written_end=499, stop=621, young_after_ms=10_000) == 621


def test_commit_cut_never_splits_an_object_already_uploaded() -> None:
    # Path X rolled an object ending at 250 while path Y's young tail began at 50:
    # committing 50 would make the next run write X's records 50..250 again.
    young_y = [OpenSpan(50, 260, first_timestamp=10_000)]
    assert commit_cut(young_y, written_end=250, stop=300, young_after_ms=0) == 300

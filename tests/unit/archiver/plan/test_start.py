"""Start positions for jobs without state, and bounded-run stops (pure logic)."""

from __future__ import annotations

from kafka_archive.archiver.config.positions import StartKind, StartPosition
from kafka_archive.archiver.plan.start import initial_offset, stop_offset


def _never(_: object) -> int | None:
    raise AssertionError("must not be consulted")


def test_earliest_and_latest() -> None:
    assert initial_offset(StartPosition(StartKind.EARLIEST), 5, 90, _never, _never) == (5, None)
    assert initial_offset(StartPosition(StartKind.LATEST), 5, 90, _never, _never) == (90, None)


def test_timestamp_uses_the_lookup_and_falls_to_the_end_when_nothing_is_newer() -> None:
    at = StartPosition(StartKind.TIMESTAMP, timestamp_ms=1000)
    assert initial_offset(at, 0, 90, lambda ms: 42 if ms == 1000 else None, _never) == (42, None)
    assert initial_offset(at, 0, 90, lambda ms: None, _never) == (90, None)


def test_group_offsets_are_adopted_exactly() -> None:
    group = StartPosition(StartKind.GROUP, group="sink")
    assert initial_offset(group, 0, 90, _never, lambda g: 37 if g == "sink" else None) == (37, None)


def test_group_without_commits_starts_at_earliest_and_says_so() -> None:
    group = StartPosition(StartKind.GROUP, group="sink")
    offset, note = initial_offset(group, 3, 90, _never, lambda g: None)
    assert offset == 3
    assert note is not None and "no committed offset" in note


def test_a_start_below_retention_moves_to_the_earliest_retained() -> None:
    group = StartPosition(StartKind.GROUP, group="sink")
    offset, note = initial_offset(group, 50, 90, _never, lambda g: 10)
    assert offset == 50
    assert note is not None and "no longer retained" in note


def test_stop_offset_bounds() -> None:
    assert stop_offset(10, 100, None) == 100
    assert stop_offset(10, 100, 25) == 35
    assert stop_offset(10, 20, 25) == 20

"""Where a job with no state starts, and where a bounded run stops. Pure logic.

``--start`` (:mod:`.config.positions`) applies only to partitions that have no state yet.
"""

from __future__ import annotations

from collections.abc import Callable

from kafka_archive.archiver.config.positions import StartKind, StartPosition

OffsetForTime = Callable[[int], int | None]
GroupOffset = Callable[[str], int | None]


def initial_offset(
    start: StartPosition,
    low: int,
    high: int,
    offset_for_time: OffsetForTime,
    group_offset: GroupOffset,
) -> tuple[int, str | None]:
    """The offset a partition with no state starts from, and a note when it fell back.

    ``offset_for_time(ms)`` answers the first offset at or after a time (None: none is);
    ``group_offset(group)`` the group's committed next offset (None: nothing committed).
    The result always lies within ``[low, high]``.
    """
    note: str | None = None
    if start.kind is StartKind.EARLIEST:
        offset = low
    elif start.kind is StartKind.LATEST:
        offset = high
    elif start.kind is StartKind.TIMESTAMP:
        assert start.timestamp_ms is not None
        found = offset_for_time(start.timestamp_ms)
        offset = high if found is None or found < 0 else found
    else:
        assert start.group is not None
        found = group_offset(start.group)
        if found is None or found < 0:
            offset = low
            note = f"consumer group {start.group!r} has no committed offset here; from earliest"
        else:
            offset = found
    if offset < low:
        note = f"offset {offset} is no longer retained; starting at the earliest, {low}"
        offset = low
    return min(offset, high), note


def stop_offset(start: int, high: int, max_records: int | None) -> int:
    """Where a run stops: the end as fetched, or ``max_records`` offsets after the start."""
    return high if max_records is None else min(high, start + max_records)

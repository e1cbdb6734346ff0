"""Where a partition starts, and where a bounded run stops: pure decisions
(:func:`decide`, :func:`at_rest`) that :func:`.units.plan_work` surrounds with its reads
and writes.

``--start`` (:mod:`.config.positions`) applies only to partitions that have no state yet.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from kafka_archive.archiver.config.positions import StartKind, StartPosition
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import TopicRecreatedError
from kafka_archive.archiver.core.model import Gap, TopicPartition
from kafka_archive.archiver.plan.views import PartitionView
from kafka_archive.archiver.state.checkpoint import Gaps, PartitionState, append_gap
from kafka_archive.kcql.plan import Target

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


class Why(enum.Enum):
    """Why a partition starts where it does."""

    COMMITTED = "committed"  # the job's state: its next offset
    ADDED = "added"  # a partition added to the topic since the route began: offset 0
    NEW_TOPIC = "new topic"  # a topic FROM `*` matches since its first run: its first record
    START = "start"  # a partition of a new job: --start


@dataclass(frozen=True, slots=True)
class Begun:
    """What has begun: the (route index, topic) of each route with a partition that has state
    (``--start`` is where a route's first run begins, so a partition without state in such a
    route was added to the topic since), and the target of each FROM `*` statement with a
    topic that has state (a topic it matches without state was created, or let in by
    --topics/--topics-regex, since its first run, which pinned every topic it matched then)."""

    routes: frozenset[tuple[int, str]] = frozenset()
    matched: frozenset[Target] = frozenset()


def begun(views: Iterable[PartitionView]) -> Begun:
    """What has begun among ``views`` (by the states they were loaded with)."""
    with_state = [v for v in views if v.loaded.state is not None]
    return Begun(
        frozenset((v.route_index, v.tp.topic) for v in with_state),
        frozenset(v.route.target for v in with_state if v.route.matched),
    )


class OffsetLookups(Protocol):
    """Kafka's answers ``--start`` may need (:class:`.kafka.admin.KafkaAdmin`)."""

    def offset_for_time(self, tp: TopicPartition, timestamp_ms: int) -> int | None: ...

    def group_offset(self, tp: TopicPartition, group: str) -> int | None: ...


@dataclass(frozen=True, slots=True)
class StartDecision:
    """Where a partition's unit starts and stops, and why. ``note``: why ``--start`` fell
    back (a warning). ``gap``: offsets Kafka deleted before they were archived (reported);
    passed (allow_gaps), the start is past it; else the partition is ``lost``: it stays at
    ``start``, skipped. ``gaps``: the passed gaps to write with the partition's next
    commit."""

    start: int
    stop: int
    why: Why
    note: str | None = None
    gap: Gap | None = None
    gaps: Gaps = ()

    @property
    def lost(self) -> bool:
        """Records lost: the partition stays where it is (allow_gaps is off)."""
        return self.gap is not None and not self.gap.passed

    @property
    def idle(self) -> bool:
        """Nothing new to archive (or records lost)."""
        return self.start >= self.stop


def decide(
    view: PartitionView, settings: Settings, begun: Begun, lookups: OffsetLookups
) -> StartDecision:
    """Where ``view``'s partition starts (its state's next offset; 0 for a partition added
    since its route began; the first record of a topic a FROM `*` statement matches since
    its first run under ``--start latest``; else ``--start``, which may ask ``lookups``) and
    where this run stops (Kafka's last stable offset, or ``max_records_per_partition``
    after the start). A partition with state or added since its route began that starts
    below Kafka's low watermark has a gap. The archive holding offsets past Kafka's high
    watermark means the topic was re-created: refused (:class:`.TopicRecreatedError`)."""
    marks, state, tp = view.marks, view.loaded.state, view.tp
    assert marks is not None, "planning reads Kafka's offsets"
    gaps = state.gaps if state is not None else ()
    note: str | None = None
    if state is not None:
        if state.next_offset > marks.high:
            raise _recreated(tp, state.next_offset, marks.high)
        start, why = state.next_offset, Why.COMMITTED
    elif (view.route_index, tp.topic) in begun.routes:
        start, why = 0, Why.ADDED
    elif (
        settings.start.kind is StartKind.LATEST
        and view.route.matched
        and view.route.target in begun.matched
    ):
        # (a time or a group's offsets mean the same for it as for the others)
        start, why = marks.low, Why.NEW_TOPIC
    else:
        start, note = initial_offset(
            settings.start,
            marks.low,
            marks.end,
            functools.partial(lookups.offset_for_time, tp),
            functools.partial(lookups.group_offset, tp),
        )
        why = Why.START
    gap: Gap | None = None
    if why in (Why.COMMITTED, Why.ADDED) and start < marks.low:
        gap = Gap(view.route_index, tp, start, marks.low - 1, passed=settings.allow_gaps)
        if not gap.passed:
            return StartDecision(start, start, why, note, gap, gaps)
        start, gaps = marks.low, append_gap(gaps, gap.first, gap.last)
    stop = stop_offset(start, marks.end, settings.max_records_per_partition)
    return StartDecision(start, stop, why, note, gap, gaps)


def _recreated(tp: TopicPartition, committed: int, high: int) -> TopicRecreatedError:
    return TopicRecreatedError(
        f"the archive holds offsets up to {committed - 1}, but Kafka's "
        f"partition ends at offset {high}: the topic was deleted and "
        "re-created (or its log truncated)",
        tp=tp,
        hint="Archive the new topic into a new prefix (another INSERT INTO "
        "target: state belongs to the target, not to --job-name); resetting "
        "this state would write the new topic's records over the old objects",
    )


class Rest(enum.Enum):
    """What planning writes for a partition with nothing new to archive."""

    PIN = "pin"  # a first state at the start, so the next run continues there
    MOVE = "move"  # the state moved past a passed gap, which it records
    KEEP = "keep"  # the state as it is (settled)
    NONE = "none"  # no state object (an Iceberg route: its table's snapshot is its state)


def at_rest(
    start: int, current: PartitionState | None, settings: Settings, *, state_object: bool
) -> Rest:
    """What an idle partition starting at ``start`` writes, given its ``current`` state.

    A new job pins where it starts (latest, a time, a group), so that the next run continues
    from here instead of choosing again: also at 0 (an empty partition), or the next run's
    `latest` would skip what came in between (with the gap it passed, when Kafka had deleted
    the head of an added partition). Past a gap (allow_gaps) with nothing after it yet, the
    state records that the gap was passed, so that the next run does not report it again."""
    if not state_object:
        return Rest.NONE
    if current is None:
        return Rest.PIN if start > 0 or settings.start.kind is not StartKind.EARLIEST else Rest.KEEP
    return Rest.MOVE if start > current.next_offset else Rest.KEEP

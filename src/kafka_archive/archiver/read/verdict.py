"""What ``verify`` concludes of one partition's archive, as pure decisions: given the
objects' keys, their records as decoded and Kafka's records in their stored form, the
discrepancies and notes. :mod:`kafka_archive.archiver.commands.verify` does the reading
(S3, Kafka, in a Spark task) and feeds them in; an object is read when the comparison first
needs it (``load``, injected).

- Offline: :func:`placement_problems` (objects against the committed offset and the state,
  before any is read), :func:`object_problems` (one object's records), and in a layout
  with a single group :func:`sequence_findings` (overlaps, and the holes between objects).
- Against Kafka: :class:`Comparison` places each of Kafka's records in the object of its
  group with the greatest start offset at or below its offset (how the writer chunked it)
  and compares it with that object's next record; on a compacted topic the archive may
  hold more records between Kafka's.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.partition.parse import parse_key
from kafka_archive.archiver.read.decoding import StoredRecord, same_value
from kafka_archive.archiver.read.listing import StoredObject
from kafka_archive.kcql.plan import Route

Group = tuple[str | None, ...]
# An object's records as decoded, or None when it cannot be read (a problem of its own).
Loader = Callable[[StoredObject], list[StoredRecord] | None]


@dataclass(frozen=True, slots=True)
class Discrepancy:
    """Something wrong in the archive: where (offsets, object) and what."""

    first_offset: int | None
    last_offset: int | None
    key: str | None
    problem: str


def found(
    obj: StoredObject | None, text: str, first: int | None = None, last: int | None = None
) -> Discrepancy:
    """A discrepancy of ``obj`` (None: of the partition)."""
    return Discrepancy(first, last, obj.key if obj else None, text)


class Events:
    """Problems found record by record, merged into ranges of consecutive offsets."""

    def __init__(self) -> None:
        self.out: list[Discrepancy] = []
        self._open: dict[tuple[str | None, str], tuple[int, int]] = {}

    def add(self, offset: int, key: str | None, problem: str) -> None:
        span = self._open.get((key, problem))
        if span is not None and span[1] == offset - 1:
            self._open[(key, problem)] = (span[0], offset)
            return
        if span is not None:
            self.out.append(Discrepancy(span[0], span[1], key, problem))
        self._open[(key, problem)] = (offset, offset)

    def close(self) -> list[Discrepancy]:
        for (key, problem), (first, last) in self._open.items():
            self.out.append(Discrepancy(first, last, key, problem))
        self._open.clear()
        return sorted(self.out, key=lambda d: (d.first_offset or 0, d.key or ""))


def uncovered(first: int, last: int, gaps: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The ranges of offsets ``first..last`` that no gap of ``gaps`` (``(first, last)``
    each) covers, in order."""
    left: list[tuple[int, int]] = []
    at = first
    for gap_first, gap_last in sorted(gaps):
        if gap_last < at or gap_first > last:
            continue
        if gap_first > at:
            left.append((at, gap_first - 1))
        at = max(at, gap_last + 1)
    if at <= last:
        left.append((at, last))
    return left


# -- offline ---------------------------------------------------------------------------


def placement_problems(
    route: Route,
    tp: TopicPartition,
    objects: Sequence[StoredObject],
    committed: int | None,
    state_objects: Iterable[str],
    state_object_count: int,
) -> list[Discrepancy]:
    """What the objects' keys tell against the partition's state, none read: objects
    without a state or at or beyond the committed offset (a crashed run's), two objects at
    one start offset, objects the state names that do not exist, fewer objects than the
    state counts."""
    problems: list[Discrepancy] = []
    starts: dict[int, StoredObject] = {}
    for obj in objects:
        if committed is None:
            problems.append(
                found(
                    obj,
                    "object exists but the job has no committed state for this partition",
                    obj.start_offset,
                )
            )
        elif obj.start_offset >= committed:
            problems.append(
                found(
                    obj,
                    f"object starts at or beyond the committed offset "
                    f"{committed} (left by a crashed run; the next run removes it)",
                    obj.start_offset,
                )
            )
        other = starts.get(obj.start_offset)
        if other is not None:
            problems.append(
                found(
                    obj,
                    f"starts at the same offset as {other.key}: the record at "
                    "that offset is archived twice",
                    obj.start_offset,
                )
            )
        starts[obj.start_offset] = obj
    keys = {o.key for o in objects}
    for key in state_objects:
        if key not in keys:
            first, last = missing_offsets(route, tp, objects, committed, key)
            problems.append(
                found(None, f"the state names {key}, which does not exist", first, last)
            )
    below = sum(1 for o in objects if committed is None or o.start_offset < committed)
    if below < state_object_count:
        problems.append(
            found(
                None,
                f"the state counts {state_object_count} object(s) written, "
                f"but {below} exist: {state_object_count - below} object(s) "
                "were deleted",
            )
        )
    return problems


def missing_offsets(
    route: Route,
    tp: TopicPartition,
    objects: Sequence[StoredObject],
    committed: int | None,
    key: str,
) -> tuple[int | None, int | None]:
    """The offsets a missing object held, from its key: from its start offset up to the
    next object of its group (or the committed offset)."""
    parsed = parse_key(layout_for(route), key)
    if parsed is None or parsed.tp != tp:
        return None, None
    later = [
        o.start_offset
        for o in objects
        if o.group == parsed.group and o.start_offset > parsed.start_offset
    ]
    end = min(later) if later else committed
    return parsed.start_offset, None if end is None else end - 1


def object_problems(obj: StoredObject, records: Sequence[StoredRecord]) -> list[Discrepancy]:
    """What an object's decoded records tell: it is empty, or the offsets it stores do not
    start at its key's or do not strictly increase."""
    problems: list[Discrepancy] = []
    if not records:
        problems.append(found(obj, "empty object", obj.start_offset))
    offsets = [r.offset for r in records if r.offset is not None]
    if offsets and (offsets[0] != obj.start_offset or offsets != sorted(set(offsets))):
        problems.append(
            found(
                obj,
                "stored offsets do not start at the key's offset or are not strictly increasing",
                obj.start_offset,
            )
        )
    return problems


def sequence_findings(
    route: Route,
    objects: Sequence[StoredObject],
    counts: Mapping[str, int],
    known: Iterable[tuple[int, int]],
    removed: Iterable[tuple[int, int]] = (),
) -> tuple[list[Discrepancy], list[str]]:
    """In a layout with a single group (no PARTITIONBY, no time folders), the objects in
    offset order, each holding ``counts[key]`` records at the offsets from its start that
    are not ``removed`` (erased, expired): an object overlapping the one before is a
    problem; offsets between two objects are noted as a hole, except those ``known``
    (compared with Kafka record by record, an allowed gap, removed). Problems and notes."""
    removals = Removals(tuple(removed))
    problems: list[Discrepancy] = []
    notes: list[str] = []
    layout = layout_for(route)
    if layout.fields or layout.times:
        return problems, notes
    known = tuple(known)
    for before, after in itertools.pairwise(objects):
        count = counts.get(before.key)
        if count is None:
            continue
        end = removals.past(before.start_offset, count)
        if after.start_offset < end:
            problems.append(
                found(
                    after,
                    f"overlaps {before.key}, which holds {count} records from "
                    f"offset {before.start_offset}",
                    after.start_offset,
                    end - 1,
                )
            )
        elif after.start_offset > end:
            # Offsets compared with Kafka record by record are no guess: a record missing
            # there is a problem, one the format refused a note of its own.
            for first, last in uncovered(end, after.start_offset - 1, known):
                notes.append(
                    f"offsets {first}..{last} are in no object: a hole, unless Kafka "
                    "has no records there (compaction, transaction markers)"
                )
    return problems, notes


def allowed_gap_notes(passed_gaps: Iterable[tuple[int, int]]) -> list[str]:
    """Name the gaps runs passed (the state's record), which are in no object."""
    return [
        f"offsets {first}..{last}: an allowed gap, deleted by Kafka before they were "
        "archived and passed by a run with --allow-gaps (recorded in the partition's "
        "state)"
        for first, last in passed_gaps
    ]


def offset_ranges(ranges: Iterable[tuple[int, int]]) -> str:
    """``3..4, 9``: inclusive offset ranges as the notes and ``status`` name them."""
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in ranges)


def removed_notes(removed: Iterable[tuple[int, int, str]]) -> list[str]:
    """Name the offsets erase and expire removed (the commit log's record), in no object:
    one note per reason."""
    by_reason: dict[str, list[tuple[int, int]]] = {}
    for first, last, reason in sorted(removed, key=lambda r: (r[2], r[0])):
        by_reason.setdefault(reason, []).append((first, last))
    return [
        f"offsets {offset_ranges(ranges)}: "
        f"{reason} by kafka-archive {reason[:-1]} (recorded in the commit log): not a hole"
        for reason, ranges in sorted(by_reason.items())
    ]


@dataclass(frozen=True)
class Removals:
    """Offsets removed from a partition (erase, expire) as ``(first, last)`` ranges."""

    ranges: tuple[tuple[int, int], ...]
    _firsts: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.ranges))
        object.__setattr__(self, "ranges", ordered)
        object.__setattr__(self, "_firsts", tuple(first for first, _ in ordered))

    def holds(self, offset: int) -> bool:
        at = bisect.bisect_right(self._firsts, offset) - 1
        return at >= 0 and self.ranges[at][1] >= offset

    def past(self, start: int, count: int) -> int:
        """The offset after the ``count`` offsets from ``start`` on that are not removed."""
        at, left = start, count
        for first, last in self.ranges:
            if not left:
                break
            if last < at:
                continue
            if first > at:
                step = min(left, first - at)
                at, left = at + step, left - step
                if not left:
                    return at
            at = max(at, last + 1)
        return at + left


def log_holes(missing: Iterable[tuple[str, int, int]]) -> list[Discrepancy]:
    """Objects the commit log names (``(key, first, last)``) that do not exist: their
    offsets are a hole in the committed archive."""
    return [
        found(None, f"the commit log names {key}, which does not exist", first, last)
        for key, first, last in missing
    ]


def leftover_notes(keys: Iterable[str]) -> list[str]:
    """Objects under the prefix that the commit log does not name: not committed (left by a
    crashed or fenced writer), never data; vacuum removes them."""
    return [
        f"{key}: an uncommitted leftover, named by no commit log entry (not data: "
        "left by a crashed or fenced run; vacuum removes it)"
        for key in keys
    ]


# -- against Kafka ---------------------------------------------------------------------


@dataclass
class _Cursor:
    obj: StoredObject
    records: list[StoredRecord] | None
    index: int = 0
    searched: int = 0  # records compared looking past compacted ones (bounded per object)


@dataclass
class Comparison:
    """Kafka's records of ``[first, last)`` compared one by one with the archive's ``live``
    objects (those below the committed offset), in offset order. An object is loaded
    (``load``) when the first record of its group reaches it; one object per group is open
    at a time. Problems go to ``problems`` as they are found (an object's, from ``load``,
    among them), record-by-record ones to ``events``."""

    live: Sequence[StoredObject]
    first: int
    compacted: bool
    load: Loader
    problems: list[Discrepancy]
    events: Events
    # Archived records Kafka's log cleaner removed since they were archived.
    compacted_away: int = field(default=0, init=False)
    _by_group: dict[Group, list[StoredObject]] = field(default_factory=dict, init=False)
    _starts: dict[Group, list[int]] = field(default_factory=dict, init=False)
    _cursors: dict[Group, _Cursor] = field(default_factory=dict, init=False)
    _reached: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        for obj in self.live:
            self._by_group.setdefault(obj.group, []).append(obj)
        self._starts = {g: [o.start_offset for o in objs] for g, objs in self._by_group.items()}

    def add(self, offset: int, group: Group, expected: Any) -> None:
        """Kafka's record at ``offset``, of object group ``group``, in its stored form."""
        index = bisect.bisect_right(self._starts.get(group, []), offset) - 1
        if index < 0:
            self.events.add(offset, None, "record is in no object")
            return
        obj = self._by_group[group][index]
        if obj.start_offset < self.first:
            return  # the object began before Kafka's retained range
        cursor = self._cursors.get(group)
        if cursor is None or cursor.obj is not obj:
            if cursor is not None:
                self._finish(cursor)
            self._reached.add(obj.key)
            cursor = self._cursors[group] = _Cursor(obj, self.load(obj))
            if offset != obj.start_offset and not self.compacted:
                self.problems.append(
                    found(
                        obj,
                        f"the key says the first record is at offset "
                        f"{obj.start_offset}, but its group's first record from there is "
                        f"at {offset}",
                        obj.start_offset,
                    )
                )
        if cursor.records is None:
            return
        if self.compacted:
            self._skip_compacted(cursor, offset, expected)
        if cursor.index >= len(cursor.records):
            self.events.add(offset, obj.key, "record missing from its object")
            return
        stored = cursor.records[cursor.index]
        cursor.index += 1
        if not same_value(stored.value, expected) or stored.offset not in (None, offset):
            self.events.add(offset, obj.key, "archived record differs from Kafka")

    def _skip_compacted(self, cursor: _Cursor, offset: int, expected: Any) -> None:
        """Move ``cursor`` past the archived records Kafka's log cleaner removed before
        the record at ``offset``: those at lower offsets (the envelope keeps offsets), else
        those before the next one equal to it (the archive holds Kafka's records as a
        subsequence, in order: the first equal one is as good as any). Nothing equal: left
        where it is, and the comparison reports the difference. An honest object costs one
        comparison per archived record; the search stops at twice that (an object that
        differs throughout, a transform's, is not searched quadratically)."""
        records = cursor.records
        assert records is not None
        index = cursor.index
        if records[index:] and records[index].offset is not None:
            while index < len(records) and (records[index].offset or 0) < offset:
                index += 1
        else:
            end = min(len(records), index + max(0, 2 * len(records) - cursor.searched))
            for i in range(index, end):
                if same_value(records[i].value, expected):
                    cursor.searched += i - index + 1
                    index = i
                    break
            else:
                cursor.searched += end - index
        self.compacted_away += index - cursor.index
        cursor.index = index

    def _finish(self, cursor: _Cursor) -> None:
        if cursor.records is not None and cursor.index < len(cursor.records):
            extra = len(cursor.records) - cursor.index
            if self.compacted:
                self.compacted_away += extra
                return
            self.problems.append(
                found(
                    cursor.obj,
                    f"holds {extra} record(s) more than Kafka has for its range (duplicates?)",
                    cursor.obj.start_offset,
                )
            )

    def close(self, last: int, counts: Mapping[str, int]) -> list[str]:
        """After Kafka's last record: the open objects' records left over, and the objects
        no record reached that hold records (``counts``, of those read); the notes."""
        for cursor in self._cursors.values():
            self._finish(cursor)
        for obj in self.live:
            if (
                obj.start_offset >= self.first
                and obj.key not in self._reached
                and counts.get(obj.key)
            ):
                if self.compacted and obj.start_offset < last:
                    self.compacted_away += counts[obj.key]
                    continue
                self.problems.append(
                    found(
                        obj,
                        "holds records that belong to no offset of its group in Kafka (a copy?)",
                        obj.start_offset,
                    )
                )
        if not self.compacted_away:
            return []
        return [
            f"{self.compacted_away} archived record(s) are no longer in Kafka: the topic "
            "is compacted, and its log cleaner removed them after they were archived"
        ]

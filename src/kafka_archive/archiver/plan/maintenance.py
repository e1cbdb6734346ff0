"""Which committed objects a maintenance command rewrites (issue 38), pure.

From one partition's committed objects (as the commit log names them: key, offsets, record
count, size, the group their key places them in, when they were written and the record-time
bounds, where known) and the request, the plan says:

- **compact** (:class:`Compact`): runs of consecutive objects of one group (PARTITIONBY
  values and a time layout's folder: never merged across), each run's sizes summing to at
  most the target, each to become one object keyed by its first offset. Objects younger than
  ``older_than`` end their group's eligible part: the recent, still-growing end is left
  alone. An object already at the target stays as it is; a run of one is no rewrite, so an
  already compact partition plans nothing. Where the format stores no offsets (no envelope,
  or one without its metadata) a record's offset is its object's first offset plus its
  position, so only objects whose records fill their offsets, each following the last
  without a gap, are merged: any other merge would move records to wrong offsets.
- **erase** (:class:`Erase`): every object, each alone, since only reading it tells whether
  it holds a record of the keys (the rewriter leaves an object without one as it is).
- **expire** (:class:`Expire`): objects wholly before the cut are dropped without reading;
  objects wholly at or after it stay; the rest (spanning it, or of unknown times) are read
  and rewritten alone.

The engine that carries a group out is :mod:`kafka_archive.archiver.write.rewrite`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_TARGET_SIZE = 128 * 1000 * 1000
"""``--target-size``'s default: 128 MB."""


@dataclass(frozen=True, slots=True)
class CommittedObject:
    """One committed object of a partition, as the commit log names it.

    ``first``/``last`` are the offsets of its first and last record; ``records`` how many
    it holds (``last - first + 1`` when they fill their offsets); ``group`` what its key
    places it in apart from the topic-partition (PARTITIONBY values, a time folder);
    ``modified_ms`` when it was written (epoch ms; None: unknown); ``min_time_ms`` and
    ``max_time_ms`` bound its records' timestamps, where known.
    """

    key: str
    first: int
    last: int
    records: int
    size: int
    group: tuple[str | None, ...] = ()
    modified_ms: int | None = None
    min_time_ms: int | None = None
    max_time_ms: int | None = None

    @property
    def dense(self) -> bool:
        """Whether its records fill its offsets (none missing between first and last)."""
        return self.records == self.last - self.first + 1


@dataclass(frozen=True, slots=True)
class Compact:
    """``compact --target-size --older-than``: ``now_ms`` the store's time the age is
    measured at; ``older_than_ms`` None leaves no end alone. ``offsets_stored``: the
    route's format keeps each record's offset (the envelope with its metadata)."""

    target_size: int = DEFAULT_TARGET_SIZE
    older_than_ms: int | None = None
    now_ms: int = 0
    offsets_stored: bool = False

    def __post_init__(self) -> None:
        if self.target_size <= 0:
            raise ValueError("the target size must be positive")
        if self.older_than_ms is not None and self.older_than_ms < 0:
            raise ValueError("--older-than must not be negative")


@dataclass(frozen=True, slots=True)
class Erase:
    """``erase --key``: the keys whose records go (never logged: the rewriter's predicate
    holds them)."""

    keys: frozenset[bytes]


@dataclass(frozen=True, slots=True)
class Expire:
    """``expire --before``: records whose time is before ``cut_ms`` go."""

    cut_ms: int


Request = Compact | Erase | Expire


@dataclass(frozen=True, slots=True)
class RewriteGroup:
    """Consecutive objects of one group to read and write again as new object(s)."""

    objects: tuple[CommittedObject, ...]

    @property
    def group(self) -> tuple[str | None, ...]:
        return self.objects[0].group

    @property
    def size(self) -> int:
        return sum(o.size for o in self.objects)


@dataclass(frozen=True, slots=True)
class MaintenancePlan:
    """What to do with one partition: ``rewrites`` are read and written again (each group
    into objects of its own), ``drops`` go whole without being read (expire)."""

    rewrites: tuple[RewriteGroup, ...] = ()
    drops: tuple[CommittedObject, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.rewrites and not self.drops


def plan(objects: Iterable[CommittedObject], request: Request) -> MaintenancePlan:
    """The rewrite of one partition's committed ``objects`` (any order) for ``request``.

    Raises:
        ValueError: two objects claim the same first offset, or one's offsets are not
            ``first <= last`` with at least one record.
    """
    ordered = _ordered(objects)
    if isinstance(request, Compact):
        return MaintenancePlan(rewrites=tuple(_compact(ordered, request)))
    if isinstance(request, Erase):
        return MaintenancePlan(rewrites=tuple(RewriteGroup((o,)) for o in ordered))
    cut = request.cut_ms
    drops = tuple(o for o in ordered if o.max_time_ms is not None and o.max_time_ms < cut)
    spanning = (
        o
        for o in ordered
        if not (o.max_time_ms is not None and o.max_time_ms < cut)
        and (o.min_time_ms is None or o.min_time_ms < cut)
    )
    return MaintenancePlan(rewrites=tuple(RewriteGroup((o,)) for o in spanning), drops=drops)


def _ordered(objects: Iterable[CommittedObject]) -> list[CommittedObject]:
    ordered = sorted(objects, key=lambda o: o.first)
    for obj in ordered:
        if obj.first > obj.last or obj.records < 1 or obj.size < 0:
            raise ValueError(f"{obj.key}: offsets {obj.first}..{obj.last}, {obj.records} records")
    for before, after in itertools.pairwise(ordered):
        if before.first == after.first:
            raise ValueError(f"{before.key} and {after.key} both start at offset {after.first}")
    return ordered


def _by_group(
    ordered: Sequence[CommittedObject],
) -> dict[tuple[str | None, ...], list[CommittedObject]]:
    groups: dict[tuple[str | None, ...], list[CommittedObject]] = {}
    for obj in ordered:
        groups.setdefault(obj.group, []).append(obj)
    return groups


def _eligible(objects: list[CommittedObject], request: Compact) -> list[CommittedObject]:
    """The group's objects before its first one too young to compact (or of unknown age)."""
    if request.older_than_ms is None:
        return objects
    limit = request.now_ms - request.older_than_ms
    for index, obj in enumerate(objects):
        if obj.modified_ms is None or obj.modified_ms > limit:
            return objects[:index]
    return objects


def _joins(run: list[CommittedObject], obj: CommittedObject, request: Compact) -> bool:
    """Whether ``obj`` may join ``run`` (the objects before it in its group) in one object."""
    if sum(o.size for o in run) + obj.size > request.target_size:
        return False
    if request.offsets_stored:
        return True
    return run[-1].dense and obj.dense and run[-1].last + 1 == obj.first


def _compact(ordered: Sequence[CommittedObject], request: Compact) -> list[RewriteGroup]:
    """Greedy, per group: each run grows while the next object fits under the target."""
    out: list[RewriteGroup] = []
    for objects in _by_group(ordered).values():
        run: list[CommittedObject] = []
        for obj in _eligible(objects, request):
            if run and _joins(run, obj, request):
                run.append(obj)
                continue
            if len(run) > 1:
                out.append(RewriteGroup(tuple(run)))
            run = [obj]
        if len(run) > 1:
            out.append(RewriteGroup(tuple(run)))
    return sorted(out, key=lambda g: g.objects[0].first)

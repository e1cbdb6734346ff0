"""The maintenance planner: which committed objects compact, erase and expire rewrite."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive.archiver.plan.maintenance import (
    CommittedObject,
    Compact,
    Erase,
    Expire,
    MaintenancePlan,
    RewriteGroup,
    plan,
)


def objects_of(
    sizes: list[int],
    *,
    groups: list[tuple[str | None, ...]] | None = None,
    records: int = 10,
    gap_after: frozenset[int] = frozenset(),
    modified: list[int | None] | None = None,
) -> list[CommittedObject]:
    """Consecutive dense objects of ``records`` records each (a skipped offset after the
    indexes in ``gap_after``), of ``sizes`` bytes."""
    out, first = [], 0
    for i, size in enumerate(sizes):
        out.append(
            CommittedObject(
                key=f"k/{first:012d}.json",
                first=first,
                last=first + records - 1,
                records=records,
                size=size,
                group=groups[i] if groups else (),
                modified_ms=modified[i] if modified else None,
            )
        )
        first += records + (1 if i in gap_after else 0)
    return out


def firsts(result: MaintenancePlan) -> list[list[int]]:
    return [[o.first for o in g.objects] for g in result.rewrites]


def test_compact_merges_consecutive_small_objects_up_to_the_target() -> None:
    objs = objects_of([40, 40, 40, 40, 40])
    assert firsts(plan(objs, Compact(target_size=100))) == [[0, 10], [20, 30]]


def test_compact_leaves_an_object_at_the_target_alone_and_never_merges_around_it() -> None:
    objs = objects_of([10, 10, 200, 10, 10])
    assert firsts(plan(objs, Compact(target_size=100))) == [[0, 10], [30, 40]]


def test_compact_never_merges_across_groups() -> None:
    groups: list[tuple[str | None, ...]] = [("DE",), ("FR",), ("DE",), ("FR",), ("DE",)]
    result = plan(objects_of([1] * 5, groups=groups), Compact(target_size=100, offsets_stored=True))
    assert firsts(result) == [[0, 20, 40], [10, 30]]


def test_compact_without_stored_offsets_merges_only_objects_that_follow_without_gap() -> None:
    objs = objects_of([1, 1, 1, 1], gap_after=frozenset({1}))
    assert firsts(plan(objs, Compact(target_size=100))) == [[0, 10], [21, 31]]
    # With the offsets in the records, the gap does not matter.
    assert firsts(plan(objs, Compact(target_size=100, offsets_stored=True))) == [[0, 10, 21, 31]]


def test_compact_without_stored_offsets_leaves_objects_with_missing_offsets_alone() -> None:
    sparse = CommittedObject("k/b", first=10, last=30, records=5, size=1)
    dense = [CommittedObject("k/a", 0, 9, 10, 1), CommittedObject("k/c", 31, 40, 10, 1)]
    assert plan([*dense, sparse], Compact(target_size=100)).empty


def test_compact_older_than_leaves_the_young_end_of_each_group_alone() -> None:
    now, day = 10 * 86_400_000, 86_400_000
    modified: list[int | None] = [now - 5 * day, now - 4 * day, now - 3 * day, now, now - 9 * day]
    request = Compact(target_size=100, older_than_ms=2 * day, now_ms=now)
    # The fourth object is young: it and everything after it stay, even the old fifth.
    assert firsts(plan(objects_of([1] * 5, modified=modified), request)) == [[0, 10, 20]]


def test_compact_of_objects_of_unknown_age_under_older_than_plans_nothing() -> None:
    assert plan(objects_of([1, 1]), Compact(older_than_ms=0, now_ms=1)).empty


def test_erase_reads_every_object_alone() -> None:
    result = plan(objects_of([5, 5, 5]), Erase(frozenset({b"k"})))
    assert firsts(result) == [[0], [10], [20]] and not result.drops


def test_expire_drops_objects_before_the_cut_and_reads_only_those_that_span_it() -> None:
    def timed(first: int, low: int | None, high: int | None) -> CommittedObject:
        return CommittedObject(f"k/{first}", first, first + 9, 10, 1, (), None, low, high)

    before, spanning, after, unknown = (
        timed(0, 100, 199),
        timed(10, 150, 250),
        timed(20, 200, 300),
        timed(30, None, None),
    )
    result = plan([after, unknown, spanning, before], Expire(cut_ms=200))
    assert result.drops == (before,)
    assert result.rewrites == (RewriteGroup((spanning,)), RewriteGroup((unknown,)))


def test_overlapping_objects_are_refused() -> None:
    with pytest.raises(ValueError, match="both start at offset 0"):
        plan([CommittedObject("a", 0, 1, 2, 1), CommittedObject("b", 0, 3, 4, 1)], Compact())


def test_a_target_size_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        Compact(target_size=0)


@st.composite
def partitions(draw: st.DrawFn) -> tuple[list[CommittedObject], Compact]:
    count = draw(st.integers(0, 40))
    sizes = draw(st.lists(st.integers(0, 150), min_size=count, max_size=count))
    choices: list[tuple[str | None, ...]] = [(), ("a",), ("b",)]
    groups = draw(st.lists(st.sampled_from(choices), min_size=count, max_size=count))
    gaps = frozenset(draw(st.sets(st.integers(0, max(count - 1, 0)))))
    now = 1_000
    modified = draw(
        st.lists(st.one_of(st.none(), st.integers(0, now)), min_size=count, max_size=count)
    )
    request = Compact(
        target_size=draw(st.integers(1, 300)),
        older_than_ms=draw(st.one_of(st.none(), st.integers(0, now))),
        now_ms=now,
        offsets_stored=draw(st.booleans()),
    )
    objs = objects_of(
        sizes,
        groups=groups if count else None,
        gap_after=gaps,
        modified=modified if count else None,
    )
    return objs, request


def merged(objs: list[CommittedObject], result: MaintenancePlan) -> list[CommittedObject]:
    """The partition after the plan, each group one object of its inputs' summed size."""
    replaced = {o.key for g in result.rewrites for o in g.objects}
    out = [o for o in objs if o.key not in replaced]
    for g in result.rewrites:
        first, last = g.objects[0], g.objects[-1]
        records = sum(o.records for o in g.objects)
        out.append(
            CommittedObject(
                first.key + ".c",
                first.first,
                last.last,
                records,
                g.size,
                first.group,
                max((o.modified_ms or 0) for o in g.objects)
                if all(o.modified_ms is not None for o in g.objects)
                else None,
            )
        )
    return sorted(out, key=lambda o: o.first)


@settings(max_examples=300, deadline=None)
@given(partitions())
def test_compact_groups_are_consecutive_disjoint_eligible_and_within_the_target(
    case: tuple[list[CommittedObject], Compact],
) -> None:
    objs, request = case
    result = plan(objs, request)
    assert not result.drops
    seen: set[str] = set()
    limit = None if request.older_than_ms is None else request.now_ms - request.older_than_ms
    for g in result.rewrites:
        assert len(g.objects) >= 2
        keys = [o.key for o in g.objects]
        assert not seen & set(keys)  # disjoint
        seen |= set(keys)
        assert g.size <= request.target_size  # the size bound
        assert len({o.group for o in g.objects}) == 1  # one group
        same_group = [o for o in objs if o.group == g.group]
        at = same_group.index(g.objects[0])
        assert list(g.objects) == same_group[at : at + len(g.objects)]  # consecutive
        if limit is not None:  # only old objects, and none after a young one in the group
            assert all(
                o.modified_ms is not None and o.modified_ms <= limit
                for o in same_group[: at + len(g.objects)]
            )
        if not request.offsets_stored:
            for a, b in itertools.pairwise(g.objects):
                assert a.dense and b.dense and a.last + 1 == b.first


@settings(max_examples=300, deadline=None)
@given(partitions())
def test_compact_is_a_no_op_on_what_it_compacted(
    case: tuple[list[CommittedObject], Compact],
) -> None:
    objs, request = case
    assert plan(merged(objs, plan(objs, request)), request).empty


@settings(max_examples=200, deadline=None)
@given(partitions())
def test_no_two_neighbours_that_could_merge_are_left_apart(
    case: tuple[list[CommittedObject], Compact],
) -> None:
    """Maximal: after the plan, no two eligible neighbours of a group fit the target together."""
    objs, request = case
    after = merged(objs, plan(objs, request))
    groups: dict[tuple[str | None, ...], list[CommittedObject]] = {}
    for o in after:
        groups.setdefault(o.group, []).append(o)
    limit = None if request.older_than_ms is None else request.now_ms - request.older_than_ms
    for members in groups.values():
        for a, b in itertools.pairwise(members):
            if limit is not None and not all(
                o.modified_ms is not None and o.modified_ms <= limit for o in (a, b)
            ):
                break
            contiguous = a.dense and b.dense and a.last + 1 == b.first
            if request.offsets_stored or contiguous:
                assert a.size + b.size > request.target_size


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.integers(0, 100)), st.integers(0, 100)), max_size=30
    ),
    st.integers(0, 200),
)
def test_expire_drops_reads_and_keeps_by_the_time_bounds(
    bounds: list[tuple[int | None, int]], cut: int
) -> None:
    objs = [
        CommittedObject(
            f"k/{i}", i * 10, i * 10 + 9, 10, 1, (), None, low, None if low is None else low + span
        )
        for i, (low, span) in enumerate(bounds)
    ]
    result = plan(objs, Expire(cut))
    dropped = {o.key for o in result.drops}
    read = {o.key for g in result.rewrites for o in g.objects}
    assert not dropped & read
    for o in objs:
        if o.max_time_ms is not None and o.max_time_ms < cut:
            assert o.key in dropped
        elif o.min_time_ms is not None and o.min_time_ms >= cut:
            assert o.key not in dropped | read
        else:
            assert o.key in read


@st.composite
def timed_partitions(draw: st.DrawFn) -> tuple[list[list[int]], list[bool], int]:
    """A partition's objects as their records' times (any order: Kafka's CreateTime need not
    grow), whether the log names each one's bounds, and a cut."""
    count = draw(st.integers(0, 12))
    times = draw(
        st.lists(
            st.lists(st.integers(0, 100), min_size=1, max_size=6), min_size=count, max_size=count
        )
    )
    known = draw(st.lists(st.booleans(), min_size=count, max_size=count))
    return times, known, draw(st.integers(0, 110))


@settings(max_examples=300, deadline=None)
@given(timed_partitions())
def test_expire_reads_an_object_iff_it_spans_the_cut_or_lacks_bounds_and_keeps_the_rest(
    case: tuple[list[list[int]], list[bool], int],
) -> None:
    """Carried out as the engine does (a drop removes every record of its object unread, a
    read object loses the records before the cut, any other stays as it is), the plan leaves
    exactly the records at or after the cut."""
    times, known, cut = case
    objs, at = [], 0
    for ts, bounded in zip(times, known, strict=True):
        low, high = (min(ts), max(ts)) if bounded else (None, None)
        objs.append(
            CommittedObject(f"k/{at}", at, at + len(ts) - 1, len(ts), 1, (), None, low, high)
        )
        at += len(ts)
    record_times = {o.key: ts for o, ts in zip(objs, times, strict=True)}
    result = plan(objs, Expire(cut))
    read = [o for g in result.rewrites for o in g.objects]
    assert all(len(g.objects) == 1 for g in result.rewrites)
    for o in objs:
        spans = o.min_time_ms is None or o.min_time_ms < cut <= (o.max_time_ms or 0)
        assert (o in read) == spans, o
    kept_by_engine: list[int] = []
    for o in objs:
        if o in result.drops:
            continue
        ts = record_times[o.key]
        kept_by_engine += [t for t in ts if t >= cut] if o in read else ts
    assert sorted(kept_by_engine) == sorted(t for ts in times for t in ts if t >= cut)

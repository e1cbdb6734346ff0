"""Splitting a partition's range into pieces (archiver.subunits): pure planning."""

from __future__ import annotations

import dataclasses
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.model import TopicPartition, WorkUnit
from kafka_archive.archiver.plan.split import piece_size, split
from kafka_archive.archiver.plan.units import SMALL_PER_TASK, SMALL_UNIT, UNIT_WEIGHT, pack


def unit(kcql_text: str, start: int, stop: int, **kwargs: object) -> WorkUnit:
    route = kcql.parse(kcql_text).routes[0]
    return WorkUnit(0, route, TopicPartition("t", 0), start, stop, "run", "job", "group", **kwargs)  # type: ignore[arg-type]


ROUTE = kcql.parse("INSERT INTO bkt:p SELECT * FROM t").routes[0]


@settings(deadline=None)
@given(
    start=st.integers(0, 10**9),
    length=st.integers(1, 10**6),
    count=st.integers(1, 10**5),
    max_records=st.integers(1000, 10**6),
    young=st.none() | st.integers(0, 10**12),
)
def test_pieces_tile_the_range_on_count_boundaries_from_the_start(
    start: int, length: int, count: int, max_records: int, young: int | None
) -> None:
    route = dataclasses.replace(ROUTE, flush=dataclasses.replace(ROUTE.flush, count=count))
    whole = WorkUnit(
        0,
        route,
        TopicPartition("t", 0),
        start,
        start + length,
        "run",
        "job",
        "group",
        young_after_ms=young,
    )
    pieces = split(whole, max_records)
    if len(pieces) == 1:
        assert pieces == [whole]
        assert length <= max_records or length <= piece_size(count, max_records)
        return
    size = piece_size(count, max_records)
    assert size % count == 0 and size >= count
    assert size <= max(max_records, count)
    assert [p.start for p in pieces] == list(range(start, start + length, size))
    assert all(a.stop == b.start for a, b in itertools.pairwise(pieces))
    assert pieces[-1].stop == whole.stop
    assert all(p.part_start == start and p.part_stop == whole.stop and p.deferred for p in pieces)
    # Only the last piece may hold back a young tail.
    assert [p.young_after_ms for p in pieces] == [None] * (len(pieces) - 1) + [young]


def test_the_cuts_do_not_depend_on_the_range_end() -> None:
    text = "INSERT INTO bkt:p SELECT * FROM t WITH_FLUSH_COUNT = 1000"
    short = {p.start for p in split(unit(text, 500, 10_500), 3000)}
    long = {p.start for p in split(unit(text, 500, 99_500), 3000)}
    assert short == {500, 3500, 6500, 9500}
    assert short <= long


def test_routes_whose_objects_do_not_cut_on_offsets_are_not_split() -> None:
    for text in (
        "INSERT INTO bkt:p SELECT * FROM t PARTITIONBY _key WITH_FLUSH_COUNT = 10",
        "INSERT INTO bkt:p SELECT * FROM t WITH_FLUSH_INTERVAL = 60 WITH_FLUSH_COUNT = 10",
    ):
        whole = unit(text, 0, 10_000)
        assert split(whole, 100) == [whole]
    bounded = unit("INSERT INTO bkt:p SELECT * FROM t WITH_FLUSH_COUNT = 10", 0, 10_000, until_ms=1)
    assert split(bounded, 100) == [bounded]


@settings(deadline=None, max_examples=200)
@given(
    sizes=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 50_000)), min_size=1, max_size=300),
    parallelism=st.integers(1, 16),
)
def test_packing_runs_every_unit_once_large_ones_alone(
    sizes: list[tuple[int, int]], parallelism: int
) -> None:
    """Every unit in exactly one task; a large unit, or a piece, alone; small units in runs
    of consecutive partitions of a topic (a task's units share its topics: their consumers'
    metadata and topic id requests), in order, in tasks of about equal work (offsets, and
    a unit's round trips as UNIT_WEIGHT offsets)."""
    units = [
        WorkUnit(0, ROUTE, TopicPartition(f"t{topic}", i), 0, size, "run", "job", "group")
        for i, (topic, size) in enumerate(sizes)
    ]
    shuffled = units[1::2] + units[::2]
    groups = pack(shuffled, parallelism)
    assert sorted(u.tp.partition for g in groups for u in g) == list(range(len(sizes)))
    assert all(g for g in groups)
    assert all(len(g) == 1 for g in groups if g[0].stop > SMALL_UNIT)
    pieces = pack(
        [dataclasses.replace(u, part_start=0, part_stop=10**6) for u in units], parallelism
    )
    assert len(pieces) == len(units)  # a piece of a split partition is a task of its own
    small_units = [u for u in units if u.stop <= SMALL_UNIT]
    small = [g for g in groups if g[0].stop <= SMALL_UNIT]
    assert len(small) <= min(
        len(small_units), max(parallelism, -(-len(small_units) // SMALL_PER_TASK))
    )
    order = sorted(small_units, key=lambda u: (u.route_index, u.tp.topic, u.tp.partition))
    assert [u for g in small for u in g] == order  # consecutive runs, in order
    weights = [u.stop - u.start + UNIT_WEIGHT for u in small_units]
    if small:
        share = sum(weights) / len(small)
        assert all(
            sum(u.stop - u.start + UNIT_WEIGHT for u in g) <= share + max(weights) for g in small
        )

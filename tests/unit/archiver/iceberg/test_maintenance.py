"""The pure parts of compact, erase and expire on Iceberg tables: which files merge, offsets
as ranges, the removed ranges read back from the table properties."""

from __future__ import annotations

import itertools
import json
from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.iceberg.maintenance import (
    FileInfo,
    merged_ranges,
    plan_merges,
    removed_ranges,
)
from kafka_archive.archiver.protocol.log import Removed

A, B = ("a",), ("b",)


def info(first: int, size: int, group: tuple[str, ...] = A, modified: int = 0) -> FileInfo:
    return FileInfo(f"s3://b/{group[0]}/{first}", group, first, size, modified)


def test_consecutive_small_files_merge_up_to_the_target_size() -> None:
    files = [info(0, 40), info(10, 40), info(20, 40), info(30, 40), info(40, 200)]
    runs = plan_merges(files, 100, None)
    assert [[f.first for f in r] for r in runs] == [[0, 10], [20, 30]]


def test_groups_never_mix_and_a_lone_file_is_no_merge() -> None:
    files = [info(0, 10, A), info(5, 10, B), info(10, 10, A), info(20, 500, B)]
    runs = plan_merges(files, 100, None)
    assert [[f.path for f in r] for r in runs] == [["s3://b/a/0", "s3://b/a/10"]]


def test_older_than_leaves_the_young_end_alone() -> None:
    files = [info(0, 1, modified=1), info(1, 1, modified=2), info(2, 1, modified=9), info(3, 1)]
    runs = plan_merges(files, 100, young_ms=5)
    # From the first young file on (offset 2) nothing merges, an older one after it neither.
    assert [[f.first for f in r] for r in runs] == [[0, 1]]


@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 50), st.integers(0, 10)), max_size=30),
    st.integers(1, 120),
    st.one_of(st.none(), st.integers(0, 10)),
)
def test_merges_are_runs_of_one_group_in_order_within_the_size(
    specs: list[tuple[int, int, int]], target: int, young: int | None
) -> None:
    files = [info(n, size, (str(g),), modified) for n, (g, size, modified) in enumerate(specs)]
    runs = plan_merges(files, target, young)
    seen = [f.path for r in runs for f in r]
    assert len(seen) == len(set(seen))
    for run in runs:
        assert len(run) > 1 and len({f.group for f in run}) == 1
        assert sum(f.size for f in run) <= target
        group = sorted((f for f in files if f.group == run[0].group), key=lambda f: f.first)
        at = group.index(run[0])
        assert group[at : at + len(run)] == run  # consecutive in the group
        cut = next(
            (i for i, f in enumerate(group) if young is not None and f.modified_ms >= young), None
        )
        assert cut is None or at + len(run) <= cut


@given(st.sets(st.integers(0, 60)))
def test_offsets_as_ranges(offsets: set[int]) -> None:
    ranges = merged_ranges((o, o) for o in offsets)
    assert {o for a, b in ranges for o in range(a, b + 1)} == offsets
    assert all(b2 > b1 + 1 for (_, b1), (b2, _) in itertools.pairwise(ranges))


@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 8))))
def test_ranges_joined_where_they_touch_or_overlap(spans: list[tuple[int, int]]) -> None:
    """Ranges of several files' removed offsets, in any order, joined without expanding
    them: the same offsets, as maximal ranges."""
    given_ranges = [(a, a + n) for a, n in spans]
    ranges = merged_ranges(given_ranges)
    assert {o for a, b in ranges for o in range(a, b + 1)} == {
        o for a, b in given_ranges for o in range(a, b + 1)
    }
    assert all(b2 > b1 + 1 for (_, b1), (b2, _) in itertools.pairwise(ranges))


def test_removed_ranges_read_from_the_properties() -> None:
    table = SimpleNamespace(
        properties={
            "kafka-archive.removed.orders.v1.3": json.dumps([[4, 6, "erased", 1.5]]),
            "kafka-archive.removed.x.y": "not ours",
            "kafka-archive.offsets.orders.v1.3": "10",
        }
    )
    assert removed_ranges(table) == {
        TopicPartition("orders.v1", 3): (Removed(4, 6, "erased", 1.5),)
    }

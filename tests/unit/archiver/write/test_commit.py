"""The end of a unit (write/commit.py): its dead letters below the cut marked and uploaded
before the commit, the state committed by a unit that commits itself, its result counted."""

from __future__ import annotations

import dataclasses
import json
import logging

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import ObjectWritten, S3Requests, WorkUnit
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.store.requests import RequestCounter
from kafka_archive.archiver.write.commit import commit_unit
from kafka_archive.archiver.write.deadletter import DEAD_LETTER, Refused
from kafka_archive.archiver.write.lifecycle import Lifecycle

from .test_lifecycle import FakeFencing, FakeStore, _unit


class Store(FakeStore):
    retries = 2

    def __init__(self) -> None:
        super().__init__()
        self.requests = RequestCounter()
        for kind in ("PUT", "PUT", "GET"):
            self.requests.add(kind)


def _uploaded(unit: WorkUnit, ends: list[int]) -> tuple[Lifecycle, Store]:
    """A lifecycle whose unit uploaded objects ending at each of ``ends`` (from 0)."""
    store = Store()
    life = Lifecycle(unit, store, FakeFencing(store))  # type: ignore[arg-type]
    first = 0
    for last in ends:
        key = f"o{first}"
        life.open(key)
        life.mark([key], first)
        written = ObjectWritten(key, first, last, last - first + 1, 10)
        life.create(key, lambda key=key: store.put_bytes("bkt", key, b"d"), written)
        first = last + 1
    return life, store


@given(
    ends=st.lists(st.integers(1, 5), max_size=4).map(
        lambda steps: [sum(steps[: i + 1]) for i in range(len(steps))]
    ),
    refused_at=st.lists(st.integers(0, 30), unique=True, max_size=4).map(sorted),
    cut_extra=st.integers(0, 10),
)
def test_a_unit_commits_its_objects_and_its_dead_letters_below_the_cut(
    ends: list[int], refused_at: list[int], cut_extra: int
) -> None:
    unit = _unit()
    life, store = _uploaded(unit, ends)
    cut = (ends[-1] + 1 if ends else 0) + cut_extra
    refused = Refused(DEAD_LETTER, unit.tp, logging.getLogger("test"))
    for offset in refused_at:
        refused.take(Record("t", 0, offset, None, None, b"v"), ValueError("bad"))
    result = commit_unit(unit, store, life, cut, started=0.0, refused=refused)  # type: ignore[arg-type]
    below = [o for o in refused_at if o < cut]
    assert result.dead_letters == len(below)
    letters = [k for k in store.objects if "_dead-letter/" in k]
    if below:
        (key,) = letters
        assert result.dead_letter_key == key and key.endswith(f"{below[0]:012d}.json")
        assert [
            json.loads(line)["metadata"]["offset"] for line in store.objects[key].splitlines()
        ] == below
        # Marked before it is put, and both before the state moves.
        marked = [c for c in store.calls if c.startswith("put") and "pending" in c]
        assert store.calls.index(f"put {key}") > store.calls.index(marked[-1])
    else:
        assert letters == [] and result.dead_letter_key is None
    assert (result.records, result.objects) == (ends[-1] + 1 if ends else 0, life.uploaded())
    assert result.next_offset == cut and result.s3_retries == 2
    assert result.s3_requests == S3Requests.of({"PUT": 2, "GET": 1})
    committed = [c for c in store.calls if c.startswith("state")]
    assert committed == ([f"state {cut}"] if cut > unit.start else [])
    assert result.marker_keys == ()  # a unit that commits itself clears its markers after


def test_a_piece_hands_its_markers_to_the_driver_and_commits_nothing() -> None:
    unit = dataclasses.replace(_unit(), part_start=0, part_stop=2000)
    life, store = _uploaded(unit, [4, 9])
    result = commit_unit(unit, store, life, 10, started=0.0)  # type: ignore[arg-type]
    assert result.state is None and not [c for c in store.calls if c.startswith("state")]
    assert len(result.marker_keys) == 2 and result.records == 10

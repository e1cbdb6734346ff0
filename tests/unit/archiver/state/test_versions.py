"""Format versions of partition states and intent markers (archiver.state.versions, and the
codecs of checkpoint and pending that use it): what this version writes it reads back as
before, unversioned documents read as version 1, newer ones are refused (exit 24)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.errors import FormatVersionError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.state import versions
from kafka_archive.archiver.state.checkpoint import PartitionState
from kafka_archive.archiver.state.pending import marked_objects, marker_body

TP = TopicPartition("orders", 3)
offsets = st.integers(0, 2**63 - 1)
texts = st.text(max_size=40)
states = st.builds(
    PartitionState,
    next_offset=offsets,
    run_id=texts,
    committed_at=texts,
    last_objects=st.tuples(texts, texts) | st.just(()),
    records=offsets,
    bytes=offsets,
    objects=offsets,
    epoch=st.integers(0, 2**31),
    commits=st.lists(st.tuples(offsets, st.integers(0, 2**31)), max_size=4).map(tuple),
)
marked = st.lists(st.tuples(texts, offsets), min_size=1, max_size=70)


@given(state=states)
def test_a_state_this_version_writes_reads_back_the_same(state: PartitionState) -> None:
    body = json.loads(json.dumps(state.to_json(TP, "job")))
    assert body["version"] == versions.STATE_VERSION == 1  # as written before versions
    assert PartitionState.from_json(body) == state


@given(state=states)
def test_an_unversioned_state_reads_as_the_current_format(state: PartitionState) -> None:
    body = state.to_json(TP, "job")
    del body["version"]
    assert PartitionState.from_json(body) == state


@given(state=states, newer=st.integers(versions.STATE_VERSION + 1, 10**6))
def test_a_state_of_a_newer_format_is_refused(state: PartitionState, newer: int) -> None:
    body = {**state.to_json(TP, "job"), "version": newer}
    with pytest.raises(FormatVersionError) as refused:
        PartitionState.from_json(body, "the partition state s3://b/k")
    assert refused.value.exit_code == 24
    message = str(refused.value)
    assert f"s3://b/k is in format version {newer}, newer than this" in message
    assert "reads (up to 1)" in message and "or a newer one" in message
    assert "\n" not in message


@given(objects=marked, run=texts, epoch=st.integers(0, 2**31), job=texts)
def test_a_marker_this_version_writes_reads_back_every_object(
    objects: list[tuple[str, int]], run: str, epoch: int, job: str
) -> None:
    body = json.loads(marker_body(objects, run, epoch, job))
    assert body["version"] == versions.MARKER_VERSION
    assert marked_objects(body) == objects
    # What versions before the field read (the first object) and the writer stay where
    # they were.
    assert (body["key"], body["start"], body["run"], body["epoch"]) == (*objects[0], run, epoch)


@given(objects=marked)
def test_an_unversioned_marker_reads_as_the_current_format(objects: list[tuple[str, int]]) -> None:
    body = json.loads(marker_body(objects, "run", 1, "job"))
    del body["version"]
    assert marked_objects(body) == objects


@given(objects=marked, newer=st.integers(versions.MARKER_VERSION + 1, 10**6))
def test_a_marker_of_a_newer_format_is_refused(objects: list[tuple[str, int]], newer: int) -> None:
    body = {**json.loads(marker_body(objects, "run", 1, "job")), "version": newer}
    with pytest.raises(FormatVersionError, match=f"format version {newer},"):
        marked_objects(body, "the intent marker s3://b/m")


@given(
    value=st.one_of(
        st.integers(max_value=0),
        st.booleans(),
        st.floats(),
        st.text(),
        st.none(),
        st.lists(st.integers(), max_size=2),
    )
)
def test_a_version_that_is_not_a_positive_integer_is_refused(value: Any) -> None:
    assert versions.version_of({"version": value}) is None
    with pytest.raises(FormatVersionError, match="which is not one kafka-archive writes"):
        versions.require({"version": value}, 1, "a document")


@given(version=st.integers(1, 10**6), understood=st.integers(1, 10**6))
def test_require_reads_exactly_the_versions_up_to_the_understood_one(
    version: int, understood: int
) -> None:
    assert versions.version_of({"version": version}) == version
    if version <= understood:
        versions.require({"version": version}, understood, "a document")
    else:
        with pytest.raises(FormatVersionError):
            versions.require({"version": version}, understood, "a document")

"""parse_key reads back what object_key wrote, for every layout, and rejects foreign keys."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import assume, given, reject, settings
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.partition.keys import object_group, object_key
from kafka_archive.archiver.partition.layouts import LayoutError, layout_for
from kafka_archive.archiver.partition.parse import ParsedKey, listing_prefix, parse_key
from kafka_archive.archiver.partition.values import is_truncated, safe_segment
from kafka_archive.archiver.protocol.writer import attempt_key
from kafka_archive.kcql.plan import KeyNaming, Padding, Route

from .partition_helpers import COUNTRY, KIND, T, route
from .test_keys import OFFSET, TIMESTAMP, TPS, _accepted, routes_and_values

TP = TopicPartition("orders", 3)


@settings(max_examples=300)
@given(routes_and_values(), TPS, OFFSET, TIMESTAMP)
def test_parse_inverts_object_key(
    case: tuple[Route, tuple[str | None, ...]],
    tp: TopicPartition,
    offset: int,
    timestamp_ms: int | None,
) -> None:
    r, values = case
    _accepted(r)
    # A topic whose escaped name passes a segment's 255 bytes is cut and hashed (no Kafka
    # topic is: 249 characters of [A-Za-z0-9._-]); such a key is not read back.
    assume(not is_truncated(safe_segment(tp.topic)))
    layout = layout_for(r)
    group = object_group(r, values, timestamp_ms=timestamp_ms)
    key = object_key(r, tp, offset, values, timestamp_ms=timestamp_ms)
    assert parse_key(layout, key) == ParsedKey(tp, offset, group)
    assert key.startswith(listing_prefix(layout))


@pytest.mark.parametrize(
    ("r", "values", "key"),
    [
        (route(), (), "archive/orders/3/000000000042.json"),
        (
            route(partition_by=(COUNTRY, KIND)),
            ("DE", None),
            "archive/DE/(missing)/orders(3_000000000042).json",
        ),
        (route(layout="confluent"), (), "archive/orders/partition=3/orders+3+000000000042.json"),
        (
            route(layout="hive"),
            (),
            "archive/orders/year=2024/month=05/day=06/hour=13/orders+3+000000000042.json",
        ),
    ],
)
def test_known_keys(r: Route, values: tuple[str | None, ...], key: str) -> None:
    assert object_key(r, TP, 42, values, timestamp_ms=T) == key
    parsed = parse_key(layout_for(r), key)
    assert parsed is not None
    assert (parsed.tp, parsed.start_offset) == (TP, 42)


@pytest.mark.parametrize(
    "key",
    [
        "archive/orders/3/000000000042.parquet",  # another format
        "archive/orders/3/42x.json",  # not a number
        "archive/orders/x/000000000042.json",
        "other/orders/3/000000000042.json",  # another prefix
        "archive/.kafka-archive/job/state/orders/3.json",  # the runtime's own objects
        "archive/orders/3/sub/000000000042.json",
    ],
)
def test_foreign_keys_are_not_parsed(key: str) -> None:
    assert parse_key(layout_for(route()), key) is None


def test_left_padding_of_zero_and_unpadded_offsets() -> None:
    layout = layout_for(route())
    parsed = parse_key(layout, "archive/orders/0/000000000000.json")
    assert parsed is not None and parsed.start_offset == 0
    unpadded = layout_for(route(naming=KeyNaming(padding=Padding.NONE)))
    parsed = parse_key(unpadded, "archive/orders/0/7.json")
    assert parsed is not None and parsed.start_offset == 7


def test_repeated_template_placeholders_must_agree() -> None:
    layout = layout_for(route(layout_template="{topic}/{partition}/{topic}+{offset}.{ext}"))
    assert parse_key(layout, "archive/orders/1/orders+5.json") == ParsedKey(
        TopicPartition("orders", 1), 5, ()
    )
    assert parse_key(layout, "archive/orders/1/other+5.json") is None


def test_listing_prefix_stops_at_the_first_placeholder() -> None:
    assert listing_prefix(layout_for(route())) == "archive/"
    template = route(layout_template="data/{topic}/{partition}/{offset}.{ext}")
    assert listing_prefix(layout_for(template)) == "archive/data/"


@settings(max_examples=200)
@given(routes_and_values(), TPS, OFFSET, TIMESTAMP, st.integers(1, 10**6))
def test_parse_reads_a_rewritten_key_as_the_key_it_replaced(
    case: tuple[Route, tuple[str | None, ...]],
    tp: TopicPartition,
    offset: int,
    timestamp_ms: int | None,
    gen: int,
) -> None:
    """compact's objects (``.g<N>`` where ``key.suffix`` goes, as write/rewrite keys them)
    read as the partition, first offset and group of the object they replace."""
    r, values = case
    _accepted(r)
    assume(not is_truncated(safe_segment(tp.topic)))
    rewritten = dataclasses.replace(
        r, layout=dataclasses.replace(r.layout, key_suffix=r.layout.key_suffix + f".g{gen}")
    )
    key = object_key(r, tp, offset, values, timestamp_ms=timestamp_ms)
    new = object_key(rewritten, tp, offset, values, timestamp_ms=timestamp_ms)
    assume(new != key)  # (a template without {suffix}: the engine refuses it)
    # (a segment cut and hashed to fit 255 bytes is not read back, as above)
    assume(not any(is_truncated(segment) for segment in new.split("/")))
    group = object_group(r, values, timestamp_ms=timestamp_ms)
    assert parse_key(layout_for(r), new) == ParsedKey(tp, offset, group)


@settings(max_examples=200)
@given(routes_and_values(), TPS, OFFSET, TIMESTAMP, st.integers(1, 10**6), st.integers(0, 2**50))
def test_parse_reads_an_attempts_own_key_as_its_planned_key(
    case: tuple[Route, tuple[str | None, ...]],
    tp: TopicPartition,
    offset: int,
    timestamp_ms: int | None,
    epoch: int,
    attempt: int,
) -> None:
    """commit_protocol=log's objects of formats with no place for a stamp
    (``.e<epoch>a<attempt>`` before the extension, ``writer.attempt_key``) read as the
    partition, first offset and group of their planned key: ``cat``'s seek and the readers'
    groups depend on it (a PARTITIONBY partition's objects are merged by group and offset)."""
    r, values = case
    _accepted(r)
    assume(not is_truncated(safe_segment(tp.topic)))
    key = object_key(r, tp, offset, values, timestamp_ms=timestamp_ms)
    # (attempt_key goes after the file name's first dot: a template that puts a dotted topic
    # there is not read back; left open, see issue 37's note)
    assume("." not in tp.topic)
    own = attempt_key(key, epoch, attempt)
    assume(not any(is_truncated(segment) for segment in own.split("/")))
    group = object_group(r, values, timestamp_ms=timestamp_ms)
    assert parse_key(layout_for(r), own) == ParsedKey(tp, offset, group)


@settings(max_examples=200)
@given(
    routes_and_values(),
    TPS,
    OFFSET,
    TIMESTAMP,
    st.integers(1, 10**6),
    st.integers(1, 10**6),
    st.integers(0, 2**50),
)
def test_parse_reads_a_rewrite_attempts_own_key_as_the_key_it_replaced(
    case: tuple[Route, tuple[str | None, ...]],
    tp: TopicPartition,
    offset: int,
    timestamp_ms: int | None,
    gen: int,
    epoch: int,
    attempt: int,
) -> None:
    """compact's objects of formats with no place for a stamp (``.g<N>`` where ``key.suffix``
    goes, then the attempt: ``writer.attempt_key``) read as the partition, first offset and
    group of the object they replace."""
    r, values = case
    _accepted(r)
    assume(not is_truncated(safe_segment(tp.topic)))
    assume("." not in tp.topic)  # (as above: attempt_key goes after the name's first dot)
    rewritten = dataclasses.replace(
        r, layout=dataclasses.replace(r.layout, key_suffix=r.layout.key_suffix + f".g{gen}")
    )
    key = object_key(r, tp, offset, values, timestamp_ms=timestamp_ms)
    try:
        new = object_key(rewritten, tp, offset, values, timestamp_ms=timestamp_ms)
    except LayoutError:  # (the suffix leaves too few of S3's 1,024 bytes: refused up front)
        reject()
    assume(new != key)  # (a template without {suffix}: the engine refuses it)
    own = attempt_key(new, epoch, attempt)
    assume(not any(is_truncated(segment) for segment in own.split("/")))
    group = object_group(r, values, timestamp_ms=timestamp_ms)
    assert parse_key(layout_for(r), own) == ParsedKey(tp, offset, group)

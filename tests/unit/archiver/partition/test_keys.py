"""object_key: one example per layout, and the properties every key has."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import assume, example, given, reject, settings
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.partition import keys
from kafka_archive.archiver.partition.keys import object_group, object_key
from kafka_archive.archiver.partition.layouts import LayoutError, layout_for
from kafka_archive.archiver.partition.values import HIVE_NULL_SEGMENT, MISSING_SEGMENT
from kafka_archive.kcql.plan import FieldRef, Format, KeyNaming, Padding, Route, Source

from .partition_helpers import COUNTRY, KIND, T, route

TP = TopicPartition("orders", 3)
PB = (COUNTRY, KIND)
VALUES = ("DE", "retail")
TEMPLATE = "{topic}/{date}/{field:country}/{field:kind}/{partition}-{offset}.{ext}"

# The examples of the keys module docstring: description -> (route, values).
EXAMPLES: dict[str, tuple[Route, tuple[str | None, ...]]] = {
    "lenses, no PARTITIONBY": (route(), ()),
    "lenses, PARTITIONBY (WITHPARTITIONER=Values, the default)": (route(partition_by=PB), VALUES),
    "lenses, WITHPARTITIONER=KeysAndValues": (route(partition_by=PB, include_keys=True), VALUES),
    "confluent, no PARTITIONBY": (route(layout="confluent"), ()),
    "confluent, PARTITIONBY": (route(partition_by=PB, layout="confluent"), VALUES),
    "hive, no PARTITIONBY": (route(layout="hive"), ()),
    "hive, PARTITIONBY": (route(partition_by=PB, layout="hive"), VALUES),
    f"template {TEMPLATE}": (route(partition_by=PB, layout_template=TEMPLATE), VALUES),
    "lenses, PARTITIONBY, the record lacks country": (route(partition_by=PB), (None, "retail")),
    "lenses, KeysAndValues, the record lacks country": (
        route(partition_by=PB, include_keys=True),
        (None, "retail"),
    ),
    "lenses, PARTITIONBY, country is ../../etc": (route(partition_by=PB), ("../../etc", "retail")),
}


def _docstring_examples() -> dict[str, str]:
    doc = keys.__doc__ or ""
    pairs = re.findall(r"^    (\S.*)\n        (\S+)$", doc, flags=re.MULTILINE)
    return dict(pairs)


def test_docstring_lists_every_example() -> None:
    assert set(_docstring_examples()) == set(EXAMPLES)


@pytest.mark.parametrize("description", sorted(EXAMPLES))
def test_docstring_example(description: str) -> None:
    r, values = EXAMPLES[description]
    assert object_key(r, TP, 42, values, timestamp_ms=T) == _docstring_examples()[description]


def test_the_runtime_call_without_partitionby() -> None:
    # The call the runtime makes today: positional, no timestamp.
    assert object_key(route(), TP, 42, ()) == "archive/orders/3/000000000042.json"
    assert object_key(route(prefix=""), TP, 42, ()) == "orders/3/000000000042.json"


def test_extension_follows_the_format() -> None:
    assert object_key(route(fmt=Format.PARQUET), TP, 0).endswith("/000000000000.parquet")
    assert object_key(route(fmt=Format.CSV_WITHHEADERS), TP, 0).endswith(".csv")


# ------------------------------------------------------------------------------------------
# Groups: which records share an open object.


def test_lenses_values_group_ignores_record_time() -> None:
    r = route(partition_by=PB)
    assert object_group(r, VALUES, timestamp_ms=T) == object_group(r, VALUES, timestamp_ms=0)
    assert object_group(r, VALUES) != object_group(r, ("FR", "retail"))


def test_hive_group_is_the_hour_of_the_record() -> None:
    r = route(layout="hive")
    hour = 3_600_000
    start = T - T % hour
    assert object_group(r, (), timestamp_ms=start) == object_group(
        r, (), timestamp_ms=start + hour - 1
    )
    assert object_group(r, (), timestamp_ms=start) != object_group(r, (), timestamp_ms=start + hour)


def test_date_field_from_timestamp_or_from_value() -> None:
    r = route(partition_by=(FieldRef(Source.DATE, ("uuuu-MM-dd",)),))
    by_timestamp = object_key(r, TP, 7, (None,), timestamp_ms=T)
    assert by_timestamp == "archive/2024-05-06/orders(3_000000000007).json"
    assert object_key(r, TP, 7, (str(T),)) == by_timestamp
    assert object_key(r, TP, 7, (None,)) == f"archive/{MISSING_SEGMENT}/orders(3_000000000007).json"
    with pytest.raises(ValueError, match="epoch milliseconds"):
        object_key(r, TP, 7, ("2024-05-06",))


def test_hive_without_a_timestamp_uses_the_hive_null() -> None:
    key = object_key(route(layout="hive"), TP, 1)
    assert f"/year={HIVE_NULL_SEGMENT}/month={HIVE_NULL_SEGMENT}/" in key


def test_values_must_match_partitionby() -> None:
    with pytest.raises(ValueError, match="expected 2 PARTITIONBY values, got 1"):
        object_key(route(partition_by=PB), TP, 0, ("DE",))


@pytest.mark.parametrize(
    ("tp", "offset", "message"),
    [
        (TopicPartition("", 0), 0, "empty topic"),
        (TopicPartition("t", -1), 0, "partition -1"),
        (TopicPartition("t", 0), -1, "offset -1"),
        (TopicPartition("t", 0), 2**63, "offset"),
    ],
)
def test_out_of_range_inputs(tp: TopicPartition, offset: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        object_key(route(), tp, offset)


# ------------------------------------------------------------------------------------------
# Properties.

NASTY_VALUE = st.one_of(
    st.none(),
    st.sampled_from(["", ".", "..", "/", "../../x", "\x00", "__missing__", "(missing)"]),
    st.sampled_from(["x" * 5000, "é" * 2000, "😀" * 600, "/" * 1000]),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=300),
)
PREFIX = st.sampled_from(["archive", "a/b/c", "x" * 300, "données/été", "p" * 600])
DATE_FIELD = FieldRef(Source.DATE, ("uuuu-MM-dd'T'HH",))
FIELDS = st.lists(
    st.sampled_from(
        [
            COUNTRY,
            KIND,
            DATE_FIELD,
            FieldRef(Source.KEY, ()),
            FieldRef(Source.VALUE, ("a", "b")),
            FieldRef(Source.HEADER, ("x y/z",)),
        ]
    ),
    max_size=4,
    unique=True,
)
TEMPLATES = st.sampled_from(
    [
        None,
        "{prefix}/{topic}/{year}/{month}/{day}/{partition}/{offset}.{ext}",
        "{topic}+{partition}+{offset}.{ext}",
        "dt={date}/h={hour}/{topic}/{partition}/{offset}.{ext}",
    ]
)
NAMING = st.builds(
    KeyNaming,
    padding=st.sampled_from([Padding.LEFT, Padding.NONE]),
    padding_char=st.just("0"),
    offset_width=st.integers(1, 20),
    partition_width=st.integers(0, 10),
)


@st.composite
def routes(draw: st.DrawFn, value_field: bool = False) -> Route:
    """A route of any layout; with ``value_field`` its first PARTITIONBY field is not a date."""
    fields = tuple(draw(FIELDS))
    if value_field:
        first = draw(st.sampled_from([COUNTRY, KIND, FieldRef(Source.KEY, ())]))
        fields = (first, *(f for f in fields if f != first))
    template = draw(TEMPLATES)
    properties: dict[str, str] = {}
    if template is not None:
        # Every PARTITIONBY field must appear in a template.
        parts = [f"{{field:{f.source.value}{''.join('.' + p for p in f.path)}}}" for f in fields]
        head = "{prefix}/" if template.startswith("{prefix}/") else ""
        properties["layout.template"] = head + "/".join([*parts, template.removeprefix(head)])
    else:
        properties["layout"] = draw(st.sampled_from(["lenses", "confluent", "hive"]))
    if draw(st.booleans()):
        properties["key.suffix"] = draw(st.sampled_from(["-v2", "_x%y", "é"]))
        if template is not None:
            properties["layout.template"] = properties["layout.template"].replace(
                ".{ext}", "{suffix}.{ext}"
            )
    if draw(st.booleans()):
        properties["partition.timezone"] = draw(
            st.sampled_from(["UTC", "Europe/Paris", "Asia/Kathmandu", "America/St_Johns"])
        )
    return route(
        prefix=draw(PREFIX),
        topic="*",
        partition_by=fields,
        include_keys=draw(st.booleans()),
        # TEXT and BYTES values have no fields to partition by (KCQL refuses it).
        fmt=draw(
            st.sampled_from(
                [
                    f
                    for f in Format
                    if f not in (Format.TEXT, Format.BYTES)
                    or not any(r.source is Source.VALUE for r in fields)
                ]
            )
        ),
        naming=draw(NAMING),
        props=properties,
    )


TOPIC = st.one_of(
    st.from_regex(r"[A-Za-z0-9._-]{1,249}", fullmatch=True),
    st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=300),
)
TPS = st.builds(TopicPartition, TOPIC, st.integers(0, 2**31 - 1))
OFFSET = st.integers(0, 2**63 - 1)
TIMESTAMP = st.one_of(st.none(), st.integers(-(2**62), 2**62), st.just(T))


def _control(char: str) -> bool:
    return ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F


def _accepted(r: Route) -> None:
    """Skip the generated routes whose prefix is too long for their layout."""
    try:
        layout_for(r)
    except LayoutError as exc:
        # The only refusal the generator can provoke (tested in test_partition_layouts).
        assert "1024-byte limit" in str(exc)
        reject()


@st.composite
def routes_and_values(draw: st.DrawFn) -> tuple[Route, tuple[str | None, ...]]:
    r = draw(routes())
    return r, tuple(draw(_value_of(ref)) for ref in r.partition_by)


def _value_of(ref: FieldRef) -> st.SearchStrategy[str | None]:
    """A raw value; for a ``_date`` field the record timestamp, as the runtime passes it."""
    if ref.source is Source.DATE:
        return st.one_of(st.none(), st.integers(-(2**62), 2**62).map(str))
    return NASTY_VALUE


LONG = route(partition_by=PB, prefix="p" * 300, layout="hive", key_suffix="%" * 30)


@settings(max_examples=300)
@given(routes_and_values(), TPS, OFFSET, TIMESTAMP)
@example(
    (LONG, ("x" * 5000, "/" * 5000)), TopicPartition("_" + "t" * 248, 2**31 - 1), 2**63 - 1, None
)
@example((route(partition_by=PB), ("..", ".")), TopicPartition("..", 0), 0, None)
def test_every_key_stays_below_the_prefix_and_within_s3_limits(
    case: tuple[Route, tuple[str | None, ...]],
    tp: TopicPartition,
    offset: int,
    timestamp_ms: int | None,
) -> None:
    r, values = case
    _accepted(r)
    key = object_key(r, tp, offset, values, timestamp_ms=timestamp_ms)
    assert key.startswith(r.target.prefix + "/")
    segments = key.split("/")
    for segment in segments:
        assert segment not in ("", ".", "..")
    for segment in segments[len(r.target.prefix.split("/")) :]:
        assert not segment.startswith((".", "_"))  # hidden to Hadoop readers; state namespace
    assert not any(_control(c) for c in key)
    assert len(key.encode("utf-8")) <= 1024


@given(routes(), TPS, TIMESTAMP, st.data())
def test_keys_sort_in_start_offset_order(
    r: Route, tp: TopicPartition, timestamp_ms: int | None, data: st.DataObject
) -> None:
    naming = KeyNaming(Padding.LEFT, "0", offset_width=r.naming.offset_width, partition_width=3)
    r = dataclasses.replace(r, naming=naming)
    _accepted(r)
    values = tuple(data.draw(_value_of(ref)) for ref in r.partition_by)
    limit = min(10**naming.offset_width - 1, 2**63 - 1)
    a = data.draw(st.integers(0, limit))
    b = data.draw(st.integers(0, limit))
    assume(a != b)
    key_a = object_key(r, tp, a, values, timestamp_ms=timestamp_ms)
    key_b = object_key(r, tp, b, values, timestamp_ms=timestamp_ms)
    assert (key_a < key_b) == (a < b)


@pytest.mark.parametrize(
    "r",
    [
        route(),
        route(partition_by=PB),
        route(partition_by=PB, include_keys=True),
        route(layout="confluent"),
        route(layout="hive", partition_by=PB),
        route(naming=KeyNaming(Padding.NONE)),
        route(naming=KeyNaming(Padding.NONE), partition_by=PB),
        route(naming=KeyNaming(Padding.NONE), layout="confluent"),
        route(naming=KeyNaming(Padding.NONE, partition_width=2), layout="hive"),
        route(naming=KeyNaming(Padding.LEFT, "x", offset_width=2), partition_by=PB),
        route(layout_template="{topic}+{partition}+{offset}.{ext}"),
        route(naming=KeyNaming(Padding.NONE), layout_template="{topic}({partition}_{offset})"),
    ],
    ids=lambda r: layout_for(r).template,
)
def test_distinct_partitions_and_offsets_never_share_a_key(r: Route) -> None:
    # Every small combination, so that "1" + "23" versus "12" + "3" style collisions between
    # variable-width numbers (and topics ending in digits) would show.
    values = VALUES[: len(r.partition_by)]
    seen: dict[str, tuple[str, int, int]] = {}
    for topic in ("a", "a1", "1", "a-1", "a.1"):
        for partition in range(13):
            for offset in range(130):
                k = object_key(r, TopicPartition(topic, partition), offset, values, timestamp_ms=T)
                assert seen.setdefault(k, (topic, partition, offset)) == (topic, partition, offset)


REAL_VALUE = st.one_of(
    st.sampled_from(["__missing__", "(missing)", "(empty)", "", HIVE_NULL_SEGMENT]),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=300),
)


@given(routes(value_field=True), TPS, OFFSET, REAL_VALUE, st.data())
def test_a_missing_field_never_shares_a_key_with_a_real_value(
    r: Route, tp: TopicPartition, offset: int, real: str, data: st.DataObject
) -> None:
    _accepted(r)
    others = [data.draw(_value_of(ref)) for ref in r.partition_by[1:]]
    with_real: list[str | None] = [real, *others]
    missing: list[str | None] = [None, *others]
    assert object_key(r, tp, offset, with_real, timestamp_ms=T) != object_key(
        r, tp, offset, missing, timestamp_ms=T
    )

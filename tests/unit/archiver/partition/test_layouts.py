"""layout_for: choosing and validating a route's layout; the options each layout honours."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.partition.keys import object_key
from kafka_archive.archiver.partition.layouts import LayoutError, LayoutKind, layout_for
from kafka_archive.archiver.partition.values import HIVE_NULL_SEGMENT, MISSING_SEGMENT
from kafka_archive.kcql import KcqlError
from kafka_archive.kcql.plan import FieldRef, KeyNaming, Padding, Source

from .partition_helpers import COUNTRY, KIND, T, route

TP = TopicPartition("orders", 3)
PB = (COUNTRY, KIND)


def key(
    *,
    values: tuple[str | None, ...] = (),
    timestamp_ms: int | None = T,
    offset: int = 42,
    **kwargs: Any,
) -> str:
    return object_key(route(**kwargs), TP, offset, values, timestamp_ms=timestamp_ms)


@dataclass(frozen=True)
class Refusal:
    """A refused layout, by the KCQL compiler or when the archiver builds it."""

    property: str | None
    message: str
    hint: str | None
    text: str

    def __str__(self) -> str:
        return self.text


def error(**kwargs: Any) -> Refusal:
    try:
        layout_for(route(**kwargs))
    except LayoutError as exc:
        return Refusal(exc.property, exc.message, exc.hint, str(exc))
    except KcqlError as exc:
        return Refusal(exc.setting, exc.message, exc.hint, str(exc))
    raise AssertionError(f"not refused: {kwargs}")


# ------------------------------------------------------------------------------------------
# Choosing a layout.


@pytest.mark.parametrize(
    ("properties", "kind"),
    [
        ({}, LayoutKind.LENSES),
        ({"layout": "confluent"}, LayoutKind.CONFLUENT),
        ({"layout": "Hive"}, LayoutKind.HIVE),
        ({"layout.template": "{topic}/{partition}/{offset}"}, LayoutKind.TEMPLATE),
        (
            {"layout": "template", "layout.template": "{topic}/{partition}/{offset}"},
            LayoutKind.TEMPLATE,
        ),
    ],
)
def test_layout_property(properties: dict[str, str], kind: LayoutKind) -> None:
    assert layout_for(route(props=properties)).kind is kind


def test_unknown_layout_suggests_the_closest() -> None:
    err = error(layout="hiv")
    assert err.property == "layout"
    assert err.hint == "Did you mean 'hive'?"


def test_template_layout_needs_a_template() -> None:
    assert error(layout="template").property == "layout.template"


def test_template_with_another_layout_is_refused() -> None:
    err = error(layout="hive", layout_template="{topic}/{partition}/{offset}")
    assert err.property == "layout"


# ------------------------------------------------------------------------------------------
# Options of the presets.


def test_key_suffix_goes_before_the_extension_and_is_encoded() -> None:
    assert key(key_suffix="-v2").endswith("/orders/3/000000000042-v2.json")
    assert key(partition_by=PB, values=("DE", "x"), key_suffix="_a%b") == (
        "archive/DE/x/orders(3_000000000042)_a%25b.json"
    )
    assert key(layout="confluent", key_suffix="-v2").endswith("/orders+3+000000000042-v2.json")


@pytest.mark.parametrize(
    ("naming", "tail"),
    [
        (KeyNaming(offset_width=20, partition_width=3), "orders(003_00000000000000000042).json"),
        (KeyNaming(Padding.NONE), "orders(3_42).json"),
        (KeyNaming(Padding.LEFT, "x", offset_width=5), "orders(3_xxx42).json"),
        (KeyNaming(Padding.RIGHT, "x", offset_width=5), "orders(3_42xxx).json"),
    ],
)
def test_padding(naming: KeyNaming, tail: str) -> None:
    assert key(partition_by=(COUNTRY,), values=("DE",), naming=naming) == f"archive/DE/{tail}"


def test_offsets_wider_than_the_padding_are_written_whole() -> None:
    assert key(offset=1234567, naming=KeyNaming(offset_width=3)).endswith("/1234567.json")


@pytest.mark.parametrize(
    ("naming", "property"),
    [
        (KeyNaming(Padding.RIGHT, "0"), "padding.type"),
        (KeyNaming(Padding.LEFT, "5"), "padding.char"),
        (KeyNaming(Padding.LEFT, "/"), "padding.char"),
        (KeyNaming(Padding.LEFT, " "), "padding.char"),
    ],
)
def test_padding_that_could_merge_two_offsets_is_refused(naming: KeyNaming, property: str) -> None:
    # RightPad '0' writes offsets 42 and 420 as the same 420000000000.
    assert error(naming=naming).property == property


def test_padding_char_that_hides_the_end_of_the_partition_is_refused() -> None:
    # "orders(1__5)": partition 1 then offset "_5", or partition "1_" then offset 5?
    err = error(partition_by=PB, naming=KeyNaming(Padding.LEFT, "_", partition_width=2))
    assert "{partition}" in err.message


def test_hive_uses_the_route_time_zone() -> None:
    assert "/day=06/hour=13/" in key(layout="hive")
    assert "/day=06/hour=15/" in key(layout="hive", partition_timezone="Europe/Paris")
    # UTC+14: 13:53Z is 03:53 the next day.
    assert "/day=07/hour=03/" in key(layout="hive", partition_timezone="Pacific/Kiritimati")


def test_unknown_time_zone_is_a_layout_error() -> None:
    err = error(layout="hive", partition_timezone="Mars/Olympus")
    assert err.property == "partition.timezone"


@pytest.mark.parametrize(
    ("field", "name"),
    [
        (FieldRef(Source.HEADER, ("country",)), "country"),
        (FieldRef(Source.VALUE, ("customer", "address", "zip")), "zip"),
        (FieldRef(Source.KEY, ()), "key"),
        (FieldRef(Source.KEY, ("id",)), "id"),
        (FieldRef(Source.TOPIC, ()), "topic"),
        (FieldRef(Source.PARTITION, ()), "partition"),
        (FieldRef(Source.DATE, ("uuuu",)), "year"),
        (FieldRef(Source.DATE, ("yyyy",)), "year"),
        (FieldRef(Source.DATE, ("LL",)), "month"),
        (FieldRef(Source.DATE, ("dd",)), "day"),
        (FieldRef(Source.DATE, ("HH",)), "hour"),
        (FieldRef(Source.DATE, ("uuuu-MM-dd",)), "date"),
        (FieldRef(Source.HEADER, ("_x y",)), "%5Fx%20y"),
    ],
)
def test_keys_and_values_names(field: FieldRef, name: str) -> None:
    k = key(partition_by=(field,), include_keys=True, values=("v",))
    assert k.split("/")[1].split("=")[0] == name


def test_date_fields_in_keys_and_values() -> None:
    fields = tuple(FieldRef(Source.DATE, (p,)) for p in ("uuuu", "MM", "dd", "HH"))
    assert key(partition_by=fields, include_keys=True, values=(None,) * 4) == (
        "archive/year=2024/month=05/day=06/hour=13/orders(3_000000000042).json"
    )


def test_week_based_year_is_refused_when_planning() -> None:
    err = error(partition_by=(FieldRef(Source.DATE, ("YYYY",)),))
    assert "week-based year" in err.message


def test_missing_fallback_depends_on_the_segment_form() -> None:
    template = "{topic}/c={field:country}/{field:kind}/{partition}/{offset}.{ext}"
    assert key(partition_by=PB, layout_template=template, values=(None, None)) == (
        f"archive/orders/c={HIVE_NULL_SEGMENT}/{MISSING_SEGMENT}/3/000000000042.json"
    )
    assert key(layout="confluent", partition_by=PB, values=(None, "x")) == (
        f"archive/orders/country={HIVE_NULL_SEGMENT}/kind=x/orders+3+000000000042.json"
    )


# ------------------------------------------------------------------------------------------
# Templates.


def test_prefix_placeholder_is_optional() -> None:
    a = key(layout_template="{prefix}/{topic}/{partition}/{offset}.{ext}")
    b = key(layout_template="{topic}/{partition}/{offset}.{ext}")
    assert a == b == "archive/orders/3/000000000042.json"
    assert key(prefix="", layout_template="{prefix}/{topic}/{partition}/{offset}.{ext}") == (
        "orders/3/000000000042.json"
    )


def test_template_time_placeholders() -> None:
    template = "{topic}/dt={date}/{hour}{minute}{second}/{partition}-{offset}{suffix}.{ext}"
    assert key(layout_template=template, key_suffix="~x") == (
        "archive/orders/dt=2024-05-06/135300/3-000000000042%7Ex.json"
    )
    assert key(layout_template=template, key_suffix="-x", timestamp_ms=None) == (
        f"archive/orders/dt={HIVE_NULL_SEGMENT}/"
        f"{MISSING_SEGMENT}{MISSING_SEGMENT}{MISSING_SEGMENT}/3-000000000042-x.json"
    )


def test_template_fields_by_name_or_path() -> None:
    fields = (FieldRef(Source.KEY, ("id",)), FieldRef(Source.VALUE, ("a", "id")))
    template = "{field:_key.id}/{field:a.id}/{topic}/{partition}/{offset}"
    assert key(partition_by=fields, layout_template=template, values=("1", "2")) == (
        "archive/1/2/orders/3/000000000042"
    )


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{topic}/{offset}.{ext}", "{partition} is missing"),
        ("{topic}/{partition}.{ext}", "{offset} is missing"),
        ("{partition}/{offset}", "{topic} is missing"),
        ("{topic}/{partiton}/{offset}", "Did you mean {partition}?"),
        ("{field:country}/{topic}{partition}/{offset}", "cannot tell where {topic} ends"),
        # Topics may contain '-': "a-1" + "2" and "a" + "1-2" would collide.
        ("{field:country}/{topic}-{partition}-{offset}", "cannot tell where {topic} ends"),
        ("{field:country}/{topic}/{partition}{offset}", "cannot tell where {partition} ends"),
        ("{topic}/{field:country}{partition}/{offset}", "cannot tell where {field} ends"),
        ("{topic}//{partition}/{offset}", "empty path segment"),
        ("/{topic}/{partition}/{offset}", "empty path segment"),
        ("{topic}/{partition}/{offset}/", "empty path segment"),
        (".hidden/{topic}/{partition}/{offset}", "may not start with '.'"),
        ("{topic}/_tmp/{partition}/{offset}", "may not start with '_'"),
        ("{topic}/a b/{partition}/{offset}", "may not contain ' '"),
        ("{topic}/a\\b/{partition}/{offset}", "may not contain"),
        ("{topic}/{partition}/{offset}/{prefix}", "may only open"),
        ("{prefix}{topic}/{partition}/{offset}", "must be followed by '/'"),
        ("{topic}/{field:county}/{partition}/{offset}", "Did you mean {field:country}?"),
        ("{topic}/{partition}/{offset}", "PARTITIONBY _header.country not used"),
        ("{topic}/{field:country}/{partition}/{offset}{", "may not contain '{'"),
    ],
)
def test_template_errors(template: str, message: str) -> None:
    err = error(partition_by=(COUNTRY,), layout_template=template)
    assert err.property == "layout.template"
    assert message in str(err)


def test_template_ambiguous_field_name() -> None:
    fields = (FieldRef(Source.KEY, ("id",)), FieldRef(Source.HEADER, ("id",)))
    template = "{field:id}/{field:_header.id}/{topic}/{partition}/{offset}"
    err = error(partition_by=fields, layout_template=template)
    assert "ambiguous (_key.id, _header.id)" in err.message


def test_template_suffix_must_be_placed() -> None:
    err = error(layout_template="{topic}/{partition}/{offset}.{ext}", key_suffix="-v2")
    assert "{suffix}" in err.message


# ------------------------------------------------------------------------------------------
# The prefix and S3's key length limit.


@pytest.mark.parametrize("prefix", ["a//b", "a/./b", "a/../b", "a\x00b"])
def test_bad_prefixes(prefix: str) -> None:
    assert "prefix" in error(prefix=prefix).message


def test_prefix_too_long_for_the_layout() -> None:
    err = error(prefix="p" * 1000, partition_by=PB)
    assert "1024-byte limit" in err.message


@pytest.mark.parametrize(
    "properties",
    [{}, {"include_keys": True}, {"layout": "confluent"}, {"layout": "hive"}],
)
def test_at_the_longest_accepted_prefix_keys_still_fit(properties: dict[str, Any]) -> None:
    longest = None
    for length in range(1024, 0, -1):
        try:
            layout_for(route(prefix="p" * length, partition_by=PB, **properties))
        except LayoutError:
            continue
        longest = length
        break
    assert longest is not None and longest > 100
    r = route(prefix="p" * longest, partition_by=PB, **properties)
    worst = TopicPartition("t" * 249, 2**31 - 1)
    k = object_key(r, worst, 2**63 - 1, ("é" * 2000, "/" * 2000), timestamp_ms=None)
    assert len(k.encode()) <= 1024
    # And the cap is what makes it fit: without cutting, the values would not.
    assert layout_for(r).value_max_bytes < 255 or len(k.encode()) > 1024 - 255

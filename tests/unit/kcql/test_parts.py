"""The compilers of a statement's parts, called directly (``kcql.parse`` tests them through
the whole statement in test_compile.py): each check's error, its span and its label."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.kcql.errors import KcqlSemanticError
from kafka_archive.kcql.fields import Use, field_ref
from kafka_archive.kcql.iceberg_table import iceberg_time
from kafka_archive.kcql.plan import FieldRef, Format, Source, Span, TimeTransform
from kafka_archive.kcql.properties import Settings
from kafka_archive.kcql.storeas import compile_format
from kafka_archive.kcql.syntax import Path, Word
from kafka_archive.kcql.targets import check_bucket, check_prefix, compile_topic

SPAN = Span(1, 13, 1, 20)


def _label(call: object) -> str:
    assert callable(call)
    with pytest.raises(KcqlSemanticError) as caught:
        call()
    assert caught.value.span == SPAN
    return str(caught.value.label)


@pytest.mark.parametrize(
    "bucket",
    [
        "ab",
        "a" * 64,
        "Bucket",
        "my_bucket",
        "-bucket",
        "my..bucket",
        "192.168.1.2",
        "xn--b",
        "b-s3alias",
    ],
)
def test_a_bucket_against_s3s_naming_rules_is_refused_at_its_span(bucket: str) -> None:
    assert _label(lambda: check_bucket(bucket, SPAN)) == "bad-bucket"


@given(st.from_regex(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]", fullmatch=True))
def test_any_name_of_letters_digits_and_inner_dashes_is_a_bucket(bucket: str) -> None:
    if not bucket.startswith(("xn--", "sthree-", "amzn-s3-demo-")) and not bucket.endswith(
        ("-s3alias", "--ol-s3", "--x-s3", "--table-s3")
    ):
        check_bucket(bucket, SPAN)


def test_a_prefix_is_clean_segments() -> None:
    assert check_prefix("a/b.c/d", SPAN) == "a/b.c/d"
    for bad in ("", "a//b", "/a", "a/", "a/../b", "a/./b", "a\x01b"):
        assert _label(lambda bad=bad: check_prefix(bad, SPAN)) == "bad-prefix"


def test_a_topic_is_a_kafka_name_or_all_topics() -> None:
    assert compile_topic(Word("orders.v1", False, SPAN)) == "orders.v1"
    assert compile_topic(Word("*", False, SPAN)) == "*"
    for bad in ("..", "a b", "x" * 250):
        assert _label(lambda bad=bad: compile_topic(Word(bad, False, SPAN))) == "bad-topic"


def test_a_format_by_name_in_any_case() -> None:
    assert compile_format(None) is Format.JSON
    assert compile_format(Word("parquet", True, SPAN)) is Format.PARQUET
    assert _label(lambda: compile_format(Word("PARQUT", False, SPAN))) == "unknown-format"


def _path(*names: str) -> Path:
    return Path(tuple(Word(n, False, SPAN) for n in names), SPAN)


def test_a_path_reads_a_record_part_or_a_value_field() -> None:
    assert field_ref(_path("_key", "id"), Use.SELECT) == FieldRef(Source.KEY, ("id",), SPAN)
    assert field_ref(_path("a", "b"), Use.SELECT) == FieldRef(Source.VALUE, ("a", "b"), SPAN)
    assert field_ref(_path("_", "topic"), Use.SELECT) == FieldRef(Source.TOPIC, (), SPAN)
    assert _label(lambda: field_ref(_path("_offset"), Use.PARTITIONBY)) == "source-not-allowed"
    assert _label(lambda: field_ref(_path("_date", "uuuu"), Use.SELECT)) == "source-not-allowed"


def test_iceberg_time_is_the_day_or_hour_the_date_patterns_name() -> None:
    def dates(*patterns: str) -> list[FieldRef]:
        return [FieldRef(Source.DATE, (p,), SPAN) for p in patterns]

    assert iceberg_time(Settings(), []) is None
    assert iceberg_time(Settings(), dates("uuuu-MM-dd")) is TimeTransform.DAY
    assert iceberg_time(Settings(), dates("uuuu", "MM", "dd", "HH")) is TimeTransform.HOUR
    assert _label(lambda: iceberg_time(Settings(), dates("uuuu-MM"))) == "iceberg-partition"

"""safe_segment: any value becomes one safe, reversible, bounded key segment."""

from __future__ import annotations

import hashlib
from urllib.parse import unquote

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kafka_archive.archiver.partition.values import (
    EMPTY_SEGMENT,
    HIVE_NULL_SEGMENT,
    MIN_SEGMENT_BYTES,
    MISSING_SEGMENT,
    SEGMENT_MAX_BYTES,
    decode_segment,
    escape_text,
    is_truncated,
    safe_segment,
)

# Every code point, lone surrogates included.
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=400)
NASTY = st.sampled_from(
    [
        "",
        ".",
        "..",
        "...",
        "/",
        "../../x",
        "a/../b",
        "\x00",
        "\n",
        "\x7f",
        "\x85",
        "\u2028",
        "\u202e",
        "\ufeff",
        "\ud800",
        "%",
        "%2F",
        "~",
        "_",
        "__missing__",
        MISSING_SEGMENT,
        HIVE_NULL_SEGMENT,
        EMPTY_SEGMENT,
        "x" * 5000,
        "é" * 1000,
        "😀" * 400,
    ]
)
VALUES = st.one_of(NASTY, ANY_TEXT)
CAPS = st.integers(min_value=MIN_SEGMENT_BYTES, max_value=300)


@pytest.mark.parametrize(
    ("value", "segment"),
    [
        ("DE", "DE"),
        ("2024-05-06", "2024-05-06"),
        ("a.b_c-d", "a.b_c-d"),
        ("../../x", "%2E.%2F..%2Fx"),
        (".", "%2E"),
        ("..", "%2E."),
        ("a/b c", "a%2Fb%20c"),
        ("_internal", "%5Finternal"),
        ("a_b", "a_b"),
        ("München", "München"),
        ("東京", "東京"),
        ("a\x00b\nc", "a%00b%0Ac"),
        ("50%", "50%25"),
        ("k=v&x+y", "k%3Dv%26x%2By"),
        ("\x85", "%C2%85"),
        ("\u202e", "%E2%80%AE"),
        ("\ud800", "%ED%A0%80"),
        ("", EMPTY_SEGMENT),
        ("__missing__", "%5F_missing__"),
        (MISSING_SEGMENT, "%28missing%29"),
        (HIVE_NULL_SEGMENT, "%5F_HIVE_DEFAULT_PARTITION__"),
    ],
)
def test_examples(value: str, segment: str) -> None:
    assert safe_segment(value) == segment
    assert decode_segment(segment) == value


def test_fallbacks_decode_to_none_and_empty() -> None:
    assert decode_segment(MISSING_SEGMENT) is None
    assert decode_segment(HIVE_NULL_SEGMENT) is None
    assert decode_segment(EMPTY_SEGMENT) == ""


def test_long_values_are_cut_and_hashed() -> None:
    value = "x" * 300
    segment = safe_segment(value)
    digest = hashlib.sha256(value.encode()).hexdigest()[:16]
    assert segment == "x" * (SEGMENT_MAX_BYTES - 17) + "~" + digest
    assert len(segment) == SEGMENT_MAX_BYTES
    assert is_truncated(segment)
    with pytest.raises(ValueError, match="too long"):
        decode_segment(segment)
    # A value of exactly the cap is kept whole.
    assert safe_segment("x" * SEGMENT_MAX_BYTES) == "x" * SEGMENT_MAX_BYTES


def test_cut_never_splits_an_escape_or_a_character() -> None:
    segment = safe_segment("/" * 100, max_bytes=40)
    head = segment.split("~")[0]
    assert head == "%2F" * 7  # 21 bytes; an 8th escape would pass 40 - 17
    segment = safe_segment("é" * 100, max_bytes=40)
    assert segment.split("~")[0] == "é" * 11  # 2 bytes each


def test_cap_below_minimum_is_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        safe_segment("x", max_bytes=MIN_SEGMENT_BYTES - 1)


def test_escape_text_keeps_a_leading_underscore() -> None:
    assert escape_text("_v2") == "_v2"
    assert escape_text("/x y") == "%2Fx%20y"


def _assert_safe(segment: str, cap: int) -> None:
    assert segment
    assert segment not in (".", "..")
    assert segment[0] not in "._"
    assert "/" not in segment
    assert "\\" not in segment
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0xA0 for c in segment)
    assert len(segment.encode("utf-8")) <= cap  # also: valid UTF-8, no lone surrogate


@given(VALUES, CAPS)
@example("x" * 5000, MIN_SEGMENT_BYTES)
def test_every_segment_is_safe_and_bounded(value: str, cap: int) -> None:
    _assert_safe(safe_segment(value, cap), cap)


@given(VALUES)
def test_decodes_back_to_the_value(value: str) -> None:
    segment = safe_segment(value)
    if not is_truncated(segment):
        assert decode_segment(segment) == value


@given(st.text(st.characters(codec="ascii"), max_size=60))
def test_ascii_values_decode_with_a_plain_url_decoder(value: str) -> None:
    # What Spark, Hive and Athena do with %XX in partition directory names.
    segment = safe_segment(value)
    if segment != EMPTY_SEGMENT:
        assert unquote(segment) == value


@given(st.lists(VALUES, min_size=2, max_size=30, unique=True), CAPS)
def test_injective_on_samples(values: list[str], cap: int) -> None:
    segments = [safe_segment(v, cap) for v in values]
    assert len(set(segments)) == len(values)


@given(VALUES, CAPS)
@example("__missing__", SEGMENT_MAX_BYTES)
@example(MISSING_SEGMENT, SEGMENT_MAX_BYTES)
@example(HIVE_NULL_SEGMENT, SEGMENT_MAX_BYTES)
def test_missing_fallbacks_never_equal_an_encoded_value(value: str, cap: int) -> None:
    segment = safe_segment(value, cap)
    assert segment != MISSING_SEGMENT
    assert segment != HIVE_NULL_SEGMENT
    if value:
        assert segment != EMPTY_SEGMENT


def test_huge_values_are_cut_without_encoding_them_whole() -> None:
    value = "/" * 20_000_000  # a whole record value used as a partition
    segment = safe_segment(value)
    digest = hashlib.sha256(value.encode()).hexdigest()[:16]
    assert segment == "%2F" * 79 + "~" + digest  # 237 bytes of escapes fit before the hash
    assert len(segment) <= SEGMENT_MAX_BYTES


def _raw(data: bytes) -> str:
    """A key's bytes as PARTITIONBY reads them (partition/fields.py: surrogateescape)."""
    return data.decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(
    ("data", "segment"),
    [
        (b"\xff\xfe", "%FF%FE"),  # was %ED%B3%BF%ED%B3%BE: a surrogate's UTF-8 per byte
        (b"a\x80b", "a%80b"),
        (b"\xc3", "%C3"),  # a lead byte without its continuation
        (b"\xc3\xa9\xff", "é%FF"),
    ],
)
def test_bytes_that_are_not_utf8_are_escaped_as_the_bytes(data: bytes, segment: str) -> None:
    """A key of bytes that are not valid UTF-8 is percent-encoded byte for byte, as a URL
    decoder (Hive, Spark, Athena, urllib) gives those bytes back."""
    assert safe_segment(_raw(data)) == segment
    assert decode_segment(segment) == _raw(data)
    assert unquote(segment, errors="surrogateescape") == _raw(data)


def test_segments_written_before_bytes_were_escaped_as_bytes_still_decode() -> None:
    assert decode_segment("%ED%B3%BF%ED%B3%BE") == _raw(b"\xff\xfe")


@given(st.binary(max_size=40))
def test_any_key_bytes_round_trip(data: bytes) -> None:
    segment = safe_segment(_raw(data))
    assert decode_segment(segment) == _raw(data)

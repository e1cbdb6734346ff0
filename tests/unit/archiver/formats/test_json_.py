"""The JSON batch path (``encode_values``) against the value-by-value path
(``pass_through_line``): the same lines, and the same values refused, for any values."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.formats.json_ import encode_values, pass_through_line

# JSON documents as text, with whitespace around and inside (json.dumps' own spacing, and
# indentation: line breaks a value may hold), NaN and integers beyond 64 bits.
documents = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
as_json = st.builds(
    lambda doc, indent, ascii_, pad: (
        pad[0] + json.dumps(doc, indent=indent, ensure_ascii=ascii_) + pad[1]
    ).encode("utf-8", "surrogatepass"),
    documents,
    st.sampled_from([None, 0, 2]),
    st.booleans(),
    st.tuples(*[st.sampled_from(["", " ", "\t", "\n", "\r\n", " \t"])] * 2),
)
# Escaped lone surrogates (json accepts them, orjson and simdjson do not), raw surrogates
# and other invalid UTF-8, byte-order marks, UTF-16, deep nesting, and anything at all.
odd = st.sampled_from(
    [
        b'"\\ud800"',
        b'["\\udc00", 1]',
        b'"\xed\xa0\x80"',
        b'"\xff"',
        b"\xef\xbb\xbf{}",
        '{"a": 1}'.encode("utf-16"),
        b"[" * 1000 + b"]" * 1000,
        b'{"a":' * 1024 + b"1" + b"}" * 1024,
        b"NaN",
        b"-Infinity",
        b"1e400",
        b"18446744073709551616",
        b"",
        b" ",
        b"\x0c1",
        b"1\x00",
        b"\x0b[]\x0b",
    ]
)
value = st.one_of(as_json, odd, st.binary(max_size=20), st.none())


def by_value(values: list[bytes | None]) -> list[bytes] | None:
    try:
        return [pass_through_line(v) for v in values]
    except BadRecordError:
        return None


def by_batch(values: list[bytes | None]) -> list[bytes] | None:
    try:
        encoded = encode_values(values)
    except BadRecordError:
        return None
    return [encoded.data[a:b] for a, b in itertools.pairwise(encoded.ends)]


@settings(max_examples=400, deadline=None)
@given(st.lists(value, max_size=8))
def test_a_batch_is_written_and_refused_as_its_values_one_by_one(
    values: list[bytes | None],
) -> None:
    assert by_batch(values) == by_value(values)


@settings(max_examples=200, deadline=None)
@given(st.lists(as_json, min_size=1, max_size=6))
def test_batches_of_json_text_are_written_as_their_values_one_by_one(values: list[bytes]) -> None:
    assert by_batch(list(values)) == by_value(list(values))


@pytest.mark.parametrize(
    "values",
    [
        [b'{"a": 1}', b"[1, 2]", b'"x"'],  # the common batch: strict, compact, one line
        [b' {"a": 1}', b"2"],
        [b'{"a": 1}\t', b"2"],
        [b'{"a":\n1}', b"2"],
        [b"NaN", b"2"],
        [b"123456789012345678901234567890"],
        [b'"\\ud800"'],
        [None, b"1"],
        [],
    ],
)
def test_examples_of_each_path(values: list[bytes | None]) -> None:
    assert by_batch(values) == by_value(values)

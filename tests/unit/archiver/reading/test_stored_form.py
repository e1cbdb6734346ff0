"""What verify expects of a record (``stored_form``) agrees with what the format's writer
does with it: a record the writer refuses (left out under error.policy skip/dead-letter)
is refused by ``stored_form`` too, and one it stores is read back as ``stored_form`` says."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.formats.writers import writer_for
from kafka_archive.archiver.reading.decoding import read_object, same_value, stored_form
from kafka_archive.archiver.records import Record
from kafka_archive.kcql.plan import Format

ODD_VALUES = [
    None,
    b"",
    b"42",
    b"[1, 2]",
    b'"x"',
    b"a\nb",
    b"\xff\xfe",
    b"NaN",
    b'{"a": 1}',
    b'{"a": NaN, "b": [1.5, NaN, {"c": -Infinity}]}',
    b'{"first-name": "x"}',
    b'{"a": [1, "x"]}',
    b'{"a": 123456789012345678901234567890}',
]


@settings(max_examples=60, deadline=None)
@pytest.mark.parametrize("fmt", ["JSON", "TEXT", "AVRO", "PARQUET", "CSV", "BYTES"])
@given(value=st.one_of(st.sampled_from(ODD_VALUES), st.binary(max_size=8)))
def test_the_writer_refuses_exactly_what_stored_form_refuses(fmt: str, value: bytes | None) -> None:
    (route,) = kcql.parse(f"INSERT INTO bkt:a SELECT * FROM t STOREAS {fmt}").routes
    record = Record("t", 0, 0, None, None, value, ())
    sink = io.BytesIO()
    writer = writer_for(Format[fmt])(sink, route)
    try:
        writer.write(record)
    except BadRecordError:
        with pytest.raises(ValueError):
            stored_form(Format[fmt], record)
        return
    writer.close()
    (stored,) = read_object(Format[fmt], sink.getvalue())
    assert same_value(stored.value, stored_form(Format[fmt], record))


def test_same_value_finds_nan_equal_to_nan_and_to_nothing_else() -> None:
    nan = float("nan")
    assert same_value({"a": [nan, 1]}, {"a": [float("nan"), 1]})
    assert not same_value({"a": nan}, {"a": 1.0})
    assert not same_value({"a": nan}, {"a": None})
    assert same_value(b"x", b"x") and not same_value(b"x", b"y")

"""What verify expects of a record (``stored_form``) agrees with what the format's writer
does with it: a record the writer refuses (left out under error.policy skip/dead-letter)
is refused by ``stored_form`` too, and one it stores is read back as ``stored_form`` says."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.formats.writers import writer_for
from kafka_archive.archiver.read.decoding import read_object, same_value, stored_form
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


@pytest.mark.parametrize("fmt", ["JSON", "AVRO", "PARQUET"])
def test_an_envelope_without_metadata_stores_no_offsets(fmt: str) -> None:
    """'store.envelope.fields.metadata'=false (Lenses' property) keeps no offsets: records
    read back have none (cat counts positions, verify compares in order); they were read
    as offset -1 (verify NOT CLEAN, cat 'beyond the archive', restore an internal error)."""
    props = "'store.envelope'=true, 'store.envelope.fields.metadata'=false"
    text = f"INSERT INTO bkt:a SELECT * FROM t STOREAS {fmt} PROPERTIES({props})"
    (route,) = kcql.parse(text).routes
    records = [
        Record("t", 0, 7 + i, 1_700_000_000_000, b"k", b'{"i": %d}' % i, (("h", b"v"),))
        for i in range(3)
    ]
    sink = io.BytesIO()
    writer = writer_for(Format[fmt])(sink, route)
    for record in records:
        writer.write(record)
    writer.close()
    stored = read_object(Format[fmt], sink.getvalue(), route.envelope)
    assert [s.offset for s in stored] == [None, None, None]
    assert [s.value for s in stored] == [
        stored_form(Format[fmt], r, route.envelope) for r in records
    ]
    assert [(s.key, s.raw, s.headers) for s in stored] == [
        (r.key, r.value, r.headers) for r in records
    ]


@pytest.mark.parametrize("fmt", ["JSON", "AVRO", "PARQUET", "CSV"])
def test_json_nested_deeper_than_the_parser_recurses_is_a_bad_record(fmt: str) -> None:
    """5,000 nested arrays: refused under error.policy (RecursionError crashed the task)."""
    (route,) = kcql.parse(f"INSERT INTO bkt:a SELECT * FROM t STOREAS {fmt}").routes
    deep = b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    record = Record("t", 0, 0, None, None, deep, ())
    with pytest.raises(BadRecordError):
        writer_for(Format[fmt])(io.BytesIO(), route).write(record)
    with pytest.raises(ValueError):
        stored_form(Format[fmt], record)

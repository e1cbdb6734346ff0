"""`cat`'s rendering: every record form prints as deterministic JSON that gives the record
back (keys, values, header values as bytes; logical types as strings)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import uuid
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.bytes_ import encode_values
from kafka_archive.archiver.read.decoding import read_object, stored_form
from kafka_archive.archiver.read.display import (
    document,
    parsed_bytes,
    parsed_headers,
    raw,
    to_jsonl,
)
from kafka_archive.archiver.read.seek import FoundRecord
from kafka_archive.kcql.plan import Envelope, Format

ENVELOPE = Envelope(enabled=True)

# Bytes that look like JSON, text, or neither, so every encoding is exercised.
payloads = st.one_of(
    st.binary(max_size=40),
    st.text(max_size=20).map(str.encode),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=6,
    ).map(lambda v: json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()),
    # JSON Python reads and writes, strict JSON does not: cat prints them as text.
    st.sampled_from([b"NaN", b"-Infinity", b'{"x":NaN}', b"[1.5,Infinity]"]),
)


def strict(line: str) -> Any:
    """``line`` parsed as RFC 8259 JSON (no NaN, Infinity: what jq and JSON.parse accept)."""

    def refuse(token: str) -> Any:
        raise ValueError(f"not strict JSON: {token}")

    return json.loads(line, parse_constant=refuse)


optional_payloads = st.none() | payloads
headers = st.lists(
    st.tuples(st.sampled_from(["a", "dup", "ü", ""]), optional_payloads), max_size=5
).map(tuple)
records = st.builds(
    Record,
    topic=st.just("t"),
    partition=st.integers(0, 3),
    offset=st.integers(0, 2**40),
    timestamp=st.none() | st.integers(0, 2**42),
    key=optional_payloads,
    value=optional_payloads,
    headers=headers,
)


def envelope_object(fmt: Format, records: list[Record]) -> bytes:
    from kafka_archive import kcql
    from kafka_archive.archiver.formats.writers import writer_for

    sink = io.BytesIO()
    route = kcql.parse(
        f"INSERT INTO bucket:p SELECT * FROM t STOREAS {fmt.value} "
        "PROPERTIES('store.envelope'=true)"
    ).routes[0]
    writer = writer_for(fmt)(sink, route)
    for record in records:
        writer.write(record)
    writer.close()
    return sink.getvalue()


def found(record: Any, fmt: Format, offset: int = 0) -> FoundRecord:
    return FoundRecord(TopicPartition("t", 0), offset, True, record, fmt, "obj")


@settings(deadline=None)  # the first example imports pyarrow and fastavro
@given(st.lists(records, min_size=1, max_size=4), st.sampled_from(list(Format)))
def test_an_envelope_record_prints_losslessly(originals: list[Record], fmt: Format) -> None:
    if fmt not in (Format.JSON, Format.AVRO, Format.PARQUET):
        fmt = Format.JSON
    stored = read_object(fmt, envelope_object(fmt, originals), ENVELOPE)
    for original, record in zip(originals, stored, strict=True):
        line = to_jsonl(found(record, fmt, original.offset))
        assert line == to_jsonl(found(record, fmt, original.offset))  # deterministic
        assert "\n" not in line
        doc = strict(line)
        assert parsed_bytes(doc["key"], doc["key_encoding"]) == original.key
        assert parsed_bytes(doc["value"], doc["value_encoding"]) == original.value
        assert parsed_headers(doc["headers"]) == original.headers
        assert (doc["offset"], doc["timestamp"]) == (original.offset, original.timestamp)
        assert raw(found(record, fmt)) == (original.value or b"")


@settings(deadline=None)
@given(st.lists(optional_payloads, min_size=1, max_size=5))
def test_a_bytes_value_prints_losslessly(values: list[bytes | None]) -> None:
    data = encode_values(values).data
    for value, record in zip(values, read_object(Format.BYTES, data), strict=True):
        doc = strict(to_jsonl(found(record, Format.BYTES)))
        assert parsed_bytes(doc["value"], doc["value_encoding"]) == value
        assert doc["key"] is doc["key_encoding"] is doc["headers"] is None
        assert raw(found(record, Format.BYTES)) == (value or b"")


def test_encodings_are_named() -> None:
    values = [b'{"a":1}', b'{"a": 1}', b"null", b"\xff", b""]
    data = encode_values(values).data
    shown = [
        (d["value"], d["value_encoding"])
        for d in (document(found(r, Format.BYTES)) for r in read_object(Format.BYTES, data))
    ]
    assert shown == [
        ({"a": 1}, "json"),
        ('{"a": 1}', "text"),
        ("null", "text"),
        (base64.b64encode(b"\xff").decode(), "base64"),
        ("", "text"),
    ]


LOGICAL = {
    "type": "record",
    "name": "Order",
    "fields": [
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "blob", "type": "bytes"},
        {"name": "note", "type": ["null", "string"]},
    ],
}
ROW = {
    "amount": decimal.Decimal("12.34"),
    "at": dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC),
    "day": dt.date(2024, 5, 1),
    "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "blob": b"\x00\xff",
    "note": None,
}
SHOWN = {
    "amount": "12.34",
    "at": "2024-05-01T12:00:00+00:00",
    "day": "2024-05-01",
    "id": "12345678-1234-5678-1234-567812345678",
    "blob": "AP8=",
    "note": None,
}


def test_avro_logical_types_print_as_strings() -> None:
    sink = io.BytesIO()
    fastavro.writer(sink, fastavro.parse_schema(LOGICAL), [ROW])
    (record,) = read_object(Format.AVRO, sink.getvalue())
    doc = document(found(record, Format.AVRO))
    assert (doc["value"], doc["value_encoding"]) == (SHOWN, "json")
    assert json.loads(raw(found(record, Format.AVRO))) == SHOWN


def test_parquet_logical_types_print_as_strings() -> None:
    table = pa.table(
        {
            "amount": pa.array([ROW["amount"]], pa.decimal128(9, 2)),
            "at": pa.array([ROW["at"]], pa.timestamp("ms", tz="UTC")),
            "day": pa.array([ROW["day"]], pa.date32()),
            "id": pa.array([str(ROW["id"])]),
            "blob": pa.array([ROW["blob"]], pa.binary()),
            "note": pa.array([None], pa.string()),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    (record,) = read_object(Format.PARQUET, sink.getvalue())
    assert document(found(record, Format.PARQUET))["value"] == SHOWN


def test_a_csv_row_prints_as_its_cells_and_raw_as_its_text() -> None:
    data = b'1,"a,b","line\r\nbreak",\r\n'
    (record,) = read_object(Format.CSV, data)
    doc = document(found(record, Format.CSV))
    assert (doc["value"], doc["value_encoding"]) == (["1", "a,b", "line\r\nbreak", ""], "csv")
    assert raw(found(record, Format.CSV)) + b"\r\n" == data


class RefusingRegistry:
    """A registry that knows no schema id (any lookup is an error)."""

    url = "http://registry.invalid"

    def decode(self, value: bytes) -> Any:
        raise AssertionError("TEXT and BYTES values are never decoded with the registry")


def test_bytes_and_text_values_are_compared_as_stored_even_with_a_registry() -> None:
    # A BYTES value that happens to start like the Confluent framing (byte 0, 4-byte id).
    framed = b"\x00\x00\x00\x00\x07raw"
    record = Record("t", 0, 0, None, None, framed)
    registry: Any = RefusingRegistry()
    assert stored_form(Format.BYTES, record, registry=registry) == framed
    text = Record("t", 0, 0, None, None, b"\x00\x00\x00\x00\x07text")
    assert stored_form(Format.TEXT, text, registry=registry) == "\x00\x00\x00\x00\x07text"


def test_non_finite_numbers_print_as_the_text_they_are_stored_as() -> None:
    """NaN and ±Infinity (JSON values Python writes, AVRO and PARQUET doubles) make no
    strict JSON: such a value prints as ``text``, its stored JSON text; others as before."""
    line = b'{"x":NaN,"y":[Infinity,-Infinity],"z":"a"}'
    (record,) = read_object(Format.JSON, line + b"\n")
    doc = strict(to_jsonl(found(record, Format.JSON)))
    assert (doc["value"], doc["value_encoding"]) == (line.decode(), "text")
    (plain,) = read_object(Format.JSON, b'{"x":1.5}\n')
    assert strict(to_jsonl(found(plain, Format.JSON)))["value_encoding"] == "json"

    schema = {"type": "record", "name": "r", "fields": [{"name": "x", "type": "double"}]}
    sink = io.BytesIO()
    fastavro.writer(sink, fastavro.parse_schema(schema), [{"x": float("nan")}, {"x": 2.0}])
    nan, two = read_object(Format.AVRO, sink.getvalue())
    doc = strict(to_jsonl(found(nan, Format.AVRO)))
    assert (doc["value"], doc["value_encoding"]) == ('{"x":NaN}', "text")
    assert strict(to_jsonl(found(two, Format.AVRO)))["value"] == {"x": 2.0}

    sink = io.BytesIO()
    pq.write_table(pa.table({"x": pa.array([float("-inf")], pa.float64())}), sink)
    (row,) = read_object(Format.PARQUET, sink.getvalue())
    doc = strict(to_jsonl(found(row, Format.PARQUET)))
    assert (doc["value"], doc["value_encoding"]) == ('{"x":-Infinity}', "text")

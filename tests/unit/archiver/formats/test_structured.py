"""AVRO and PARQUET writers: objects that standard readers (fastavro, pyarrow) read back,
one schema per object, and records that do not fit start a new object."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import schema
from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.formats.writers import writer_for
from kafka_archive.archiver.read.decoding import read_object, stored_form
from kafka_archive.kcql.plan import Format


def route(fmt: str, properties: str = "") -> kcql.Route:
    props = f" PROPERTIES({properties})" if properties else ""
    (only,) = kcql.parse(f"INSERT INTO bkt:a SELECT * FROM t STOREAS {fmt}{props}").routes
    return only


def rec(offset: int, value: Any, **kw: Any) -> Record:
    data = value if isinstance(value, bytes) or value is None else json.dumps(value).encode()
    return Record("t", 0, offset, kw.get("timestamp"), kw.get("key"), data, kw.get("headers", ()))


def write(fmt: str, records: list[Record], properties: str = "") -> bytes:
    sink = io.BytesIO()
    writer = writer_for(Format[fmt])(sink, route(fmt, properties))
    for record in records:
        assert writer.accepts(record)
        writer.write(record)
    writer.close()
    return sink.getvalue()


VALUES = [
    {"id": 1, "name": "a", "price": 1.5, "ok": True, "tags": ["x", "y"], "addr": {"zip": "10"}},
    {"id": 2, "name": None, "price": 2, "tags": [], "addr": {"zip": None}},
]


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
def test_standard_readers_read_the_values(fmt: str) -> None:
    data = write(fmt, [rec(i, v) for i, v in enumerate(VALUES)])
    if fmt == "AVRO":
        rows = list(fastavro.reader(io.BytesIO(data)))
    else:
        rows = pq.read_table(pa.BufferReader(data)).to_pylist()
    assert [schema.normalized(r) for r in rows] == [schema.normalized(v) for v in VALUES]
    stored = read_object(Format[fmt], data)
    assert [s.value for s in stored] == [stored_form(Format[fmt], rec(0, v)) for v in VALUES]


@pytest.mark.parametrize(
    ("fmt", "codec"),
    [("AVRO", f"'avro.codec'='{c}'") for c in ("deflate", "snappy", "zstandard", "bzip2", "xz")]
    + [("PARQUET", f"'parquet.codec'='{c}'") for c in ("zstd", "gzip", "lz4", "brotli", "none")],
)
def test_every_codec_round_trips(fmt: str, codec: str) -> None:
    data = write(fmt, [rec(i, {"id": i, "s": "v" * 50}) for i in range(200)], codec)
    assert [s.value["id"] for s in read_object(Format[fmt], data)] == list(range(200))


@pytest.mark.parametrize(
    ("fmt", "properties"),
    [("AVRO", ""), ("PARQUET", "'parquet.row.group.records'=1")],
    ids=["AVRO-begun", "PARQUET-written"],
)
def test_a_value_with_another_schema_is_not_accepted(
    fmt: str, properties: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the object's schema is written (PARQUET: its first row group; AVRO: the file
    begun after the values it holds) a new field or type rolls the object."""
    from kafka_archive.archiver.formats import avro_

    monkeypatch.setattr(avro_, "HOLD_RECORDS", 1)
    writer = writer_for(Format[fmt])(io.BytesIO(), route(fmt, properties))
    first = rec(0, {"id": 1, "name": "a"})
    assert writer.accepts(first)
    writer.write(first)
    assert writer.accepts(rec(1, {"id": 2}))  # a missing field fits (null)
    assert writer.accepts(rec(1, {"id": 2, "name": None}))
    assert not writer.accepts(rec(1, {"id": "two", "name": "b"}))  # a new type
    assert not writer.accepts(rec(1, {"id": 2, "extra": 1}))  # a new field


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
def test_an_object_takes_new_fields_while_its_schema_is_open(fmt: str) -> None:
    sink = io.BytesIO()
    writer = writer_for(Format[fmt])(sink, route(fmt))
    values = [{"id": 1, "name": "a"}, {"id": 2, "extra": 1}, {"id": 3, "name": None}]
    for offset, value in enumerate(values):
        assert writer.accepts(rec(offset, value))
        writer.write(rec(offset, value))
    assert not writer.accepts(rec(3, {"id": "four"}))  # a type conflict still rolls
    writer.close()
    if fmt == "AVRO":
        rows = list(fastavro.reader(io.BytesIO(sink.getvalue())))
    else:
        rows = pq.read_table(pa.BufferReader(sink.getvalue())).to_pylist()
    assert rows == [
        {"id": 1.0, "name": "a", "extra": None},
        {"id": 2.0, "name": None, "extra": 1.0},
        {"id": 3.0, "name": None, "extra": None},
    ]


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
@pytest.mark.parametrize(
    "value", [None, b"not json", b"[1, 2]", b'"text"'], ids=["tombstone", "text", "array", "str"]
)
def test_values_that_are_not_json_objects_are_bad_records(fmt: str, value: bytes | None) -> None:
    writer = writer_for(Format[fmt])(io.BytesIO(), route(fmt))
    with pytest.raises(BadRecordError):
        writer.write(rec(0, value))


def test_avro_refuses_a_field_name_avro_does_not_allow() -> None:
    writer = writer_for(Format.AVRO)(io.BytesIO(), route("AVRO"))
    with pytest.raises(BadRecordError, match="not a valid Avro name"):
        writer.write(rec(0, {"a-b": 1}))


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
def test_the_envelope_keeps_every_byte(fmt: str) -> None:
    records = [
        Record("t", 0, 10, 1_700_000_000_000, b"\xff", None, (("h", None), ("h", b"\x00"))),
        Record("t", 0, 11, None, None, b"not json at all", ()),
    ]
    data = write(fmt, records, "'store.envelope'=true")
    stored = read_object(Format[fmt], data)  # recognised as an envelope by its schema
    assert [(s.offset, s.key, s.raw, s.headers, s.timestamp) for s in stored] == [
        (r.offset, r.key, r.value, r.headers, r.timestamp) for r in records
    ]
    assert all(s.has_envelope for s in stored)


json_objects = st.dictionaries(
    st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True),
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**63 - 1)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=6),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True), inner, max_size=3
            )
        ),
        max_leaves=8,
    ),
    max_size=5,
)


@settings(max_examples=150, deadline=None)
@given(json_objects)
def test_any_json_object_round_trips_when_it_fits_its_own_schema(value: dict[str, Any]) -> None:
    try:
        inferred = schema.value_schema(value)
    except BadRecordError:
        return  # a mixed array: refused, never written wrongly
    assert schema.fits(value, inferred)
    for fmt in ("AVRO", "PARQUET"):
        (stored,) = read_object(Format[fmt], write(fmt, [rec(0, value)]))
        assert stored.value == schema.normalized(value)


def test_registry_schemas_give_the_shape_of_their_json_form() -> None:
    from kafka_archive.archiver.formats import schema as schemas

    avro = {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "int"},
            {"name": "paid", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "raw", "type": "bytes"},
            {"name": "status", "type": {"type": "enum", "name": "S", "symbols": ["A", "B"]}},
            {"name": "note", "type": ["null", "string"]},
            {
                "name": "lines",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "Line",
                        "fields": [{"name": "qty", "type": "float"}],
                    },
                },
            },
            {"name": "again", "type": ["null", "shop.Line"]},
        ],
    }
    line = schemas.Type("record", (("qty", schemas.DOUBLE),))
    assert schemas.from_avro(avro) == schemas.Type(
        "record",
        (
            ("id", schemas.LONG),
            ("paid", schemas.STRING),
            ("raw", schemas.STRING),
            ("status", schemas.STRING),
            ("note", schemas.STRING),
            ("lines", schemas.Type("array", items=line)),
            ("again", line),
        ),
    )
    # No fixed JSON shape: inferred from the first value instead.
    assert (
        schemas.from_avro(
            {
                "type": "record",
                "name": "M",
                "fields": [{"name": "m", "type": {"type": "map", "values": "long"}}],
            }
        )
        is None
    )
    assert (
        schemas.from_avro(
            {
                "type": "record",
                "name": "U",
                "fields": [{"name": "u", "type": ["null", "long", "string"]}],
            }
        )
        is None
    )
    assert schemas.from_avro("string") is None


USER_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "amount", "type": "double"},
            {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "note", "type": ["null", "string"], "default": None},
            {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
        ],
    }
)


def test_parquet_with_a_schema_file_has_its_columns_and_refuses_what_does_not_match() -> None:
    r = route("PARQUET", "'avro.schema.file'='orders.avsc'")
    sink = io.BytesIO()
    writer = writer_for(Format.PARQUET)(sink, r, None, user_schema=USER_SCHEMA)
    first = {"id": 1, "amount": 2, "placed": 0, "extra": "dropped"}  # note: null, tags: []
    second = {"id": 2, "amount": 0.5, "placed": 1_000, "note": "n", "tags": ["a"]}
    for offset, value in enumerate([first, second]):
        assert writer.accepts(rec(offset, value))
        writer.write(rec(offset, value))
    with pytest.raises(BadRecordError, match=r"avro\.schema\.file"):
        writer.write(rec(2, {"id": "three", "amount": 1.0, "placed": 0}))
    writer.close()
    table = pq.read_table(pa.BufferReader(sink.getvalue()))
    # Columns from the schema, not from the first value: a null note keeps its string type.
    assert table.schema.names == ["id", "amount", "placed", "note", "tags"]
    assert table.schema.field("note").type == pa.string()
    assert table.schema.field("amount").type == pa.float64()
    assert table.to_pylist() == [
        {"id": 1, "amount": 2.0, "placed": "1970-01-01T00:00:00+00:00", "note": None, "tags": []},
        {"id": 2, "amount": 0.5, "placed": "1970-01-01T00:00:01+00:00", "note": "n", "tags": ["a"]},
    ]
    # verify's expectation of each record equals what was read back
    stored = read_object(Format.PARQUET, sink.getvalue())
    for offset, value in enumerate([first, second]):
        expected = stored_form(Format.PARQUET, rec(offset, value), value_schema=USER_SCHEMA)
        assert schema.normalized(stored[offset].value) == expected


def test_a_schema_file_without_fixed_columns_is_refused_for_parquet_only(tmp_path: Any) -> None:
    from kafka_archive.archiver.core.errors import ConfigError
    from kafka_archive.archiver.formats import avsc

    path = tmp_path / "attrs.avsc"
    path.write_text(
        json.dumps(
            {
                "type": "record",
                "name": "A",
                "fields": [{"name": "attrs", "type": {"type": "map", "values": "string"}}],
            }
        )
    )

    def plan(fmt: str) -> kcql.Plan:
        return kcql.parse(
            f"INSERT INTO bkt:a SELECT * FROM t STOREAS {fmt} "
            f"PROPERTIES('avro.schema.file'='{path}')"
        )

    assert avsc.load(plan("AVRO")) == {0: path.read_text()}
    with pytest.raises(ConfigError, match="no fixed PARQUET columns"):
        avsc.load(plan("PARQUET"))


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
def test_an_integer_a_double_column_would_round_is_a_bad_record(fmt: str) -> None:
    # Found by hypothesis: [0.0, 2**53 + 1] infers array<double>, and 2**53 + 1 has no
    # double; AVRO stored it rounded and PARQUET failed inside pyarrow.
    assert schema.fits(2**53, schema.DOUBLE) and schema.fits(-(2**53), schema.DOUBLE)
    assert not schema.fits(2**53 + 1, schema.DOUBLE)
    assert not schema.fits(2**53 + 2, schema.DOUBLE)  # a double, but pyarrow refuses it
    assert not schema.fits(10**400, schema.DOUBLE)
    with pytest.raises(BadRecordError, match="different types"):
        write(fmt, [rec(0, {"xs": [0.0, 2**53 + 2]})])
    sink = io.BytesIO()
    writer = writer_for(Format[fmt])(sink, route(fmt))
    writer.write(rec(0, {"price": 0.5}))
    assert not writer.accepts(rec(1, {"price": 2**53 + 1}))  # rolls, then infers a long


TABLE_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Table",
        "fields": [
            {"name": "id", "type": ["null", "long"], "default": None},
            {"name": "name", "type": ["null", "string"], "default": None},
            {"name": "at", "type": ["null", "long"], "default": None},  # in no record
        ],
    }
)


def test_an_iceberg_tables_columns_seed_the_types_of_its_files() -> None:
    """The table's long column takes whole numbers as long (in the first value, null in the
    first value, new while the schema is open); a column the table lacks is inferred (a
    double); a fractional number for the long column does not fit: the object rolls."""
    sink = io.BytesIO()
    writer = writer_for(Format.PARQUET)(sink, route("PARQUET"), None, table_schema=TABLE_SCHEMA)
    values = [{"id": 1, "price": 2}, {"id": None, "name": "b"}, {"id": 3, "price": 0.5}]
    for offset, value in enumerate(values):
        assert writer.accepts(rec(offset, value))
        writer.write(rec(offset, value))
    assert not writer.accepts(rec(3, {"id": 4.5}))
    writer.close()
    table = pq.read_table(pa.BufferReader(sink.getvalue()))
    assert table.schema.field("id").type == pa.int64()
    assert table.schema.field("price").type == pa.float64()
    assert table.to_pylist() == [
        {"id": 1, "price": 2.0, "name": None},
        {"id": None, "price": None, "name": "b"},
        {"id": 3, "price": 0.5, "name": None},
    ]
    late = io.BytesIO()
    writer = writer_for(Format.PARQUET)(late, route("PARQUET"), None, table_schema=TABLE_SCHEMA)
    for offset, value in enumerate([{"name": "a"}, {"name": "b", "id": 2}]):
        assert writer.accepts(rec(offset, value))
        writer.write(rec(offset, value))
    writer.close()
    assert pq.read_table(pa.BufferReader(late.getvalue())).schema.field("id").type == pa.int64()

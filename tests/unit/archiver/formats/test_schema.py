"""The type rules of inferred schemas (issue 35): every object of a route agrees with every
other on the type of each column they share, whatever records each holds, and no column is
of the Null type. Objects are written by our writers and read with pyarrow and fastavro."""

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
from kafka_archive.kcql.plan import Format


def route(fmt: str) -> kcql.Route:
    (only,) = kcql.parse(f"INSERT INTO bkt:a SELECT * FROM t STOREAS {fmt}").routes
    return only


def rec(offset: int, value: Any) -> Record:
    return Record("t", 0, offset, None, None, json.dumps(value).encode(), ())


def objects(fmt: str, values: list[dict[str, Any]], cuts: set[int]) -> list[bytes]:
    """``values`` written as the chunking runtime writes them: a new object at each offset of
    ``cuts`` (a roll by count or size) and before each value the open object does not accept."""
    done: list[bytes] = []
    sink: io.BytesIO | None = None
    writer: Any = None
    for offset, value in enumerate(values):
        record = rec(offset, value)
        if writer is not None and (offset in cuts or not writer.accepts(record)):
            writer.close()
            assert sink is not None
            done.append(sink.getvalue())
            writer = None
        if writer is None:
            sink = io.BytesIO()
            writer = writer_for(Format[fmt])(sink, route(fmt))
            assert writer.accepts(record)
        writer.write(record)
    if writer is not None:
        writer.close()
        assert sink is not None
        done.append(sink.getvalue())
    return done


def column_types(fmt: str, data: bytes) -> dict[str, str]:
    """Each top-level column's type, as a reader we did not write reports it."""
    if fmt == "PARQUET":
        arrow = pq.read_schema(pa.BufferReader(data))
        return {f.name: str(f.type) for f in arrow}
    writer_schema = fastavro.reader(io.BytesIO(data)).writer_schema
    assert writer_schema is not None
    return {f["name"]: json.dumps(f["type"], sort_keys=True) for f in writer_schema["fields"]}


def rows(fmt: str, data: bytes) -> list[dict[str, Any]]:
    if fmt == "PARQUET":
        return list(pq.read_table(pa.BufferReader(data)).to_pylist())
    return list(fastavro.reader(io.BytesIO(data)))


# What real producers send: a field null in some records (and in whole objects), a field
# only some records have, numbers whole in one record and fractional in the next.
KINDS = {
    "note": st.text(max_size=4),
    "amount": st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False),
    "ok": st.booleans(),
    "tags": st.lists(st.text(max_size=3), max_size=2),
    "qty": st.integers(-1000, 1000) | st.floats(-1e6, 1e6),
}


ABSENT = object()


@st.composite
def field_value(draw: st.DrawFn, name: str) -> Any:
    shape = draw(st.sampled_from(["absent", "null", "value", "value"]))
    if shape == "absent":
        return ABSENT
    return None if shape == "null" else draw(KINDS[name])


@st.composite
def record_value(draw: st.DrawFn) -> dict[str, Any]:
    value: dict[str, Any] = {"id": draw(st.integers(0, 10**6))}
    for name in KINDS:
        drawn = draw(field_value(name))
        if drawn is not ABSENT:
            value[name] = drawn
    return value


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
@settings(max_examples=60, deadline=None)
@given(values=st.lists(record_value(), min_size=1, max_size=25), data=st.data())
def test_objects_agree_on_every_column_they_share_and_none_is_null_typed(
    fmt: str, values: list[dict[str, Any]], data: st.DataObject
) -> None:
    cuts = set(data.draw(st.sets(st.integers(1, max(1, len(values) - 1)), max_size=6)))
    written = objects(fmt, values, cuts)
    seen: dict[str, set[str]] = {}
    for obj in written:
        for name, kind in column_types(fmt, obj).items():
            assert kind not in ("null", '"null"'), (name, kind)
            seen.setdefault(name, set()).add(kind)
    for name, kinds in seen.items():
        # A field null in every record of an object is a string column there (the
        # documented default): the one way two objects differ, and only for non-text fields.
        if name not in ("note",) and len(kinds) > 1:
            typed = {k for k in kinds if "string" not in k}
            assert len(typed) <= 1, (name, kinds)
        else:
            assert len(kinds) == 1, (name, kinds)
    # Every record once, its values as sent (numbers as doubles, absent fields null).
    back = [r for obj in written for r in rows(fmt, obj)]
    assert [schema.normalized(r) for r in back] == [schema.normalized(v) for v in values]


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
def test_whole_and_fractional_numbers_are_one_double_column(fmt: str) -> None:
    first, second = objects(fmt, [{"amount": 10}, {"amount": 10.5}, {"amount": 11}], {1})
    assert column_types(fmt, first) == column_types(fmt, second)
    if fmt == "PARQUET":
        assert column_types(fmt, first) == {"amount": "double"}
    assert rows(fmt, first) + rows(fmt, second) == [
        {"amount": 10.0},
        {"amount": 10.5},
        {"amount": 11.0},
    ]


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
def test_a_field_null_in_a_whole_object_is_a_string_column_not_the_null_type(fmt: str) -> None:
    values = [{"id": 1, "note": None, "tags": []}, {"id": 2, "note": "n", "tags": ["a"]}]
    first, second = objects(fmt, values, {1})
    assert column_types(fmt, first) == column_types(fmt, second)
    if fmt == "PARQUET":
        assert column_types(fmt, first) == {
            "id": "double",
            "note": "string",
            "tags": "list<element: string>",
        }


def test_parquet_types_a_field_null_in_its_first_records_from_later_ones() -> None:
    """Until its first row group is written a PARQUET object's schema is open: a number
    after nulls makes the column a double, in the same object (no roll)."""
    values = [{"id": 1, "qty": None}, {"id": 2}, {"id": 3, "qty": 5}, {"id": 4, "qty": 0.5}]
    (only,) = objects("PARQUET", values, set())
    assert column_types("PARQUET", only) == {"id": "double", "qty": "double"}
    assert [r["qty"] for r in rows("PARQUET", only)] == [None, None, 5.0, 0.5]


def test_an_integer_a_double_would_round_is_a_bad_record_that_names_the_way_out() -> None:
    with pytest.raises(BadRecordError, match=r"avro\.schema\.file"):
        schema.value_schema({"id": 2**53 + 1})


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
def test_the_objects_that_may_differ_are_named(fmt: str, caplog: pytest.LogCaptureFixture) -> None:
    """A field null in every record of an object's schema is stored as a string: the log
    names the object (topic, partition, first offset) and the fields, never a value."""
    caplog.set_level("INFO", logger="kafka_archive.archiver.formats.schema")
    values = [{"id": 1, "qty": None, "secret": "s3cr3t"}, {"id": 2, "more": {"x": None}}]
    sink = io.BytesIO()
    writer = writer_for(Format[fmt])(sink, route(fmt))
    for offset, value in enumerate(values, start=40):
        assert writer.accepts(rec(offset, value))
        writer.write(rec(offset, value))
    writer.close()
    (message,) = [r.getMessage() for r in caplog.records]
    assert "t[0] object from offset 40" in message and "qty, more.x" in message
    assert "s3cr3t" not in message


SEED = schema.Type(
    "record",
    (
        ("id", schema.LONG),
        ("qty", schema.LONG),
        ("note", schema.STRING),
        ("tags", schema.Type("array", items=schema.STRING)),
        ("gone", schema.LONG),
    ),
)


@settings(max_examples=200, deadline=None)
@given(value=record_value())
def test_a_seeded_schema_holds_its_value_and_takes_the_seed_where_it_fits(
    value: dict[str, Any],
) -> None:
    """An existing Iceberg table's columns (the seed) type the fields the value shares with
    them where the value fits (a whole number in a long column: long); other fields keep
    their inferred types; no field is added that the value lacks; the value always fits."""
    inferred = schema.value_schema(value)
    typed = schema.seeded(inferred, SEED, value)
    assert schema.fits(value, typed)
    seed, fields, by_inference = dict(SEED.fields), dict(typed.fields), dict(inferred.fields)
    assert list(fields) == list(by_inference)
    for name, kind in fields.items():
        if name in seed and by_inference[name].kind in ("null", "double"):
            fits_seed = schema.fits(value[name], seed[name])
            assert kind == (seed[name] if fits_seed else by_inference[name]), name
        else:
            assert kind == by_inference[name], name


@settings(max_examples=200, deadline=None)
@given(value=record_value())
def test_recorded_columns_round_trip_through_json(value: dict[str, Any]) -> None:
    """The route's column record (plan/columns.py) keeps every type, ``null`` included."""
    typed = schema.value_schema(value)
    assert schema.from_json(json.loads(json.dumps(schema.to_json(typed)))) == typed


@pytest.mark.parametrize("bad", [{"record": [["a"]]}, {"array": 3}, "int", [], {"x": 1}])
def test_a_damaged_column_record_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError):
        schema.from_json(bad)


@settings(max_examples=200, deadline=None)
@given(first=record_value(), second=record_value())
def test_merged_columns_keep_every_recorded_type_and_add_new_fields(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    """A recorded type stays; a field recorded with no type yet takes the new object's;
    fields the record lacks are added after the others."""
    recorded, new = schema.value_schema(first), schema.value_schema(second)
    merged = schema.merged(recorded, new)
    before, after, theirs = dict(recorded.fields), dict(merged.fields), dict(new.fields)
    assert list(after)[: len(before)] == list(before)
    assert set(after) == set(before) | set(theirs)
    for name, kind in after.items():
        if name not in before or (before[name].kind == "null" and name in theirs):
            assert kind == theirs[name]
        elif before[name].kind not in ("record", "array"):
            assert kind == before[name]


def test_a_run_of_nulls_and_whole_numbers_takes_the_recorded_columns() -> None:
    """Seeded with a route's recorded columns, an object whose records are all null for
    ``note``, ``ratio`` and ``flag`` and whole for ``n`` stores them as earlier objects did."""
    recorded = schema.value_schema({"note": "x", "n": 1.5, "ratio": 0.5, "flag": True})
    columns = json.dumps(schema.to_json(recorded))
    sink = io.BytesIO()
    writer = writer_for(Format.PARQUET)(sink, route("PARQUET"), None, columns=columns)
    for offset in range(3):
        writer.write(rec(offset, {"note": None, "n": 2, "ratio": None, "flag": None}))
    writer.close()
    table = pq.read_table(pa.BufferReader(sink.getvalue()))
    assert [str(f.type) for f in table.schema] == ["string", "double", "double", "bool"]

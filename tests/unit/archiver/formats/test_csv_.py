"""SELECT projection and the CSV writers (formats/csv_.py, partition/fields.py Projector)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest

from kafka_archive import kcql
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.formats.writers import writer_for
from kafka_archive.archiver.partition.fields import projector_for
from kafka_archive.archiver.read.decoding import read_object, stored_form


def route(text: str) -> kcql.Route:
    (only,) = kcql.parse(text).routes
    return only


def rec(offset: int, value: Any, key: bytes | None = None) -> Record:
    data = None if value is None else json.dumps(value).encode()
    return Record("orders", 2, offset, 1_700_000_000_000, key, data, (("country", b"DE"),))


def test_select_projects_and_renames_fields_of_every_source() -> None:
    r = route(
        "INSERT INTO bkt SELECT id, _value.customer.name AS customer, _key, _key.region AS region, "
        "_header.country, _topic, _partition, _offset, _timestamp, missing FROM t"
    )
    projector = projector_for(r)
    assert projector is not None
    value = {"id": 7, "customer": {"name": "Ada", "age": 3}, "other": 1}
    assert projector.project(rec(5, value, key=b'{"region": "eu"}')) == {
        "id": 7,
        "customer": "Ada",
        "key": '{"region": "eu"}',
        "region": "eu",
        "country": "DE",
        "topic": "orders",
        "partition": 2,
        "offset": 5,
        "timestamp": 1_700_000_000_000,
        "missing": None,
    }
    assert projector_for(route("INSERT INTO bkt SELECT * FROM t")) is None


def test_json_lines_hold_only_the_selected_fields() -> None:
    r = route("INSERT INTO bkt SELECT id AS order_id, _offset FROM t")
    sink = io.BytesIO()
    writer = writer_for(r.format)(sink, r)
    writer.write(rec(3, {"id": 1, "secret": "x"}))
    writer.write(rec(4, None))  # a tombstone: its value fields are null
    writer.close()
    lines = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert lines == [{"order_id": 1, "offset": 3}, {"order_id": None, "offset": 4}]


def write_csv(text: str, records: list[Record]) -> bytes:
    r = route(text)
    sink = io.BytesIO()
    writer = writer_for(r.format)(sink, r)
    for record in records:
        assert writer.accepts(record)
        writer.write(record)
    writer.close()
    return sink.getvalue()


def test_csv_with_headers_is_rfc4180_with_quoting() -> None:
    data = write_csv(
        "INSERT INTO bkt SELECT id, note, tags FROM t STOREAS CSV_WITHHEADERS",
        [rec(0, {"id": 1, "note": 'say "hi",\nbye', "tags": ["a", 1]}), rec(1, {"id": 2})],
    )
    assert data.startswith(b"id,note,tags\r\n")
    rows = list(csv.reader(io.StringIO(data.decode(), newline="")))
    assert rows == [["id", "note", "tags"], ["1", 'say "hi",\nbye', '["a",1]'], ["2", "", ""]]


def test_csv_select_star_takes_columns_from_the_first_value_and_rolls_on_a_new_field() -> None:
    r = route("INSERT INTO bkt SELECT * FROM t STOREAS CSV")
    writer = writer_for(r.format)(io.BytesIO(), r)
    writer.write(rec(0, {"a": 1, "b": 2}))
    assert writer.accepts(rec(1, {"b": 3}))
    assert not writer.accepts(rec(1, {"a": 1, "c": 2}))
    with pytest.raises(BadRecordError):
        writer.write(rec(2, None))


def test_csv_reads_back_as_verify_compares_it() -> None:
    text = "INSERT INTO bkt SELECT * FROM t STOREAS CSV_WITHHEADERS"
    records = [rec(0, {"a": "x,y", "b": None, "c": 2.5}), rec(1, {"a": "", "c": True})]
    stored = read_object(route(text).format, write_csv(text, records))
    assert [s.value for s in stored] == [stored_form(route(text).format, r) for r in records]

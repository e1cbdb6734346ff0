"""Committed objects read back as records for the maintenance engine: offsets stored or
derived, and damaged or mis-named objects refused with one line."""

from __future__ import annotations

import gzip
import io
import json

import fastavro
import pytest

from kafka_archive.archiver.core.errors import DamagedObjectError
from kafka_archive.archiver.formats.readback import records_of
from kafka_archive.archiver.plan.maintenance import CommittedObject
from kafka_archive.kcql.plan import Envelope, Format, Route, Target

ROUTE = Route(target=Target("b", "p"), topic="t")


def obj(key: str, first: int, last: int, records: int) -> CommittedObject:
    return CommittedObject(key, first, last, records, 1)


def test_values_take_their_offsets_from_the_first_offset_and_position() -> None:
    data = gzip.compress(b'{"a":1}\n{"a":2}\n')
    records = list(records_of(ROUTE, obj("p/t/0/000000000007.json.gz", 7, 8, 2), data))
    assert [(r.offset, r.value) for r in records] == [(7, b'{"a":1}'), (8, b'{"a":2}')]


def test_an_envelope_keeps_its_stored_offsets_key_and_time() -> None:
    route = Route(target=Target("b", "p"), topic="t", envelope=Envelope(enabled=True))
    line = {
        "key": "k",
        "value": {"a": 1},
        "encoding": {"key": "text", "value": "json"},
        "headers": [],
        "metadata": {"topic": "t", "partition": 0, "offset": 12, "timestamp": 99},
    }
    (record,) = records_of(route, obj("k.json", 12, 12, 1), json.dumps(line).encode() + b"\n")
    assert (record.offset, record.key, record.timestamp) == (12, b"k", 99)


def test_avro_rows_come_back_as_json_values() -> None:
    out = io.BytesIO()
    schema = {"type": "record", "name": "V", "fields": [{"name": "id", "type": "long"}]}
    fastavro.writer(out, fastavro.parse_schema(schema), [{"id": 1}, {"id": 2}])
    route = Route(target=Target("b"), topic="t", format=Format.AVRO)
    found = list(records_of(route, obj("k.avro", 0, 1, 2), out.getvalue()))
    assert [json.loads(r.value or b"") for r in found] == [{"id": 1}, {"id": 2}]


def test_csv_rows_are_named_by_their_header() -> None:
    route = Route(target=Target("b"), topic="t", format=Format.CSV_WITHHEADERS)
    found = list(records_of(route, obj("k.csv", 0, 0, 1), b"id,name\r\n1,x\r\n"))
    assert [json.loads(r.value or b"") for r in found] == [{"id": "1", "name": "x"}]


def test_a_count_other_than_the_commits_is_refused() -> None:
    with pytest.raises(DamagedObjectError, match="holds 2 records, its commit 3"):
        list(records_of(ROUTE, obj("k.json", 0, 2, 3), b"1\n2\n"))


def test_offsets_cannot_be_derived_in_an_object_with_gaps() -> None:
    with pytest.raises(DamagedObjectError, match="offsets are not known"):
        list(records_of(ROUTE, obj("k.json", 0, 5, 2), b"1\n2\n"))


def test_a_cut_short_object_is_damaged() -> None:
    with pytest.raises(DamagedObjectError, match="cut short"):
        list(records_of(ROUTE, obj("k.json", 0, 1, 2), b"1\n2"))

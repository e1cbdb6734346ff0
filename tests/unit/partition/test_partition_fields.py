"""PARTITIONBY values read from records (partition/fields.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.partition.fields import partition_values
from kafka_archive.archiver.records import Record


def route(partition_by: str, fmt: str = "JSON") -> kcql.Route:
    text = f"INSERT INTO bkt:a SELECT * FROM t PARTITIONBY {partition_by} STOREAS {fmt}"
    (only,) = kcql.parse(text).routes
    return only


def record(
    value: bytes | None = None,
    key: bytes | None = None,
    headers: tuple[tuple[str, bytes | None], ...] = (),
    timestamp: int | None = 1_714_999_980_000,
) -> Record:
    return Record("orders", 3, 42, timestamp, key, value, headers)


def test_value_fields_nested_paths_and_json_scalars() -> None:
    value = json.dumps({"a": {"b": "x"}, "n": 7, "f": 1.5, "t": True, "o": {"z": 1, "y": [2]}})
    values = partition_values(
        route("_value.a.b, n, _value.f, _value.t, _value.o"), record(value.encode())
    )
    assert values == ("x", "7", "1.5", "true", '{"y":[2],"z":1}')


def test_missing_null_and_tombstone_give_none() -> None:
    r = route("_value.a, _value.b.c, _key.id, _header.country")
    assert partition_values(r, record(b'{"a": null, "b": 1}')) == (None, None, None, None)
    assert partition_values(r, record(None)) == (None, None, None, None)


def test_key_header_topic_partition_and_time() -> None:
    r = route("_key, _key.id, _header.country, _header.meta.region, _topic, _partition, _date.uuuu")
    rec = record(
        b"{}",
        key=b'{"id": 5}',
        headers=(("country", b"DE"), ("meta", b'{"region": "eu"}')),
    )
    assert partition_values(r, rec) == (
        '{"id": 5}', "5", "DE", "eu", "orders", "3", "1714999980000"
    )


def test_key_that_is_not_utf8_is_kept_reversibly() -> None:
    (value,) = partition_values(route("_key"), record(b"{}", key=b"\xff\x00a"))
    assert value is not None and value.encode("utf-8", "surrogateescape") == b"\xff\x00a"


def test_a_field_of_a_value_that_is_not_json_is_a_bad_record() -> None:
    with pytest.raises(BadRecordError, match="value is not JSON"):
        partition_values(route("_value.a"), record(b"not json"))
    with pytest.raises(BadRecordError, match="header 'h' is not JSON"):
        partition_values(route("_header.h.x"), record(b"{}", headers=(("h", b"\x01"),)))


names = st.text(
    alphabet=st.characters(blacklist_characters="`\n\r", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=5,
)


@given(st.dictionaries(names, st.text(max_size=10), min_size=1))
def test_every_string_field_reads_back_as_itself(doc: dict[str, str]) -> None:
    name = next(iter(doc))
    r = route(f"_value.`{name}`")
    assert partition_values(r, record(json.dumps(doc).encode())) == (doc[name],)

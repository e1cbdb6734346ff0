"""PARTITIONBY values read from records (partition/fields.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.partition.fields import partition_values


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
        '{"id": 5}',
        "5",
        "DE",
        "eu",
        "orders",
        "3",
        "1714999980000",
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


# -- the record time from a field ('partition.time.field') ---------------------------------


def timed_route(field: str, partition_by: str = "_date.uuuu-MM-dd") -> kcql.Route:
    text = (
        f"INSERT INTO bkt:a SELECT * FROM t PARTITIONBY {partition_by} STOREAS JSON "
        f"PROPERTIES('partition.time.field'='{field}')"
    )
    (only,) = kcql.parse(text).routes
    return only


def test_time_field_replaces_the_record_timestamp() -> None:
    from kafka_archive.archiver.partition.fields import reader_for
    from kafka_archive.archiver.partition.keys import object_group

    value = json.dumps({"id": 1, "meta": {"at": "2024-02-29T23:30:00+01:00"}}).encode()
    r = timed_route("_value.meta.at", "country, _date.uuuu-MM-dd")
    values, time_ms = reader_for(r).place(record(value), None)
    assert time_ms == 1_709_245_800_000  # 22:30 UTC
    # The _date field formats the field's time, not the record timestamp (2024-05-06).
    assert object_group(r, values, timestamp_ms=time_ms)[1] == "2024-02-29"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (1_700_000_000_000, 1_700_000_000_000),
        (1_700_000_000_000.7, 1_700_000_000_000),
        ("1700000000000", 1_700_000_000_000),
        ("2023-11-14T22:13:20Z", 1_700_000_000_000),
        ("2023-11-14T22:13:20", 1_700_000_000_000),  # no offset: UTC
        ("2023-11-14", 1_699_920_000_000),
        ("yesterday", None),
        (True, None),
        (None, None),
        ({"at": 1}, None),
        (10**20, None),  # beyond the year 9999
    ],
)
def test_epoch_ms_reads_numbers_and_iso_times(raw: object, expected: int | None) -> None:
    from kafka_archive.archiver.partition.fields import epoch_ms

    assert epoch_ms(raw) == expected


def test_a_record_without_the_time_field_goes_to_the_missing_value() -> None:
    from kafka_archive.archiver.partition.fields import reader_for
    from kafka_archive.archiver.partition.keys import object_group

    r = timed_route("created_at")
    for value in (b'{"id": 1}', b'{"created_at": "not a time"}', None):
        values, time_ms = reader_for(r).place(record(value), None)
        assert time_ms is None
        assert object_group(r, values, timestamp_ms=time_ms) == (None,)


@pytest.mark.parametrize("fmt", ["JSON", "AVRO", "PARQUET", "CSV"])
def test_a_selected_key_or_header_that_is_not_utf8_is_a_bad_record(fmt: str) -> None:
    """A binary key (an Avro or integer key, say) cannot be a stored string: the record is
    refused under error.policy (it crashed the Spark task, exit 21, before); PARTITIONBY
    still takes it, escaped."""
    import io

    from kafka_archive.archiver.formats.writers import writer_for
    from kafka_archive.kcql.plan import Format

    text = f"INSERT INTO bkt:a SELECT id, _key AS k, _header.h AS h FROM t STOREAS {fmt}"
    (selected,) = kcql.parse(text).routes
    writer = writer_for(Format[fmt])(io.BytesIO(), selected)
    value = b'{"id": 1}'
    writer.write(record(value, key="ключ".encode(), headers=(("h", b"DE"),)))
    for key, headers in ((b"\x00\xff\x01", ()), (b"k", (("h", b"\xff"),))):
        with pytest.raises(BadRecordError, match="not UTF-8 text"):
            writer.write(record(value, key=key, headers=headers))
    assert partition_values(route("_key"), record(value, key=b"\x00\xff\x01")) is not None

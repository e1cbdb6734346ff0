"""The maintenance engine's predicates (what erase and expire drop) and dropped ranges."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.write.rewrite import _Ranges, drop_before, drop_keys, drop_offsets


def record(offset: int = 0, key: bytes | None = None, value: bytes | None = None) -> Record:
    return Record("t", 0, offset, None, key, value)


def test_drop_keys_by_the_records_key() -> None:
    drop = drop_keys({b"a"})
    assert drop(record(key=b"a")) and not drop(record(key=b"b")) and not drop(record())


def test_drop_keys_by_a_field_of_the_value_as_its_text() -> None:
    drop = drop_keys({b"u1", b"7"}, key_field="user.id")
    assert drop(record(value=b'{"user": {"id": "u1"}}'))
    assert drop(record(value=b'{"user": {"id": 7}}'))
    assert not drop(record(value=b'{"user": {"id": "u2"}}'))
    assert not drop(record(value=b'{"user": null}')) and not drop(record(value=b"not json"))
    assert not drop(record(key=b"u1", value=None))


def test_drop_before_needs_each_records_time() -> None:
    drop = drop_before(100)
    assert drop(Record("t", 0, 1, 99, None, b"")) and not drop(Record("t", 0, 1, 100, None, b""))
    with pytest.raises(ConfigError, match="expire needs each record's time"):
        drop(record())


def test_drop_offsets() -> None:
    drop = drop_offsets({3})
    assert drop(record(3)) and not drop(record(4))


@given(st.sets(st.integers(0, 200)))
def test_dropped_offsets_are_kept_as_ranges_that_cover_exactly_them(offsets: set[int]) -> None:
    ranges = _Ranges()
    for offset in sorted(offsets):
        ranges.add(offset)
    covered = [o for first, last in ranges.ranges for o in range(first, last + 1)]
    assert covered == sorted(offsets)
    assert all(b[0] > a[1] + 1 for a, b in zip(ranges.ranges, ranges.ranges[1:], strict=False))

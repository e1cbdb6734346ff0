"""`cat` of a Parquet object reads its footer and only the row groups from the one holding
the asked offset (range GETs), with and without the envelope."""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import pytest

from kafka_archive import kcql
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.writers import writer_for
from kafka_archive.archiver.read.seek import RANGE_READ_BYTES, find_records
from kafka_archive.kcql.plan import Format

ROWS = 2000
GROUP = 100
TP = TopicPartition("orders", 0)


class FakeStore:
    """An S3Store stand-in: one object, every GET recorded."""

    def __init__(self, key: str, data: bytes) -> None:
        self.key, self.data = key, data
        self.fetched = 0
        self.gets = 0

    def list_objects(self, bucket: str, prefix: str) -> list[tuple[str, int]]:
        return [(self.key, len(self.data))] if self.key.startswith(prefix) else []

    def get_bytes(
        self, bucket: str, key: str, byte_range: tuple[int, int] | None = None
    ) -> bytes | None:
        if key != self.key:
            return None
        start, length = byte_range if byte_range is not None else (0, len(self.data))
        self.gets += 1
        self.fetched += min(length, len(self.data) - start)
        return self.data[start : start + length]


def pad(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest() * 3  # incompressible, 192 characters


def archive(envelope: bool) -> tuple[Any, FakeStore]:
    props = "'store.envelope'=true, " if envelope else ""
    route = kcql.parse(
        "INSERT INTO bucket:arch SELECT * FROM orders STOREAS PARQUET "
        f"PROPERTIES({props}'parquet.row.group.records'={GROUP}, 'parquet.codec'='none')"
    ).routes[0]
    sink = io.BytesIO()
    writer = writer_for(Format.PARQUET)(sink, route)
    for i in range(ROWS):
        value = json.dumps({"id": i, "pad": pad(i)}).encode()
        writer.write(Record("orders", 0, i, 1_700_000_000_000 + i, b"k", value))
    writer.close()
    return route, FakeStore("arch/orders/0/000000000000.parquet", sink.getvalue())


@pytest.mark.parametrize("envelope", [False, True], ids=["values", "envelope"])
@pytest.mark.parametrize("offset", [0, 1234, ROWS - 1])
def test_cat_of_parquet_reads_only_the_row_groups_it_needs(envelope: bool, offset: int) -> None:
    route, store = archive(envelope)
    assert len(store.data) > RANGE_READ_BYTES
    found = list(find_records(store, route, TP, offset, 3, committed=ROWS))  # type: ignore[arg-type]
    assert [r.offset for r in found] == list(range(offset, min(offset + 3, ROWS)))
    assert all(r.offset_exact for r in found)
    for record in found:
        value = record.stored.raw if envelope else json.dumps(record.stored.content).encode()
        assert json.loads(value or b"") == {"id": record.offset, "pad": pad(record.offset)}
    # What is read: the footer (one read of at most 64 KB) and the row group holding the
    # offset (and the next, for a record past its end).
    groups = 2 if offset % GROUP > GROUP - 3 else 1
    needed = len(store.data) * groups * GROUP / ROWS
    assert store.fetched < needed + 70_000, (store.fetched, needed, len(store.data))


def test_cat_of_an_offset_whose_object_is_empty_says_the_object_is_damaged() -> None:
    from kafka_archive.archiver.core.errors import DamagedObjectError, NotInArchiveError

    route = kcql.parse("INSERT INTO bucket:arch SELECT * FROM orders STOREAS `JSON`").routes[0]
    store = FakeStore("arch/orders/0/000000000000.json", b"")
    with pytest.raises(DamagedObjectError) as caught:
        list(find_records(store, route, TP, 3, 1, committed=10))  # type: ignore[arg-type]
    assert "s3://bucket/arch/orders/0/000000000000.json is empty (0 bytes)" in str(caught.value)
    assert "verify" in (caught.value.hint or "")
    # An object that holds records, asked past its last one: beyond the archive, as before.
    line = json.dumps({"id": 1}).encode() + b"\n"
    store = FakeStore("arch/orders/0/000000000000.json", line * 3)
    with pytest.raises(NotInArchiveError, match="beyond the archive"):
        list(find_records(store, route, TP, 5, 1, committed=3))  # type: ignore[arg-type]

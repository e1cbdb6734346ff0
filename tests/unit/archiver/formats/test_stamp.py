"""Each attempt's objects are its own (commit_protocol=log, issue 37): the stamp in the bytes
where the format has a place readers ignore (Parquet and Avro file metadata, the gzip
header), the attempt's own key where it has none. Read back with independent readers
(pyarrow, fastavro, gzip): the records unchanged, the bytes another attempt's are not."""

from __future__ import annotations

import bz2
import gzip
import io
import json
from collections.abc import Callable
from pathlib import Path

import fastavro
import pyarrow.parquet as pq
import pytest
from backports import zstd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.model import TopicPartition, WorkUnit
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.stamp import METADATA_KEY, has_place
from kafka_archive.archiver.protocol.tasks import Stamp
from kafka_archive.archiver.write import objects
from kafka_archive.archiver.write.objects import Objects

PLANNED = "arch/t/0/000000000007"


def _route(fmt: str, props: str = "") -> kcql.Route:
    text = f"INSERT INTO bkt:arch SELECT * FROM t STOREAS `{fmt}` {props}"
    return kcql.parse(text).routes[0]


def _write(
    fmt: str, props: str, values: list[int], stamp: Stamp | None, spool: Path
) -> tuple[str, bytes]:
    """The key and bytes of one object holding ``values`` (JSON numbers in objects)."""
    unit = WorkUnit(0, _route(fmt, props), TopicPartition("t", 0), 0, 100, "run", "job", "g")
    made = Objects(unit, None, str(spool), None, None, False, stamp)  # type: ignore[arg-type]
    key = made.key(PLANNED + ".ext")
    chunk = made.open(key, 7, 1000)
    for i, v in enumerate(values):
        value = json.dumps({"n": v}).encode()
        objects.write(chunk, Record("t", 0, 7 + i, 1000, None, value))
    closed = objects.close(chunk)
    assert closed.path is not None
    data = closed.path.read_bytes()
    objects.release(closed.path, closed.upload)
    return key, data


A = Stamp("r1", 3, 5 << 40 | 17)
B = Stamp("r1", 3, 6 << 40 | 2)
_SETTINGS = settings(
    deadline=None, max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
_VALUES = st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=30)


@_SETTINGS
@given(values=_VALUES)
def test_parquet_carries_the_stamp_in_its_key_value_metadata(
    tmp_path: Path, values: list[int]
) -> None:
    key_a, a = _write("PARQUET", "", values, A, tmp_path)
    key_b, b = _write("PARQUET", "", values, B, tmp_path)
    assert key_a == key_b == PLANNED + ".ext" and a != b
    for data, stamp in ((a, A), (b, B)):
        parquet = pq.ParquetFile(io.BytesIO(data))
        assert parquet.metadata.metadata[METADATA_KEY.encode()] == stamp.text.encode()
        assert [r["n"] for r in parquet.read().to_pylist()] == values


@_SETTINGS
@given(values=_VALUES)
def test_avro_carries_the_stamp_in_its_file_metadata(tmp_path: Path, values: list[int]) -> None:
    key_a, a = _write("AVRO", "", values, A, tmp_path)
    key_b, b = _write("AVRO", "", values, B, tmp_path)
    assert key_a == key_b == PLANNED + ".ext" and a != b
    for data, stamp in ((a, A), (b, B)):
        reader = fastavro.reader(io.BytesIO(data))
        assert reader.metadata[METADATA_KEY] == stamp.text
        assert [r["n"] for r in reader] == values  # type: ignore[call-overload,index]


@_SETTINGS
@given(values=_VALUES, fmt=st.sampled_from(["JSON", "CSV", "TEXT", "BYTES"]))
def test_gzip_carries_the_stamp_in_its_header_name(
    tmp_path: Path, values: list[int], fmt: str
) -> None:
    props = "PROPERTIES('store.compression'='gzip')"
    key_a, a = _write(fmt, props, values, A, tmp_path)
    key_b, b = _write(fmt, props, values, B, tmp_path)
    _, plain = _write(fmt, props, values, None, tmp_path)
    assert key_a == key_b == PLANNED + ".ext" and a != b
    # RFC 1952: FLG bit 3 (FNAME), then after MTIME, XFL, OS a zero-terminated name.
    for data, stamp in ((a, A), (b, B)):
        assert data[3] & 0x08
        assert data[10:].split(b"\0", 1)[0] == stamp.text.encode()
        assert gzip.decompress(data) == gzip.decompress(plain)
    assert not plain[3] & 0x08  # the states protocol's bytes stay as they were


@_SETTINGS
@given(
    values=_VALUES,
    fmt=st.sampled_from(["JSON", "CSV", "TEXT", "BYTES"]),
    codec=st.sampled_from(["none", "bzip2", "zstd"]),
)
def test_no_place_in_the_bytes_means_a_key_of_the_attempt_s_own(
    tmp_path: Path, values: list[int], fmt: str, codec: str
) -> None:
    props = f"PROPERTIES('store.compression'='{codec}')"
    assert not has_place(_route(fmt, props))
    key_a, a = _write(fmt, props, values, A, tmp_path)
    key_b, b = _write(fmt, props, values, B, tmp_path)
    key, plain = _write(fmt, props, values, None, tmp_path)
    assert key == PLANNED + ".ext"
    assert key_a == f"{PLANNED}.e3a{A.attempt}.ext" and key_b == f"{PLANNED}.e3a{B.attempt}.ext"
    unpacks: dict[str, Callable[[bytes], bytes]] = {
        "none": bytes,
        "bzip2": bz2.decompress,
        "zstd": zstd.decompress,
    }
    unpack = unpacks[codec]
    assert unpack(a) == unpack(b) == unpack(plain)  # the bytes are the records' alone


@pytest.mark.parametrize("fmt", ["PARQUET", "AVRO"])
def test_without_a_stamp_the_bytes_carry_none(tmp_path: Path, fmt: str) -> None:
    key, data = _write(fmt, "", [1, 2], None, tmp_path)
    assert key == PLANNED + ".ext"
    if fmt == "PARQUET":
        meta = pq.ParquetFile(io.BytesIO(data)).metadata.metadata or {}
        assert METADATA_KEY.encode() not in meta
    else:
        assert METADATA_KEY not in fastavro.reader(io.BytesIO(data)).metadata

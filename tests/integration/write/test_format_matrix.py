"""Every STOREAS, with and without PARTITIONBY, through `run`: objects read back with
independent readers (json, fastavro, pyarrow, csv, the BYTES framing by hand), every record
exactly once, with the right fields and under the right path."""

from __future__ import annotations

import csv
import io
import json
import re
import struct
from collections.abc import Callable
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from archive_helpers import Bed
from confluent_kafka import Producer

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

COUNTRIES = ("DE", "FR")


def values(data: bytes, fmt: str) -> list[Any]:
    """The stored values of one object as plain Python values, by an independent reader."""
    if fmt == "JSON":
        return [json.loads(line) for line in data.decode().splitlines()]
    if fmt == "AVRO":
        return [r for r in fastavro.reader(io.BytesIO(data))]
    if fmt == "PARQUET":
        return pq.read_table(pa.BufferReader(data)).to_pylist()
    if fmt in ("CSV", "CSV_WITHHEADERS"):
        rows = list(csv.reader(io.StringIO(data.decode(), newline="")))
        if fmt == "CSV_WITHHEADERS":
            header, rows = rows[0], rows[1:]
            assert header == ["id", "name"]
        return [{"id": int(r[0]), "name": r[1]} for r in rows]
    if fmt == "TEXT":
        return [json.loads(line) for line in data.decode().splitlines()]
    out, pos = [], 0  # BYTES: 8-byte big-endian length, then the value
    while pos < len(data):
        (size,) = struct.unpack(">q", data[pos : pos + 8])
        out.append(json.loads(data[pos + 8 : pos + 8 + size]))
        pos += 8 + size
    return out


@pytest.fixture(scope="module")
def countries_topic(module_bed: Bed) -> str:
    """60 JSON records over 2 partitions, each with a country header: made once, every test
    archives it into a bucket of its own (a run only reads the topic)."""
    name = module_bed.topic(partitions=2)
    producer = Producer({"bootstrap.servers": module_bed.broker, "linger.ms": 5})
    for i in range(60):
        producer.produce(
            name,
            value=json.dumps({"id": i, "name": f"n{i}"}).encode(),
            partition=i % 2,
            headers=[("country", COUNTRIES[i % 3 % 2].encode())],
        )
    assert producer.flush(30) == 0
    return name


@pytest.mark.parametrize("partitioned", [False, True], ids=["plain", "partitionby"])
@pytest.mark.parametrize(
    "fmt", ["JSON", "AVRO", "PARQUET", "CSV", "CSV_WITHHEADERS", "TEXT", "BYTES"]
)
def test_every_format_with_and_without_partitionby(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    countries_topic: str,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    fmt: str,
    partitioned: bool,
) -> None:
    name, bkt = countries_topic, bucket()
    clause = "PARTITIONBY _header.country " if partitioned else ""
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} {clause}STOREAS {fmt} WITH_FLUSH_COUNT = 7"
    args = ["--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url", s3_endpoint]
    assert main(["run", *args]) == 0, capsys.readouterr().err

    ext = {"CSV_WITHHEADERS": "csv"}.get(fmt, fmt.lower())
    if partitioned:
        key_re = re.compile(
            rf"^arch/country=(?P<country>DE|FR)/{re.escape(name)}\((?P<p>\d)_\d{{12}}\)\.{ext}$"
        )
    else:
        key_re = re.compile(rf"^arch/{re.escape(name)}/(?P<p>\d)/\d{{12}}\.{ext}$")
    seen: list[int] = []
    for item in s3_client.list_objects_v2(Bucket=bkt, Prefix="arch/")["Contents"]:
        key = item["Key"]
        if "/.kafka-archive/" in key:
            continue
        match = key_re.match(key)
        assert match, key
        stored = values(s3_client.get_object(Bucket=bkt, Key=key)["Body"].read(), fmt)
        assert 0 < len(stored) <= 7
        for value in stored:
            if fmt in ("AVRO", "PARQUET"):  # the type rules: an inferred number is a double
                assert isinstance(value["id"], float), value
            i = int(value["id"])
            assert value == {"id": i, "name": f"n{i}"}
            assert int(match["p"]) == i % 2
            if partitioned:
                assert match["country"] == COUNTRIES[i % 3 % 2]
        seen.extend(v["id"] for v in stored)
    assert sorted(seen) == list(range(60)), "every record exactly once"
    capsys.readouterr()
    assert main(["verify", *args]) == 0, capsys.readouterr().out

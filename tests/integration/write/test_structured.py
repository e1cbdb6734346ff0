"""STOREAS AVRO and PARQUET through `run`: files that fastavro and pyarrow read, one
schema per object (a value with a new schema starts a new object), verified against Kafka.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from kafka_archive.cli import main

pytestmark = pytest.mark.integration


def value(i: int) -> dict[str, Any]:
    if 40 <= i < 60:  # a schema change mid-stream: id becomes a string, a field is added
        return {"id": f"#{i}", "region": "eu"}
    return {"id": i, "name": f"n{i}", "price": i / 4, "tags": ["a"] * (1 + i % 3)}


def read_rows(fmt: str, data: bytes) -> list[dict[str, Any]]:
    if fmt == "AVRO":
        return [r for r in fastavro.reader(io.BytesIO(data)) if isinstance(r, dict)]
    return pq.read_table(pa.BufferReader(data)).to_pylist()


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
def test_structured_objects_roll_on_a_new_schema_and_hold_every_record_once(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    fmt: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    producer = Producer({"bootstrap.servers": broker})
    for i in range(100):
        producer.produce(name, value=json.dumps(value(i)).encode(), partition=0)
    assert producer.flush(30) == 0
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `{fmt}` WITH_FLUSH_COUNT = 30"
    args = ("--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url", s3_endpoint)
    assert main(["run", *args]) == 0, capsys.readouterr().err

    listing = s3_client.list_objects_v2(Bucket=bkt, Prefix=f"arch/{name}/0/")["Contents"]
    keys = sorted(item["Key"] for item in listing)
    ext = fmt.lower()
    # 0..29, 30..39 (rolled by the new schema), 40..59, 60..89, 90..99
    assert keys == [f"arch/{name}/0/{o:012d}.{ext}" for o in (0, 30, 40, 60, 90)]
    rows: list[dict[str, Any]] = []
    for key in keys:
        data = s3_client.get_object(Bucket=bkt, Key=key)["Body"].read()
        rows.extend(read_rows(fmt, data))
    assert len(rows) == 100
    for i, row in enumerate(rows):
        expected = value(i)
        assert {k: v for k, v in row.items() if v is not None} == {
            k: v for k, v in expected.items() if v is not None
        }
    capsys.readouterr()
    assert main(["verify", *args]) == 0, capsys.readouterr().out


@pytest.mark.parametrize(
    ("fmt", "read"),
    [
        ("JSON", lambda data: [json.loads(line) for line in data.decode().splitlines()]),
        (
            "CSV_WITHHEADERS",
            lambda data: [
                dict(zip(["order_id", "customer", "country", "offset"], row, strict=True))
                for row in csv.reader(io.StringIO(data.decode(), newline=""))
            ][1:],
        ),
        ("PARQUET", lambda data: pq.read_table(pa.BufferReader(data)).to_pylist()),
    ],
    ids=["json", "csv", "parquet"],
)
def test_select_projects_and_renames_then_verifies(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    fmt: str,
    read: Callable[[bytes], list[dict[str, Any]]],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    producer = Producer({"bootstrap.servers": broker})
    for i in range(50):
        order = {"id": i, "customer": {"name": f"c{i}", "card": "4111"}, "secret": "s"}
        producer.produce(name, value=json.dumps(order).encode(), headers=[("country", b"DE")])
    assert producer.flush(30) == 0
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT id AS order_id, _value.customer.name AS customer, "
        f"_header.country, _offset FROM {name} STOREAS {fmt}"
    )
    args = ("--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url", s3_endpoint)
    assert main(["run", *args]) == 0, capsys.readouterr().err
    (item,) = s3_client.list_objects_v2(Bucket=bkt, Prefix=f"arch/{name}/")["Contents"]
    rows = read(s3_client.get_object(Bucket=bkt, Key=item["Key"])["Body"].read())
    as_text = fmt == "CSV_WITHHEADERS"
    assert rows == [
        {
            "order_id": str(i) if as_text else i,
            "customer": f"c{i}",
            "country": "DE",
            "offset": str(i) if as_text else i,
        }
        for i in range(50)
    ]
    capsys.readouterr()
    assert main(["verify", *args]) == 0, capsys.readouterr().out

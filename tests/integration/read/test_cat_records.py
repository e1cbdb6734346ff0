"""`kafka-archive cat` prints every record form of every archive: envelope archives in each
format (keys, values and header values as bytes), and `--output raw`."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

Original = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]

RECORDS: list[Original] = [
    (b"k0", b'{"id":0}', [("h", b"v")], 1_700_000_000_000),
    (b"\xff\x00", b"\x00\x01\xfe", [("dup", b"a"), ("dup", None)], 1_700_000_000_001),
    (None, None, [], 1_700_000_000_002),
    (b'{"k":1}', b"", [("bin", b"\xc3\x28")], 1_700_000_000_003),
    ("ü".encode(), 'naïve "text"'.encode(), [], 1_700_000_000_004),
]


def decoded(stored: Any, encoding: str | None) -> bytes | None:
    """The bytes a rendered field stands for, decoded independently of kafka-archive."""
    if stored is None:
        return None
    if encoding == "json":
        return json.dumps(stored, separators=(",", ":"), ensure_ascii=False).encode()
    if encoding == "text":
        return str(stored).encode()
    assert encoding == "base64", encoding
    return base64.b64decode(stored)


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET", "JSON"])
def test_cat_of_an_envelope_archive_prints_each_record_exactly(
    broker: str,
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    fmt: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    producer = Producer({"bootstrap.servers": broker})
    for key, value, headers, timestamp in RECORDS:
        producer.produce(
            name, key=key, value=value, headers=headers, partition=0, timestamp=timestamp
        )
    assert producer.flush(30) == 0
    kcql = (
        f"INSERT INTO {bkt}:env SELECT * FROM {name} STOREAS {fmt} WITH_FLUSH_COUNT = 2 "
        "PROPERTIES('store.envelope'=true)"
    )
    assert (
        main(["run", "--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url", s3_endpoint])
        == 0
    ), capsys.readouterr().err
    capsys.readouterr()
    for offset, (key, value, headers, timestamp) in enumerate(RECORDS):
        code = main(
            [
                "cat",
                "--from",
                f"{bkt}:env",
                "--topic",
                name,
                "--partition",
                "0",
                "--offset",
                str(offset),
                "--endpoint-url",
                s3_endpoint,
            ]
        )
        out, err = capsys.readouterr()
        assert code == 0, err
        (line,) = out.splitlines()
        doc = json.loads(line)
        assert (doc["offset"], doc["offset_exact"], doc["timestamp"]) == (offset, True, timestamp)
        assert decoded(doc["key"], doc["key_encoding"]) == key
        assert decoded(doc["value"], doc["value_encoding"]) == value
        assert [(n, decoded(v, e)) for n, v, e in doc["headers"]] == headers


def test_cat_output_raw_writes_the_value_bytes(
    broker: str,
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capfdbinary: pytest.CaptureFixture[bytes],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    values = [b"\x00\xff\n", uuid.uuid4().bytes, b"", "naïve".encode()]
    producer = Producer({"bootstrap.servers": broker})
    for value in values:
        producer.produce(name, value=value, partition=0)
    assert producer.flush(30) == 0
    kcql = f"INSERT INTO {bkt}:raw SELECT * FROM {name} STOREAS BYTES"
    assert (
        main(["run", "--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url", s3_endpoint])
        == 0
    )
    capfdbinary.readouterr()
    for offset, value in enumerate(values):
        code = main(
            [
                "cat",
                "--from",
                f"{bkt}:raw",
                "--topic",
                name,
                "--partition",
                "0",
                "--offset",
                str(offset),
                "--output",
                "raw",
                "--endpoint-url",
                s3_endpoint,
            ]
        )
        out, err = capfdbinary.readouterr()
        assert code == 0, err
        assert out == value

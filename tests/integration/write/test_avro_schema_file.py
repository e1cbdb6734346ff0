"""STOREAS AVRO and PARQUET with a user-given schema: PROPERTIES('avro.schema.file'='….avsc').

Every AVRO object is written with the file's schema, every PARQUET object has its columns
(read with fastavro and pyarrow, not our reader); a value that does not match it is refused
by the error policy; verify accepts the archive; a file that is missing or not a schema
stops the run before anything is written.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
def test_objects_use_the_schema_file_and_values_that_do_not_match_are_refused(
    fmt: str,
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    avsc = tmp_path / "orders.avsc"
    avsc.write_text(json.dumps(SCHEMA))
    name, bkt = topic(partitions=1), bucket()
    values: list[dict[str, Any]] = []
    for i in range(30):
        value: dict[str, Any] = {"id": i, "amount": i}  # an int in a double field is fine
        if i % 3 == 0:
            value["note"] = f"n{i}"
        if i % 5 == 0:
            value["tags"] = ["vip"]
        values.append(value)
    values[7] = {"id": "seven", "amount": 1.0}  # a string where the schema has a long
    producer = Producer({"bootstrap.servers": broker})
    for value in values:
        producer.produce(name, value=json.dumps(value).encode(), partition=0)
    assert producer.flush(30) == 0
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS {fmt} "
        f"PROPERTIES('avro.schema.file'='{avsc}', 'error.policy'='skip')"
    )
    args = ["--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url", s3_endpoint]
    assert main(["run", *args]) == 0, capsys.readouterr().err

    listing = s3_client.list_objects_v2(Bucket=bkt, Prefix="arch/")["Contents"]
    keys = sorted(i["Key"] for i in listing if "/.kafka-archive/" not in i["Key"])
    assert len(keys) == 1  # one schema: nothing rolls on a value shaped differently
    data = s3_client.get_object(Bucket=bkt, Key=keys[0])["Body"].read()
    if fmt == "AVRO":
        reader = fastavro.reader(io.BytesIO(data))
        rows = list(reader)
        assert reader.writer_schema["name"] == "shop.Order"
    else:
        table = pq.read_table(pa.BufferReader(data))
        rows = table.to_pylist()
        assert table.schema.names == ["id", "amount", "tags", "note"]
        assert table.schema.field("amount").type == pa.float64()
    expected = [
        {"tags": [], "note": None, **v, "amount": float(v["amount"])}
        for i, v in enumerate(values)
        if i != 7
    ]
    assert rows == expected
    capsys.readouterr()
    assert main(["verify", *args]) == 0, capsys.readouterr().out


@pytest.mark.parametrize("content", [None, '{"type": "record"}'], ids=["missing", "bad"])
def test_a_schema_file_that_cannot_be_used_stops_the_run_before_it_starts(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    content: str | None,
) -> None:
    avsc = tmp_path / "orders.avsc"
    if content is not None:
        avsc.write_text(content)
    name, bkt = topic(partitions=1), bucket()
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS AVRO "
        f"PROPERTIES('avro.schema.file'='{avsc}')"
    )
    code = main(
        ["run", "--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url", s3_endpoint]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    # One error line, pointed at the setting (the KCQL excerpt and caret follow it).
    first = err.strip().splitlines()[0]
    assert first.startswith("kcql:1:") and str(avsc) in first and "Traceback" not in err
    assert s3_client.list_objects_v2(Bucket=bkt).get("KeyCount", 0) == 0

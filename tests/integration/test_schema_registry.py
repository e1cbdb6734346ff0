"""Values in the Confluent Avro wire format (magic 0, schema id, Avro datum), decoded with
their writer schema from a Schema Registry — here a small HTTP registry of our own on
loopback serving GET /schemas/ids/{id}, as the real one does."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"},
        {"name": "country", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}  # fmt: skip
SCHEMA_ID = 42


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def do_GET(self) -> None:
            if self.path == f"/schemas/ids/{SCHEMA_ID}":
                status, body = 200, json.dumps({"schema": json.dumps(SCHEMA)}).encode()
            else:
                status, body = 404, b'{"error_code":40403,"message":"Schema not found"}'
            self.send_response(status)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def framed(datum: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    out.write(b"\x00" + SCHEMA_ID.to_bytes(4, "big"))
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMA), datum)
    return out.getvalue()


def order(i: int) -> dict[str, Any]:
    return {"id": i, "country": ("DE", "FR")[i % 2], "amount": i / 4,
            "note": None if i % 3 else f"n{i}"}  # fmt: skip


@pytest.mark.parametrize("fmt", ["JSON", "AVRO", "PARQUET"])
def test_registry_framed_avro_values_are_decoded_partitioned_and_verified(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    registry: str,
    fmt: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    producer = Producer({"bootstrap.servers": broker})
    for i in range(40):
        producer.produce(name, value=framed(order(i)), partition=0)
    assert producer.flush(30) == 0
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PARTITIONBY country STOREAS {fmt}"
    args = ["--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url", s3_endpoint,
            "--schema-registry-url", registry]  # fmt: skip
    assert main(["run", *args]) == 0, capsys.readouterr().err

    rows: dict[str, list[dict[str, Any]]] = {}
    listing = s3_client.list_objects_v2(Bucket=bkt, Prefix="arch/")["Contents"]
    for item in sorted(listing, key=lambda item: item["Key"]):  # offset order per folder
        if "/.kafka-archive/" in item["Key"]:
            continue
        data = s3_client.get_object(Bucket=bkt, Key=item["Key"])["Body"].read()
        if fmt == "JSON":
            found = [json.loads(line) for line in data.decode().splitlines()]
        elif fmt == "AVRO":
            found = [r for r in fastavro.reader(io.BytesIO(data)) if isinstance(r, dict)]
        else:
            found = pq.read_table(pa.BufferReader(data)).to_pylist()
        rows.setdefault(item["Key"].split("/")[1], []).extend(found)
    assert sorted(rows) == ["DE", "FR"]
    for country, found in rows.items():
        expected = [order(i) for i in range(40) if order(i)["country"] == country]
        assert [{k: v for k, v in r.items() if v is not None} for r in found] == [
            {k: v for k, v in e.items() if v is not None} for e in expected
        ]
    capsys.readouterr()
    assert main(["verify", *args]) == 0, capsys.readouterr().out


def test_an_unknown_schema_id_stops_the_run_with_one_line(
    broker: str,
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    registry: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    producer = Producer({"bootstrap.servers": broker})
    producer.produce(name, value=b"\x00\x00\x00\x00\x07" + b"\x02", partition=0)
    assert producer.flush(30) == 0
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS AVRO"
    code = main(["run", "--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url",
                 s3_endpoint, "--schema-registry-url", registry])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2, err
    assert "HTTP 404 for schema id 7" in err and "Traceback" not in err

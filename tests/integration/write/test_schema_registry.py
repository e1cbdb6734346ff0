"""Values in the Confluent Avro wire format (magic 0, schema id, Avro datum), decoded with
their writer schema from a Schema Registry — here a small HTTP registry of our own on
loopback serving GET /schemas/ids/{id} and GET /subjects/{subject}/versions/{version}, as
the real one does (no registry that speaks Confluent's API installs here: docs/development.md);
and a route's schema declared by a subject ('avro.schema.subject')."""

from __future__ import annotations

import io
import json
import threading
import urllib.parse
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
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "country", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
SCHEMA_ID = 42
# Version 2 of the subject: adds a field, with logical types Avro readers must get back.
SCHEMA_V2 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "paid", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
SCHEMA_V2_ID = 43
# The subject a route may declare its schema by ('avro.schema.subject'): version 1 of plain
# types, version 2 adds a field with a default.
ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
ORDER_V2 = {
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "channel", "type": "string", "default": "web"}],
}
SCHEMAS = {SCHEMA_ID: SCHEMA, SCHEMA_V2_ID: SCHEMA_V2, 44: ORDER_V1, 45: ORDER_V2}
SUBJECTS = {"orders-value": [44, 45]}  # the ids of versions 1, 2, ...


def subject_answer(path: str) -> tuple[int, dict[str, Any]]:
    """``GET /subjects/{subject}/versions/{version}`` as Confluent's registry answers it:
    ``{"subject", "id", "version", "schema"}`` (no ``schemaType`` for Avro), 404 with error
    code 40401 (no subject) or 40402 (no version), 422 with 42202 (not a version)."""
    _, _, subject, _, version = path.split("/", 4)
    subject = urllib.parse.unquote(subject)
    if subject not in SUBJECTS:
        return 404, {"error_code": 40401, "message": f"Subject '{subject}' not found."}
    ids = SUBJECTS[subject]
    if version in ("latest", "-1"):
        number = len(ids)
    elif version.isdigit() and int(version) > 0:
        number = int(version)
    else:
        return 422, {
            "error_code": 42202,
            "message": f"The specified version '{version}' is not a valid version id.",
        }
    if number > len(ids):
        return 404, {"error_code": 40402, "message": f"Version {number} not found."}
    ident = ids[number - 1]
    return 200, {
        "subject": subject,
        "version": number,
        "id": ident,
        "schema": json.dumps(SCHEMAS[ident]),
    }


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def do_GET(self) -> None:
            ident = self.path.rsplit("/", 1)[-1]
            if self.path.startswith("/schemas/ids/") and ident.isdigit() and int(ident) in SCHEMAS:
                status, body = 200, json.dumps({"schema": json.dumps(SCHEMAS[int(ident)])}).encode()
            elif self.path.startswith("/subjects/") and self.path.count("/") == 4:
                status, answer = subject_answer(self.path)
                body = json.dumps(answer).encode()
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


def framed(datum: dict[str, Any], ident: int = SCHEMA_ID) -> bytes:
    out = io.BytesIO()
    out.write(b"\x00" + ident.to_bytes(4, "big"))
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMAS[ident]), datum)
    return out.getvalue()


def order(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "country": ("DE", "FR")[i % 2],
        "amount": i / 4,
        "note": None if i % 3 else f"n{i}",
    }


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
    args = [
        "--kcql",
        kcql,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        s3_endpoint,
        "--schema-registry-url",
        registry,
    ]
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
        rows.setdefault(item["Key"].split("/")[1].removeprefix("country="), []).extend(found)
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
    code = main(
        [
            "run",
            "--kcql",
            kcql,
            "--bootstrap-servers",
            broker,
            "--endpoint-url",
            s3_endpoint,
            "--schema-registry-url",
            registry,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert "HTTP 404 for schema id 7" in err and "Traceback" not in err


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
def test_objects_take_their_schema_from_the_registry_one_schema_id_per_object(
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
    """Registry values: AVRO objects embed the writer schema as registered (names, unions,
    logical types), PARQUET objects get its columns (JSON form: times and decimals as text);
    a value of another schema id starts a new object, and a nullable field that is null in
    the first record does not split the object."""
    import datetime
    import decimal

    name, bkt = topic(partitions=1), bucket()
    paid = datetime.datetime(2026, 11, 23, 10, 0, tzinfo=datetime.UTC)
    v2 = [
        {
            "id": 100 + i,
            "paid": paid,
            "price": decimal.Decimal(f"{i}.25"),
            "note": None if i < 5 else "late",
        }
        for i in range(10)
    ]
    producer = Producer({"bootstrap.servers": broker})
    for i in range(10):
        producer.produce(name, value=framed(order(i)), partition=0)
    for datum in v2:
        producer.produce(name, value=framed(datum, SCHEMA_V2_ID), partition=0)
    assert producer.flush(30) == 0
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS {fmt}"
    args = [
        "--kcql",
        kcql,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        s3_endpoint,
        "--schema-registry-url",
        registry,
    ]
    assert main(["run", *args]) == 0, capsys.readouterr().err

    listing = s3_client.list_objects_v2(Bucket=bkt, Prefix="arch/")["Contents"]
    keys = sorted(i["Key"] for i in listing if "/.kafka-archive/" not in i["Key"])
    ext = fmt.lower()
    assert [k.rsplit("/", 1)[1] for k in keys] == [f"000000000000.{ext}", f"000000000010.{ext}"]
    bodies = [s3_client.get_object(Bucket=bkt, Key=k)["Body"].read() for k in keys]
    if fmt == "AVRO":
        readers = [fastavro.reader(io.BytesIO(body)) for body in bodies]
        first, second = ([r for r in reader] for reader in readers)
        assert readers[0].writer_schema["name"] == "Order"
        assert readers[1].writer_schema["name"] == "shop.Order"
        assert first == [order(i) for i in range(10)]
        assert second == v2  # timestamps and decimals come back as such
    else:
        tables = [pq.read_table(pa.BufferReader(body)) for body in bodies]
        assert tables[1].schema.field("note").type == pa.string()
        assert tables[0].to_pylist() == [order(i) for i in range(10)]
        assert tables[1].to_pylist() == [
            {**d, "paid": "2026-11-23T10:00:00+00:00", "price": str(d["price"])} for d in v2
        ]
    capsys.readouterr()
    assert main(["verify", *args]) == 0, capsys.readouterr().out


def json_order(i: int) -> dict[str, Any]:
    """A plain JSON value (not framed): whole amounts, ``note`` always null: alone, the type
    rules would store ``amount`` as double and ``note`` as a string, ``id`` as double."""
    return {"id": i, "amount": i * 2, "note": None}


def subject_args(
    kcql: str, broker: str, s3_endpoint: str, registry: str, command: str = "run"
) -> list[str]:
    return [
        command,
        "--kcql",
        kcql,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        s3_endpoint,
        "--schema-registry-url",
        registry,
    ]


@pytest.mark.parametrize(
    ("fmt", "version"), [("AVRO", None), ("PARQUET", 1)], ids=["AVRO-latest", "PARQUET-v1"]
)
def test_a_subject_declares_the_routes_schema(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
    registry: str,
    fmt: str,
    version: int | None,
) -> None:
    """JSON values stored under the subject's schema: AVRO objects are written with the
    latest version (the default of ``channel`` filled in), PARQUET objects have version
    1's columns (``id`` a long, ``note`` a string though null throughout)."""
    name, bkt = topic(partitions=1), bucket()
    produce(name, 12, partitions=1, value=json_order)
    props = "'avro.schema.subject'='orders-value'"
    if version is not None:
        props += f", 'avro.schema.subject.version'={version}"
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS {fmt} PROPERTIES({props})"
    assert main(subject_args(kcql, broker, s3_endpoint, registry)) == 0, capsys.readouterr().err
    keys = [
        o["Key"]
        for o in s3_client.list_objects_v2(Bucket=bkt, Prefix="arch/")["Contents"]
        if "/.kafka-archive/" not in o["Key"]
    ]
    assert keys
    rows: list[dict[str, Any]] = []
    for key in sorted(keys):
        data = s3_client.get_object(Bucket=bkt, Key=key)["Body"].read()
        if fmt == "AVRO":
            reader = fastavro.reader(io.BytesIO(data))
            assert reader.writer_schema is not None
            assert reader.writer_schema["name"] == "shop.Order"
            assert [f["name"] for f in reader.writer_schema["fields"]] == [
                "id",
                "amount",
                "note",
                "channel",
            ]
            rows += [r for r in reader if isinstance(r, dict)]
        else:
            table = pq.read_table(pa.BufferReader(data))
            assert table.schema.field("id").type == pa.int64()
            assert table.schema.field("amount").type == pa.float64()
            assert table.schema.field("note").type == pa.string()
            assert "channel" not in table.schema.names
            rows += table.to_pylist()
    extra = {"channel": "web"} if fmt == "AVRO" else {}
    assert rows == [{"id": i, "amount": float(i * 2), "note": None, **extra} for i in range(12)]
    capsys.readouterr()
    verified = main(subject_args(kcql, broker, s3_endpoint, registry, "verify"))
    assert verified == 0, capsys.readouterr().out


@pytest.mark.parametrize(
    ("props", "words"),
    [
        ("'avro.schema.subject'='nope-value'", "subject 'nope-value' version latest: Subject"),
        (
            "'avro.schema.subject'='orders-value', 'avro.schema.subject.version'=9",
            "subject 'orders-value' version 9: Version 9 not found",
        ),
    ],
    ids=["no-subject", "no-version"],
)
def test_a_subject_the_registry_does_not_have_stops_the_run_with_one_line(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
    registry: str,
    props: str,
    words: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    produce(name, 3, partitions=1, value=json_order)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS AVRO PROPERTIES({props})"
    code = main(subject_args(kcql, broker, s3_endpoint, registry))
    err = capsys.readouterr().err
    assert code == 2, err
    assert "HTTP 404" in err and words in err, err
    assert "Traceback" not in err
    assert "Contents" not in s3_client.list_objects_v2(Bucket=bkt, Prefix="arch/")

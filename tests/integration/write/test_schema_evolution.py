"""PROPERTIES('schema.compatibility'=…) through `run`: two producers interleave v1 and v2
values record by record; each mode gives the object counts Confluent's meaning implies,
and every record reads back with fastavro / pyarrow under its object's schema. NONE is the
default's behaviour (a new object at every schema change)."""

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
from archive_helpers import run_args
from confluent_kafka import Producer

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

V1 = {
    "type": "record",
    "name": "User",
    "namespace": "evo",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}
# v2 adds a field with a default: compatible both ways (FULL).
V2 = {
    "type": "record",
    "name": "User",
    "namespace": "evo",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
    ],
}
V1_ID, V2_ID = 71, 72
# v3 changes a field's type: no projection either way.
V3 = {
    "type": "record",
    "name": "User",
    "namespace": "evo",
    "fields": [{"name": "id", "type": "string"}, {"name": "name", "type": "string"}],
}
V3_ID = 73
SCHEMAS = {V1_ID: V1, V2_ID: V2, V3_ID: V3}
N, COUNT = 100, 25


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def do_GET(self) -> None:
            ident = self.path.rsplit("/", 1)[-1]
            found = ident.isdigit() and int(ident) in SCHEMAS
            body = json.dumps({"schema": json.dumps(SCHEMAS[int(ident)])} if found else {})
            self.send_response(200 if found else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def framed(ident: int, datum: dict[str, Any]) -> bytes:
    out = io.BytesIO(b"\x00" + ident.to_bytes(4, "big"))
    out.seek(5)
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMAS[ident]), datum)
    return out.getvalue()


def registry_value(i: int) -> bytes:
    if i % 2 == 0:
        return framed(V1_ID, {"id": i, "name": f"n{i}"})
    return framed(V2_ID, {"id": i, "name": f"n{i}", "email": f"u{i}@x"})


def json_value(i: int) -> bytes:
    # v2 renames 'name' to 'label': neither shape fits the other's inferred schema, but
    # both fit the schema an open object grows to.
    return json.dumps(
        {"id": i, "name": f"n{i}"} if i % 2 == 0 else {"id": i, "label": f"l{i}"}
    ).encode()


def read_objects(s3: Any, bucket: str, fmt: str) -> list[tuple[int, list[str], list[dict]]]:
    """(first offset, the object's field names, its rows) per object, in key order."""
    out = []
    listing = s3.list_objects_v2(Bucket=bucket, Prefix="arch/").get("Contents", [])
    for key in sorted(i["Key"] for i in listing if "/.kafka-archive/" not in i["Key"]):
        data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        if fmt == "AVRO":
            reader = fastavro.reader(io.BytesIO(data))
            names = [f["name"] for f in reader.writer_schema["fields"]]  # type: ignore[index]
            rows = [dict(r) for r in reader]  # type: ignore[arg-type]
        else:
            table = pq.read_table(pa.BufferReader(data))
            names, rows = table.schema.names, table.to_pylist()
        out.append((int(key.rsplit("/", 1)[1].split(".")[0]), names, rows))
    return out


def archive(
    broker: str,
    s3: str,
    topic: str,
    bucket: str,
    fmt: str,
    mode: str | None,
    registry: str | None,
) -> None:
    props = f"'flush.count'={COUNT}" + (f", 'schema.compatibility'='{mode}'" if mode else "")
    kcql = f"INSERT INTO {bucket}:arch SELECT * FROM {topic} STOREAS `{fmt}` PROPERTIES({props})"
    args = run_args(kcql, broker, s3)
    if registry:
        args += ["--schema-registry-url", registry]
    assert main(args) == 0


# First offsets of the objects, per mode (flush.count 25, v1 at even offsets, v2 at odd).
EVERY_RECORD = list(range(N))  # NONE: every change of schema rolls
BACKWARD_STARTS = [0, 1, 26, 51, 76]  # v1 alone, then v2 objects holding v1 projected
FORWARD_STARTS = [0, 25, 50, 75]  # v1 objects holding v2 projected: only the count rolls


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
@pytest.mark.parametrize("source", ["registry", "json"])
def test_interleaved_schema_versions_in_every_mode(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    registry: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    fmt: str,
    source: str,
) -> None:
    name = topic(partitions=1)
    # The schema versions take turns record by record; idempotence keeps offset i record i.
    value = registry_value if source == "registry" else json_value
    produce(name, N, partitions=1, value=value, enable_idempotence=True)
    url = registry if source == "registry" else None
    newer = "email" if source == "registry" else "label"
    found: dict[str | None, list[tuple[int, list[str], list[dict]]]] = {}
    for run in (None, "NONE", "BACKWARD", "FULL", "FORWARD", "BACKWARD again"):
        mode = run.split()[0] if run else None
        bkt = bucket()
        archive(broker, s3_endpoint, name, bkt, fmt, mode, url)
        found[run] = read_objects(s3_client, bkt, fmt)
        rows = [row for _, _, object_rows in found[mode] for row in object_rows]
        assert [r["id"] for r in rows] == list(range(N)), mode  # every record, once, in order
        assert all(r["name"] == f"n{int(r['id'])}" for r in rows if r["id"] % 2 == 0)

    # verify reads the projected records back as what Kafka holds (a null field is absent).
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `{fmt}` "
        f"PROPERTIES('flush.count'={COUNT}, 'schema.compatibility'='BACKWARD')"
    )
    args = run_args(kcql, broker, s3_endpoint, command="verify")
    assert main([*args, *(["--schema-registry-url", url] if url else [])]) == 0
    # A rerun from the same offset writes the same objects.
    assert found["BACKWARD again"] == found["BACKWARD"]
    if source == "json":
        # An inferred schema grows while the object's schema is open (its first row group,
        # its first 1,000 AVRO values): v1 and v2 values share objects in every mode, a
        # nullable column for each field (README: Formats). Only the count rolls.
        for run, objects in found.items():
            assert [s for s, _, _ in objects] == FORWARD_STARTS, run
            for _, names, rows in objects:
                assert sorted(names) == ["id", "label", "name"], run
                for r in rows:
                    assert (r["name"], r["label"]) == (
                        (f"n{int(r['id'])}", None)
                        if r["id"] % 2 == 0
                        else (None, f"l{int(r['id'])}")
                    )
        return
    # The default is NONE, and NONE rolls at every change of schema.
    assert [(s, n) for s, n, _ in found[None]] == [(s, n) for s, n, _ in found["NONE"]]
    assert [s for s, _, _ in found["NONE"]] == EVERY_RECORD
    for _, names, rows in found["NONE"]:
        (row,) = rows
        assert set(names) == {k for k, v in row.items() if v is not None}

    # BACKWARD and FULL: after the first v2 record every object has the newer schema, and
    # the v1 records in it are projected onto it (the new field null).
    for mode in ("BACKWARD", "FULL"):
        objects = found[mode]
        assert [s for s, _, _ in objects] == BACKWARD_STARTS, mode
        assert newer not in objects[0][1]
        for _, names, rows in objects[1:]:
            assert newer in names and "id" in names
            for r in rows:
                expected = f"u{int(r['id'])}@x" if source == "registry" else f"l{int(r['id'])}"
                assert r[newer] == (expected if r["id"] % 2 else None)

    # FORWARD: objects keep the older schema; v2 records are projected onto it (the newer
    # field dropped; a v2 JSON value lacks 'name', which reads as null).
    objects = found["FORWARD"]
    assert [s for s, _, _ in objects] == FORWARD_STARTS
    for _, names, rows in objects:
        assert newer not in names
        assert all(newer not in r for r in rows)
    if source == "registry":
        rows = [row for _, _, object_rows in objects for row in object_rows]
        assert all(r["name"] == f"n{int(r['id'])}" for r in rows)


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
def test_an_incompatible_change_still_rolls(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    registry: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    fmt: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    producer = Producer({"bootstrap.servers": broker})
    for i in range(6):  # v1, v3, v1, v3 …: v1 (id long) and v3 (id string) do not resolve
        value = (
            framed(V1_ID, {"id": i, "name": f"n{i}"})
            if i % 2 == 0
            else framed(V3_ID, {"id": str(i), "name": f"n{i}"})
        )
        producer.produce(name, value=value, partition=0)
    assert producer.flush(30) == 0
    archive(broker, s3_endpoint, name, bkt, fmt, "BACKWARD", registry)
    objects = read_objects(s3_client, bkt, fmt)
    assert [s for s, _, _ in objects] == list(range(6))
    assert [r["id"] for _, _, rows in objects for r in rows] == [0, "1", 2, "3", 4, "5"]

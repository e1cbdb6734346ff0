"""A whole archive prefix read as one dataset by readers we did not write (issue 35).

The topic has the field shapes real producers send: ``note`` null in some records and in
the whole first object of every group, ``extra`` only in some records, ``amount`` 10 in one
record and 10.5 in the next, ``qty`` null in the first records of some objects and a number
after; PARTITIONBY makes several groups, ``flush.count`` several objects each. The PARQUET
objects are downloaded as they are and read by pyarrow.dataset (hive partitioning), polars'
scan_parquet, Spark SQL (with and without mergeSchema) and DuckDB's read_parquet; AVRO
objects by fastavro, one schema for all; the Iceberg route by pyiceberg's scan. Each must
read every record once, with the values sent.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pytest
from archive_helpers import Bed, run_args

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

RECORDS = 80
FLUSH = 5


def value(i: int) -> dict[str, Any]:
    """Record i: partition i % 2, country by i % 4, so each (partition, country) group gets
    every fourth record: its objects of 5 each hold an ``extra`` (i % 3 == 0) and records
    i < 20 are every group's first object, where ``note`` is null throughout."""
    out: dict[str, Any] = {
        "id": i,
        "country": "DE" if i % 4 < 2 else "FR",
        "note": None if i < 20 or i % 5 == 0 else f"n{i}",
        "amount": 10 if (i // 4) % 2 == 0 else 10.5,
    }
    if i % 3 == 0:
        out["extra"] = f"x{i}"
    if i % 7:  # absent from every seventh record, null in others' first rows below
        out["qty"] = None if i % 20 < 4 else i
    return out


def expected() -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "country": v["country"],
            "note": v["note"],
            "amount": float(v["amount"]),
            "extra": v.get("extra"),
            "qty": None if v.get("qty") is None else float(v["qty"]),
        }
        for i, v in ((i, value(i)) for i in range(RECORDS))
    ]


COLUMNS = ("id", "country", "note", "amount", "extra", "qty")


def normal(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows by id, with the columns of :func:`expected` (ids and numbers as floats)."""
    out = [
        {
            c: (float(r[c]) if c in ("id", "amount", "qty") and r[c] is not None else r[c])
            for c in COLUMNS
        }
        for r in rows
    ]
    return sorted(out, key=lambda r: r["id"])


def want() -> list[dict[str, Any]]:
    return normal(expected())


def archive(
    fmt: str,
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    tmp_path: Path,
) -> Path:
    """Archive the topic into a fresh bucket and download every object under its key (a
    failed run's stderr is in the test's captured output)."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, RECORDS, partitions=2, value=value)
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} PARTITIONBY country STOREAS {fmt} "
        f"PROPERTIES('flush.count'={FLUSH})"
    )
    assert main(run_args(kcql, broker, s3_endpoint)) == 0
    root = tmp_path / "arch"
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bkt, Prefix="arch/")
    keys = [o["Key"] for p in pages for o in p.get("Contents", ())]
    keys = [k for k in keys if "/.kafka-archive/" not in k]
    assert len(keys) >= 16  # 4 groups of 20 records, 5 a object
    for key in keys:
        path = tmp_path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(s3_client.get_object(Bucket=bkt, Key=key)["Body"].read())
    return root


@pytest.fixture(scope="module")
def parquet_prefix(module_bed: Bed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PARQUET archive, made once: the readers below only read its download."""
    bed = module_bed
    root = tmp_path_factory.mktemp("parquet")
    return archive(
        "PARQUET", bed.broker, bed.endpoint, bed.s3, bed.topic, bed.bucket, bed.produce, root
    )


def test_pyarrow_dataset_with_hive_partitioning(parquet_prefix: Path) -> None:
    import pyarrow.dataset as ds

    table = ds.dataset(parquet_prefix, format="parquet", partitioning="hive").to_table()
    assert normal(table.to_pylist()) == want()


def test_polars_scan_parquet_with_hive_partitioning(parquet_prefix: Path) -> None:
    import polars as pl

    frame = pl.scan_parquet(f"{parquet_prefix}/**/*.parquet", hive_partitioning=True).collect()
    assert normal(frame.to_dicts()) == want()


@pytest.mark.parametrize("merge", [False, True], ids=["plain", "mergeSchema"])
def test_spark_sql(parquet_prefix: Path, spark: Any, merge: bool) -> None:
    from pyspark.sql import SparkSession

    session = SparkSession(spark)
    frame = session.read.option("mergeSchema", str(merge).lower()).parquet(str(parquet_prefix))
    frame.createOrReplaceTempView("archive")
    rows = [r.asDict() for r in session.sql("SELECT * FROM archive").collect()]
    assert normal(rows) == want()


@pytest.mark.parametrize("union", [False, True], ids=["plain", "union_by_name"])
def test_duckdb_read_parquet(parquet_prefix: Path, union: bool) -> None:
    import duckdb

    glob = f"{parquet_prefix}/**/*.parquet"
    with duckdb.connect() as con:
        result = con.execute(
            "SELECT * FROM read_parquet(?, hive_partitioning = true, union_by_name = ?)",
            [glob, union],
        )
        names = [d[0] for d in result.description]
        rows = [dict(zip(names, r, strict=True)) for r in result.fetchall()]
    assert normal(rows) == want()


def test_avro_objects_share_one_schema(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    tmp_path: Path,
) -> None:
    """AVRO under the same rules: the objects' writer schemas agree field by field (a reader
    of the prefix can take any one of them), and every record reads back as sent."""
    root = archive("AVRO", broker, s3_endpoint, s3_client, topic, bucket, produce, tmp_path)
    types: dict[str, set[str]] = {}
    rows: list[dict[str, Any]] = []
    for path in sorted(root.rglob("*.avro")):
        reader = fastavro.reader(io.BytesIO(path.read_bytes()))
        assert reader.writer_schema is not None
        for field in reader.writer_schema["fields"]:
            types.setdefault(field["name"], set()).add(json.dumps(field["type"]))
        rows += list(reader)
    assert {n: len(t) for n, t in types.items()} == {n: 1 for n in types}, types
    assert all('"null"]' not in t and t != '"null"' for ts in types.values() for t in ts)
    got = normal([{c: r.get(c) for c in COLUMNS} for r in rows])
    assert got == want()


def test_iceberg_route_takes_the_same_records(
    broker: str,
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A null-only field in the first files and whole/fractional numbers do not stop an
    Iceberg route (it exited 23, then 10, on every run); pyiceberg reads each record once."""
    from iceberg_helpers import reader_table

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("PYICEBERG_CATALOG__DEFAULT__URI", uri)
    name, bkt = topic(partitions=2), bucket()
    produce(name, RECORDS, partitions=2, value=value)
    kcql = (
        f"INSERT INTO {bkt}:tables/orders SELECT * FROM {name} PARTITIONBY country "
        f"STOREAS PARQUET PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.orders', "
        f"'flush.count'={FLUSH})"
    )
    code = main(run_args(kcql, broker, s3_endpoint))
    assert code == 0, capsys.readouterr().err
    table = reader_table(uri, s3_endpoint, "db.orders")
    assert normal(table.scan().to_arrow().to_pylist()) == want()

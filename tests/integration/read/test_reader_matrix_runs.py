"""A prefix written by two runs reads as one dataset (issue 35): the second run's objects
take the column types the route committed before, not the defaults of their own records.

Run 1 sends ``note: "x"``, ``n: 1.5``, ``ratio: 0.5``, ``flag: true``; run 2 sends ``note``,
``ratio`` and ``flag`` null in every record and ``n`` only whole. Without the route's
recorded types run 2 stored ``ratio`` and ``flag`` as strings (the default of a field null
throughout), beside run 1's double and boolean: Spark refuses the prefix without
``mergeSchema`` and the AVRO objects disagree. Read with pyarrow.dataset (hive), DuckDB and
Spark SQL (no ``mergeSchema``) over the downloaded PARQUET objects; fastavro over the AVRO
ones (one writer schema for every object).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pytest
from archive_helpers import run_args

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

PER_RUN = 12
COLUMNS = ("id", "country", "note", "n", "ratio", "flag")


def first_run(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "country": "DE" if i % 2 else "FR",
        "note": "x",
        "n": 1.5,
        "ratio": 0.5,
        "flag": True,
    }


def second_run(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "country": "DE" if i % 2 else "FR",
        "note": None,
        "n": 2,
        "ratio": None,
        "flag": None,
    }


def want() -> list[dict[str, Any]]:
    rows = [{**first_run(i)} for i in range(PER_RUN)]
    rows += [second_run(i) for i in range(PER_RUN, 2 * PER_RUN)]
    return normal(rows)


def normal(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [
        {
            c: (float(r[c]) if c in ("id", "n") and r.get(c) is not None else r.get(c))
            for c in COLUMNS
        }
        for r in rows
    ]
    return sorted(out, key=lambda r: r["id"])


def archive_two_runs(
    fmt: str,
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> Path:
    """Two runs of one statement, each over its own records; every object downloaded."""
    name, bkt = topic(partitions=2), bucket()
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} PARTITIONBY country STOREAS {fmt} "
        "PROPERTIES('flush.count'=4)"
    )
    produce(name, PER_RUN, partitions=2, value=first_run)
    assert main(run_args(kcql, broker, s3_endpoint)) == 0, capsys.readouterr().err
    produce(name, PER_RUN, first=PER_RUN, partitions=2, value=second_run)
    assert main(run_args(kcql, broker, s3_endpoint)) == 0, capsys.readouterr().err
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bkt, Prefix="arch/")
    keys = [o["Key"] for p in pages for o in p.get("Contents", ())]
    keys = [k for k in keys if "/.kafka-archive/" not in k]
    assert len(keys) >= 8  # 2 groups x 2 partitions x 2 runs at least
    record = s3_client.get_object(
        Bucket=bkt, Key=f"arch/.kafka-archive/columns/{name}/columns.json"
    )
    assert json.loads(record["Body"].read())["version"] == 1
    for key in keys:
        path = tmp_path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(s3_client.get_object(Bucket=bkt, Key=key)["Body"].read())
    return tmp_path / "arch"


def test_parquet_prefix_of_two_runs_is_one_dataset(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    import duckdb
    import pyarrow.dataset as ds
    from pyspark.sql import SparkSession

    root = archive_two_runs(
        "PARQUET", broker, s3_endpoint, s3_client, topic, bucket, produce, capsys, tmp_path
    )
    table = ds.dataset(root, format="parquet", partitioning="hive").to_table()
    assert normal(table.to_pylist()) == want()

    with duckdb.connect() as con:
        result = con.execute(
            "SELECT * FROM read_parquet(?, hive_partitioning = true)", [f"{root}/**/*.parquet"]
        )
        names = [d[0] for d in result.description]
        rows = [dict(zip(names, r, strict=True)) for r in result.fetchall()]
    assert normal(rows) == want()

    session = SparkSession(spark)
    frame = session.read.option("mergeSchema", "false").parquet(str(root))
    frame.createOrReplaceTempView("two_runs")
    rows = [r.asDict() for r in session.sql("SELECT * FROM two_runs").collect()]
    assert normal(rows) == want()


def test_avro_objects_of_two_runs_share_one_schema(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    root = archive_two_runs(
        "AVRO", broker, s3_endpoint, s3_client, topic, bucket, produce, capsys, tmp_path
    )
    types: dict[str, set[str]] = {}
    rows: list[dict[str, Any]] = []
    for path in sorted(root.rglob("*.avro")):
        reader = fastavro.reader(io.BytesIO(path.read_bytes()))
        assert reader.writer_schema is not None
        for field in reader.writer_schema["fields"]:
            types.setdefault(field["name"], set()).add(json.dumps(field["type"]))
        rows += list(reader)
    assert {n: len(t) for n, t in types.items()} == {n: 1 for n in types}, types
    assert types["ratio"] == {'["null", "double"]'} and types["flag"] == {'["null", "boolean"]'}
    assert normal(rows) == want()

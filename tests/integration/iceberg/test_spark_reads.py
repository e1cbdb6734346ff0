"""Spark with Iceberg's own runtime reads an Iceberg route (issue 35): a reader we did not
write, on the field shapes of real producers.

The jars come from Maven Central (``testbed/iceberg/pom.xml``: iceberg-spark-runtime for
Spark 4.1 / Scala 2.13, the newest Spark 4 runtime published, iceberg-aws-bundle for
S3FileIO, sqlite-jdbc for the JdbcCatalog), fetched once into the cache by
``testbed/iceberg_spark.py`` (``make test`` does it ahead). The tests' catalog is a pyiceberg
SQL catalog on SQLite, which Iceberg's JdbcCatalog reads as it is (same tables). Spark runs
in a child process, on the Spark the runtime is built for (pyspark 4.1, installed once by
``testbed/iceberg_spark.py``: no runtime for the venv's Spark 4.3 is published, and the 4.1
one fails on 4.3); its JVM needs the jars at start, and the session's SparkContext is
already running without them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import run_args

from devstack import MOTO_CREDENTIALS
from iceberg_spark import SPARK_VERSION, ensure_jars, ensure_pyspark
from kafka_archive.cli import main

pytestmark = pytest.mark.integration

RECORDS = 40

# A child process: one SparkSession with the Iceberg runtime, the catalog named as
# pyiceberg's ("default": the JdbcCatalog's rows are keyed by catalog name).
_READER = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession

    jars, uri, endpoint, key, secret, table, warehouse = sys.argv[1:8]
    prefix = "spark.sql.catalog.default"
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.jars", jars)
        .config(prefix, "org.apache.iceberg.spark.SparkCatalog")
        .config(prefix + ".catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog")
        .config(prefix + ".uri", uri)
        .config(prefix + ".warehouse", warehouse)
        .config(prefix + ".io-impl", "org.apache.iceberg.aws.s3.S3FileIO")
        .config(prefix + ".s3.endpoint", endpoint)
        .config(prefix + ".s3.path-style-access", "true")
        .config(prefix + ".s3.access-key-id", key)
        .config(prefix + ".s3.secret-access-key", secret)
        .config(prefix + ".client.region", "us-east-1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    rows = spark.sql(f"SELECT * FROM `default`.{table}").collect()
    print("SPARK " + spark.version)
    print("ROWS " + json.dumps([r.asDict() for r in rows]))
    spark.stop()
    """
)


def value(i: int) -> dict[str, Any]:
    """``note`` null in the first records of every file, ``amount`` whole and fractional,
    ``qty`` absent from some records."""
    out: dict[str, Any] = {
        "id": i,
        "country": "DE" if i % 4 < 2 else "FR",
        "note": None if i < 12 or i % 5 == 0 else f"n{i}",
        "amount": 10 if (i // 4) % 2 == 0 else 10.5,
    }
    if i % 7:
        out["qty"] = i
    return out


def expected() -> list[dict[str, Any]]:
    return [
        {
            "id": float(i),
            "country": v["country"],
            "note": v["note"],
            "amount": float(v["amount"]),
            "qty": None if v.get("qty") is None else float(v["qty"]),
        }
        for i, v in ((i, value(i)) for i in range(RECORDS))
    ]


def said(stderr: str) -> str:
    """What Spark's failure says: its error lines, not the stack frames."""
    lines = [line for line in stderr.splitlines() if not line.lstrip().startswith("at ")]
    return "\n".join(line[:300] for line in lines if "Exception" in line or "Error" in line)[:4000]


def test_spark_sql_with_the_iceberg_runtime_reads_every_record_once(
    broker: str,
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
    catalog_uri: str,
    tmp_path: Path,
) -> None:
    jars, pyspark = ensure_jars(), ensure_pyspark()
    name, bkt = topic(partitions=2), bucket()
    produce(name, RECORDS, partitions=2, value=value)
    kcql = (
        f"INSERT INTO {bkt}:tables/orders SELECT * FROM {name} PARTITIONBY country "
        "STOREAS PARQUET PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.orders', "
        "'flush.count'=5)"
    )
    assert main(run_args(kcql, broker, s3_endpoint)) == 0, capsys.readouterr().err

    script = tmp_path / "read_with_spark.py"
    script.write_text(_READER)
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            ",".join(str(jar) for jar in jars),
            "jdbc:sqlite:" + catalog_uri.removeprefix("sqlite:///"),
            s3_endpoint,
            MOTO_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            MOTO_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            "db.orders",
            f"s3://{bkt}/tables",  # new tables only: JdbcCatalog wants one
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={
            **{k: v for k, v in os.environ.items() if k != "SPARK_HOME"},
            "PYTHONPATH": str(pyspark),
        },
    )
    out = [line for line in done.stdout.splitlines() if line.startswith("ROWS ")]
    assert done.returncode == 0 and out, said(done.stderr)
    assert f"SPARK {SPARK_VERSION}" in done.stdout.splitlines()
    rows = json.loads(out[0].removeprefix("ROWS "))
    got = sorted(
        ({c: r.get(c) for c in ("id", "country", "note", "amount", "qty")} for r in rows),
        key=lambda r: r["id"],
    )
    assert got == expected()

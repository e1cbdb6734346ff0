"""What the Iceberg integration tests share: a fresh SQL catalog per test, the table as an
independent pyiceberg client reads it, and the statement of an Iceberg route."""

from __future__ import annotations

from typing import Any

from devstack import MOTO_CREDENTIALS

TABLE = "db.orders"


def reader_table(uri: str, s3_endpoint: str, name: str = TABLE) -> Any:
    """The table as an independent pyiceberg client sees it (its own catalog object)."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "default",
        uri=uri,
        **{
            "s3.endpoint": s3_endpoint,
            "s3.access-key-id": MOTO_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": MOTO_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            "s3.region": MOTO_CREDENTIALS["AWS_DEFAULT_REGION"],
        },
    )
    return catalog.load_table(name)


def table_ids(table: Any) -> list[int]:
    rows = table.scan(selected_fields=("id",)).to_arrow()
    return sorted(rows.column("id").to_pylist())


def data_keys(s3: Any, bucket: str) -> set[str]:
    keys: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="tables/"):
        keys.update(item["Key"] for item in page.get("Contents", []) if "/data/" in item["Key"])
    return keys


def referenced(table: Any, bucket: str) -> set[str]:
    files = table.inspect.all_files().column("file_path").to_pylist()
    return {path.removeprefix(f"s3://{bucket}/") for path in files}


def kcql_for(name: str, bkt: str, flush: int, prefix: str = "tables/orders") -> str:
    return (
        f"INSERT INTO {bkt}:{prefix} SELECT * FROM {name} STOREAS PARQUET "
        f"PROPERTIES('table.format'='iceberg', 'iceberg.table'='{TABLE}', "
        f"'flush.count'={flush})"
    )

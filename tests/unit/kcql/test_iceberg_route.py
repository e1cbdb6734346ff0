"""KCQL of Iceberg routes: 'table.format', 'iceberg.table', 'iceberg.catalog'."""

from __future__ import annotations

import pytest

from kafka_archive import kcql
from kafka_archive.kcql import KcqlError
from kafka_archive.kcql.plan import IcebergTable, TimeTransform
from kafka_archive.kcql.render import render

HEAD = "INSERT INTO bkt:tables/orders SELECT * FROM orders"


def error(text: str) -> KcqlError:
    with pytest.raises(KcqlError) as info:
        kcql.parse(text)
    return info.value


def column_of(text: str, needle: str) -> int:
    return text.index(needle) + 1


def test_iceberg_route_compiles_into_a_typed_field_and_round_trips() -> None:
    text = (
        f"{HEAD} STOREAS PARQUET PROPERTIES('table.format'='iceberg', "
        "'iceberg.table'='db.orders', 'iceberg.catalog'='prod')"
    )
    plan = kcql.parse(text)
    assert plan.routes[0].iceberg == IcebergTable("db.orders", "prod")
    assert kcql.parse(render(plan.routes[0])) == plan


def test_catalog_defaults_to_default_and_objects_means_no_table() -> None:
    text = f"{HEAD} STOREAS PARQUET PROPERTIES('table.format'='iceberg', 'iceberg.table'='a.b')"
    assert kcql.parse(text).routes[0].iceberg == IcebergTable("a.b", "default")
    objects = f"{HEAD} STOREAS JSON PROPERTIES('table.format'='objects')"
    assert kcql.parse(objects).routes[0].iceberg is None


def test_value_fields_partition_a_table() -> None:
    text = (
        f"{HEAD} PARTITIONBY country, _value.a.b STOREAS PARQUET "
        "PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.orders')"
    )
    route = kcql.parse(text).routes[0]
    assert [ref.path for ref in route.partition_by] == [("country",), ("a", "b")]
    assert route.iceberg is not None


@pytest.mark.parametrize(
    ("partition_by", "extra", "time"),
    [
        ("_date.uuuu-MM-dd", "", TimeTransform.DAY),
        ("_date.yyyyMMdd", ", 'partition.timezone'='UTC'", TimeTransform.DAY),
        ("_date.yyyyMMdd", ", 'partition.timezone'='Etc/GMT'", TimeTransform.DAY),
        ("_date.uuuu-MM-dd-HH", ", 'partition.timezone'='Zulu'", TimeTransform.HOUR),
        ("_date.uuuu, _date.DDD", "", TimeTransform.DAY),
        ("country, _date.uuuu, _date.MM, _date.dd", "", TimeTransform.DAY),
        ("_date.`uuuu-MM-dd-HH`", "", TimeTransform.HOUR),
        ("_date.uuuu, _date.MM, _date.dd, _date.HH, country", "", TimeTransform.HOUR),
        ("_date.uuuu-MM-dd-kk", "", TimeTransform.HOUR),
        ("country", "", None),
    ],
)
def test_date_partitions_compile_to_the_day_or_hour_transform(
    partition_by: str, extra: str, time: TimeTransform | None
) -> None:
    text = (
        f"{HEAD} PARTITIONBY {partition_by} STOREAS PARQUET PROPERTIES('table.format'='iceberg', "
        f"'iceberg.table'='db.orders'{extra})"
    )
    plan = kcql.parse(text)
    assert plan.routes[0].iceberg == IcebergTable("db.orders", "default", time)
    shown = kcql.plan_to_dict(plan)["routes"][0]["iceberg"]  # plan --output json
    assert shown["time_partition"] == (None if time is None else time.value)
    assert kcql.parse(render(plan.routes[0])) == plan


@pytest.mark.parametrize(
    ("tail", "at", "label"),
    [
        (
            "STOREAS JSON PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.o')",
            "JSON",
            "iceberg-format",
        ),
        (
            "STOREAS PARQUET PROPERTIES('iceberg.table'='db.o')",
            "'iceberg.table'",
            "iceberg-without-table-format",
        ),
        (
            "STOREAS PARQUET PROPERTIES('table.format'='objects', 'iceberg.catalog'='x')",
            "'iceberg.catalog'",
            "iceberg-without-table-format",
        ),
        ("STOREAS PARQUET PROPERTIES('table.format'='delta')", "'delta'", "bad-property-value"),
        (
            "STOREAS PARQUET PROPERTIES('table.format'='iceberg')",
            "'table.format'",
            "iceberg-without-table",
        ),
        (
            "STOREAS PARQUET PROPERTIES('table.format'='iceberg', 'iceberg.table'='orders')",
            "'orders'",
            "bad-property-value",
        ),
        (
            "STOREAS PARQUET PROPERTIES('table.format'='iceberg', 'iceberg.table'='d.o', "
            "'iceberg.catalog'='a b')",
            "'a b'",
            "bad-property-value",
        ),
        (
            "STOREAS PARQUET PROPERTIES('table.format'='iceberg', 'iceberg.table'='d.o', "
            "'layout'='hive')",
            "'layout'",
            "iceberg-layout",
        ),
        (
            "PARTITIONBY country, _header.h STOREAS PARQUET PROPERTIES('table.format'='iceberg', "
            "'iceberg.table'='d.o')",
            "_header.h",
            "iceberg-partition",
        ),
        (
            "PARTITIONBY _date.uuuu STOREAS PARQUET PROPERTIES('table.format'='iceberg', "
            "'iceberg.table'='d.o')",
            "_date.uuuu",
            "iceberg-partition",
        ),
        (  # months: Iceberg has a month transform, but only days and hours are offered
            "PARTITIONBY country, _date.uuuu, _date.MM STOREAS PARQUET "
            "PROPERTIES('table.format'='iceberg', 'iceberg.table'='d.o')",
            "_date.uuuu",
            "iceberg-partition",
        ),
        (  # minutes: no Iceberg transform
            "PARTITIONBY _date.uuuu, _date.`MM-dd-HH-mm` STOREAS PARQUET "
            "PROPERTIES('table.format'='iceberg', 'iceberg.table'='d.o')",
            "_date.`MM-dd-HH-mm`",
            "iceberg-partition",
        ),
        (  # a two-digit year groups 2024 with 2124
            "PARTITIONBY _date.uu-MM-dd STOREAS PARQUET PROPERTIES('table.format'='iceberg', "
            "'iceberg.table'='d.o')",
            "_date.uu-MM-dd",
            "iceberg-partition",
        ),
        (  # Iceberg's day and hour are UTC
            "PARTITIONBY _date.uuuu-MM-dd STOREAS PARQUET PROPERTIES('table.format'='iceberg', "
            "'iceberg.table'='d.o', 'partition.timezone'='Europe/Paris')",
            "'partition.timezone'",
            "iceberg-partition",
        ),
        (  # the time column is the record timestamp
            "PARTITIONBY _date.uuuu-MM-dd STOREAS PARQUET PROPERTIES('table.format'='iceberg', "
            "'iceberg.table'='d.o', 'partition.time.field'='ts')",
            "'partition.time.field'",
            "iceberg-partition",
        ),
        (
            "PARTITIONBY country STOREAS PARQUET PROPERTIES('table.format'='iceberg', "
            "'iceberg.table'='d.o', 'store.envelope'=true)",
            "country",
            "iceberg-partition",
        ),
    ],
)
def test_refusals_point_at_the_setting_at_fault(tail: str, at: str, label: str) -> None:
    text = f"{HEAD} {tail}"
    err = error(text)
    assert err.label == label
    assert err.span is not None and err.span.column == column_of(text, at)

"""Pure logic of Iceberg routes: offsets in snapshot summaries, file names, S3 properties."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import BadRecordError, ConfigError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.iceberg.catalog import (
    CatalogSource,
    catalog_errors,
    load_catalog,
    s3_properties,
)
from kafka_archive.archiver.iceberg.offsets import offset_property, offsets_of
from kafka_archive.archiver.iceberg.routes import DATA_NAME, data_route, location, partition_spec
from kafka_archive.archiver.iceberg.schema import table_schema
from kafka_archive.archiver.iceberg.table import TableRoute, create_table
from kafka_archive.archiver.partition.layouts import layout_for

topics = st.text(st.sampled_from("abcXYZ019._-"), min_size=1, max_size=40)


@given(st.dictionaries(st.tuples(topics, st.integers(0, 10_000)), st.integers(0, 2**63 - 1)))
def test_offsets_round_trip_through_the_summary_for_any_topic_name(
    state: dict[tuple[str, int], int],
) -> None:
    summary = {offset_property(TopicPartition(t, p)): str(o) for (t, p), o in state.items()}
    summary |= {"added-data-files": "3", "kafka-archive.records": "9"}  # not offsets
    assert offsets_of(summary) == {TopicPartition(t, p): o for (t, p), o in state.items()}


def route(prefix: str = "tables/orders") -> kcql.plan.Route:
    text = (
        f"INSERT INTO bkt:{prefix} SELECT * FROM orders.v1 STOREAS PARQUET "
        "PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.orders')"
    )
    return kcql.parse(text).routes[0]


@pytest.mark.parametrize("prefix", ["tables/orders", "t"])
def test_files_go_under_data_named_by_offset_run_and_job(prefix: str) -> None:
    layout = layout_for(data_route(route(prefix), "0123456789abcdef", "job-1.x"))
    key = layout.key(TopicPartition("orders.v1", 3), 42, ())
    assert key == f"{prefix}/data/orders.v1/3/000000000042_0123456789abcdef_job-1.x.parquet"
    match = DATA_NAME.match(key.rsplit("/", 1)[-1])
    assert match is not None
    assert (match["run"], match["job"]) == ("0123456789abcdef", "job-1.x")
    assert location(route(prefix)) == f"s3://bkt/{prefix}"


def test_s3_settings_reach_the_file_io(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example-secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    settings = S3Settings(
        endpoint_url="http://127.0.0.1:9000", region="eu-west-1", addressing_style="virtual"
    )
    props = s3_properties(settings)
    assert props == {
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.region": "eu-west-1",
        "s3.force-virtual-addressing": "true",
        "s3.access-key-id": "AKIDEXAMPLE",
        "s3.secret-access-key": "example-secret",
    }


def test_an_unconfigured_catalog_is_a_config_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("PYICEBERG_HOME", raising=False)
    monkeypatch.delenv("PYICEBERG_CATALOG__NOPE__URI", raising=False)
    with pytest.raises(ConfigError) as info:
        load_catalog("nope", S3Settings())
    assert "PYICEBERG_CATALOG__NOPE__URI" in (info.value.hint or "")


def partitioned(partition_by: str) -> kcql.plan.Route:
    text = (
        f"INSERT INTO bkt:t SELECT * FROM orders PARTITIONBY {partition_by} STOREAS PARQUET "
        "PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.orders')"
    )
    return kcql.parse(text).routes[0]


@pytest.mark.parametrize(
    ("partition_by", "spec"),
    [
        ("country", [("country", "identity", "country")]),
        ("_value.a.b", [("a.b", "identity", "a_b")]),
        ("_date.uuuu-MM-dd", [("_timestamp", "day", "_timestamp_day")]),
        (
            "_date.uuuu, _date.MM, _date.dd, _date.HH",
            [("_timestamp", "hour", "_timestamp_hour")],
        ),
        (
            "country, _date.uuuu, _date.MM, _date.dd, kind",
            [
                ("country", "identity", "country"),
                ("_timestamp", "day", "_timestamp_day"),
                ("kind", "identity", "kind"),
            ],
        ),
        (
            "_date.`uuuu-MM-dd-HH`, country",
            [("_timestamp", "hour", "_timestamp_hour"), ("country", "identity", "country")],
        ),
    ],
)
def test_partitionby_maps_to_identity_and_one_day_or_hour_field(
    partition_by: str, spec: list[tuple[str, str, str]]
) -> None:
    assert partition_spec(partitioned(partition_by)) == spec


def test_a_table_partitioned_by_date_gets_the_record_time_as_timestamptz() -> None:
    """The Parquet file of a _date-partitioned table route has the record timestamp in
    microseconds UTC as its last column; other routes' files do not."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from kafka_archive.archiver.core.record import Record
    from kafka_archive.archiver.formats.parquet_ import ParquetWriter

    def written(route: kcql.plan.Route, records: list[Record]) -> pa.Table:
        sink = io.BytesIO()
        writer = ParquetWriter(sink, route)
        for record in records:
            writer.write(record)
        writer.close()
        return pq.read_table(io.BytesIO(sink.getvalue()))

    def record(offset: int, ts: int | None, value: bytes = b'{"id": 1}') -> Record:
        return Record("orders", 0, offset, ts, None, value, ())

    table = written(
        partitioned("_date.uuuu-MM-dd"), [record(0, 1_715_000_000_123), record(1, None)]
    )
    assert table.schema.names == ["id", "_timestamp"]
    assert table.schema.field("_timestamp").type == pa.timestamp("us", tz="UTC")
    assert table.column("_timestamp").cast(pa.int64()).to_pylist() == [1_715_000_000_123_000, None]
    assert written(partitioned("country"), [record(0, 5, b'{"country": "DE"}')]).schema.names == [
        "country"
    ]
    with pytest.raises(BadRecordError, match="_timestamp"):
        written(partitioned("_date.uuuu-MM-dd"), [record(0, 5, b'{"_timestamp": 1}')])


def test_a_catalog_error_is_one_line() -> None:
    """SQLAlchemy's (and other drivers') messages span lines ("\\n(Background on this error
    at: …)"): the error the CLI prints as its one last line must not."""
    from kafka_archive.archiver.core.errors import CatalogError

    with pytest.raises(CatalogError) as caught, catalog_errors("load table db.t"):
        raise RuntimeError("(sqlite3.OperationalError) no such table\n(Background on this error)")
    assert "\n" not in str(caught.value)
    assert "no such table (Background on this error)" in str(caught.value)


def test_a_first_file_iceberg_cannot_type_is_a_one_line_type_error_not_catalog_advice(
    tmp_path: Any,
) -> None:
    """A file of a column Iceberg (format version 2) has no type for: exit 10 saying so, in
    one line, with the way out; not exit 23's "check the catalog's configuration … and that
    it is reachable" (the catalog is fine). Nothing is created."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.catalog.sql import SqlCatalog

    from kafka_archive.archiver.core.errors import BadRecordError

    first = tmp_path / "first.parquet"
    pq.write_table(pa.table({"id": [1.0], "note": pa.array([None], pa.null())}), first)
    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path / 'catalog.db'}")
    source = cast(CatalogSource, SimpleNamespace(catalog=catalog))  # no AWS chain
    table = TableRoute("db.orders", source, {0: route()})
    with pytest.raises(BadRecordError) as caught:
        create_table(table, str(first))
    error = caught.value
    assert error.exit_code == 10
    text = f"{error} {error.hint}"
    assert "note" in str(error) and "\n" not in text
    assert "catalog's configuration" not in text and "reachable" not in text
    assert "avro.schema.file" in text
    assert ("db",) not in catalog.list_namespaces() or catalog.list_tables("db") == []


def test_a_tables_schema_gives_its_files_the_columns_an_inferred_field_can_take() -> None:
    """int and long are long, float and double double, a struct a record; a map, a
    timestamp, a decimal (no type an inferred field takes) are left out, and a table of
    none of them gives no schema."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        MapType,
        NestedField,
        StringType,
        StructType,
        TimestamptzType,
    )

    from kafka_archive.archiver.formats import schema

    def of(*fields: NestedField) -> Any:
        return SimpleNamespace(schema=lambda: Schema(*fields))

    table = of(
        NestedField(1, "id", IntegerType(), required=False),
        NestedField(2, "n", LongType(), required=True),
        NestedField(3, "price", FloatType(), required=False),
        NestedField(4, "rate", DoubleType(), required=False),
        NestedField(5, "attrs", MapType(6, StringType(), 7, StringType()), required=False),
        NestedField(8, "addr", StructType(NestedField(9, "zip", IntegerType(), required=False))),
        NestedField(10, "at", TimestamptzType(), required=False),
        NestedField(11, "cost", DecimalType(9, 2), required=False),
    )
    text = table_schema(table)
    assert text is not None
    assert schema.from_avro(json.loads(text)) == schema.Type(
        "record",
        (
            ("id", schema.LONG),
            ("n", schema.LONG),
            ("price", schema.DOUBLE),
            ("rate", schema.DOUBLE),
            ("addr", schema.Type("record", (("zip", schema.LONG),))),
        ),
    )
    only_map = of(NestedField(1, "m", MapType(2, StringType(), 3, LongType()), required=False))
    assert table_schema(only_map) is None

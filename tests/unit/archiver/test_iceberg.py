"""Pure logic of Iceberg routes: offsets in snapshot summaries, file names, S3 properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver import iceberg
from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.settings import S3Settings

topics = st.text(st.sampled_from("abcXYZ019._-"), min_size=1, max_size=40)


@given(st.dictionaries(st.tuples(topics, st.integers(0, 10_000)), st.integers(0, 2**63 - 1)))
def test_offsets_round_trip_through_the_summary_for_any_topic_name(
    state: dict[tuple[str, int], int],
) -> None:
    summary = {iceberg.offset_property(TopicPartition(t, p)): str(o) for (t, p), o in state.items()}
    summary |= {"added-data-files": "3", "kafka-archive.records": "9"}  # not offsets
    assert iceberg.offsets_of(summary) == {TopicPartition(t, p): o for (t, p), o in state.items()}


def route(prefix: str = "tables/orders") -> kcql.plan.Route:
    text = (
        f"INSERT INTO bkt:{prefix} SELECT * FROM orders.v1 STOREAS PARQUET "
        "PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.orders')"
    )
    return kcql.parse(text).routes[0]


@pytest.mark.parametrize("prefix", ["tables/orders", "t"])
def test_files_go_under_data_named_by_offset_run_and_job(prefix: str) -> None:
    layout = layout_for(iceberg.data_route(route(prefix), "0123456789abcdef", "job-1.x"))
    key = layout.key(TopicPartition("orders.v1", 3), 42, ())
    assert key == f"{prefix}/data/orders.v1/3/000000000042_0123456789abcdef_job-1.x.parquet"
    match = iceberg._DATA_NAME.match(key.rsplit("/", 1)[-1])
    assert match is not None
    assert (match["run"], match["job"]) == ("0123456789abcdef", "job-1.x")
    assert iceberg.location(route(prefix)) == f"s3://bkt/{prefix}"


def test_s3_settings_reach_the_file_io(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "example-secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    settings = S3Settings(
        endpoint_url="http://127.0.0.1:9000", region="eu-west-1", addressing_style="virtual"
    )
    props = iceberg.s3_properties(settings)
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
    with pytest.raises(iceberg.ConfigError) as info:
        iceberg.load_catalog("nope", S3Settings())
    assert "PYICEBERG_CATALOG__NOPE__URI" in (info.value.hint or "")

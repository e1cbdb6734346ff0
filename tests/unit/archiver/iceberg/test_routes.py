"""An Iceberg route's pure decisions: which Kafka partition a data file holds, which files
are an earlier run's of the job, where they are listed."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive import kcql
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.iceberg.routes import (
    data_folder,
    data_route,
    earlier_run_of_job,
    file_partition,
)
from kafka_archive.archiver.partition.layouts import layout_for

RUN, OTHER = "0123456789abcdef", "fedcba9876543210"
topics = st.text(st.sampled_from("abcXYZ019._-"), min_size=1, max_size=40)


def route(prefix: str, topic: str = "orders") -> kcql.plan.Route:
    text = (
        f"INSERT INTO bkt:{prefix} SELECT * FROM orders STOREAS PARQUET "
        "PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.orders')"
    )
    return dataclasses.replace(kcql.parse(text).routes[0], topic=topic)


@given(topics, st.integers(0, 10_000), st.integers(0, 2**62), st.sampled_from(["t", "a/b"]))
def test_a_files_partition_is_told_by_the_name_its_task_gave_it(
    topic: str, partition: int, offset: int, prefix: str
) -> None:
    tp = TopicPartition(topic, partition)
    key = layout_for(data_route(route(prefix, topic), RUN, "job")).key(tp, offset, ())
    assert file_partition(f"s3://bkt/{key}") == tp
    # Orphan cleanup lists data_folder: it holds every file of the topic, whatever the
    # name (a leading '_' or '.' is escaped in keys, %5F and %2E).
    assert key.startswith(data_folder(route(prefix, topic)))


@pytest.mark.parametrize(
    "path",
    [
        "s3://bkt/t/data/00000-0-compacted.parquet",  # another writer's (a compaction)
        "s3://bkt/t/data/orders/x/0_run_job.parquet",  # not a partition number
        "s3://bkt/t/other/orders/0/0_run_job.parquet",  # not under data/
        "s3://bkt/t/data/orders/0",  # too short
    ],
)
def test_a_file_not_named_by_our_tasks_holds_no_partition_of_ours(path: str) -> None:
    assert file_partition(path) is None


def test_only_an_earlier_run_of_the_same_job_owns_a_file() -> None:
    def owned(name: str) -> bool:
        return earlier_run_of_job(f"t/data/orders/0/{name}", RUN, "job-1.x")

    assert owned(f"000000000042_{OTHER}_job-1.x.parquet")
    assert not owned(f"000000000042_{RUN}_job-1.x.parquet")  # this run's
    assert not owned(f"000000000042_{OTHER}_job-2.parquet")  # another job's
    assert not owned("00000-0-compacted.parquet")  # another writer's


def test_the_folder_of_a_routes_files_is_its_topics_under_data() -> None:
    assert data_folder(route("tables/orders")) == "tables/orders/data/orders/"
    assert data_folder(route("t", "_orders")) == "t/data/%5Forders/"
    assert data_folder(route("t", ".x")) == "t/data/%2Ex/"

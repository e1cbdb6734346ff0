"""The default job name names the state: it must survive edits that keep topic and target.
And the open uploads a crashed run left are its route's to abort, whatever the topic's name."""

from __future__ import annotations

import dataclasses
from typing import cast

import pytest

from kafka_archive import kcql
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.plan.naming import check_job_name, job_name_for
from kafka_archive.archiver.plan.units import abort_stale_uploads
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import FlushPolicy, Format, Plan, Route, Target

ROUTE = Route(target=Target("bucket-one", "archive"), topic="orders")


def test_name_is_stable_across_format_and_flush_edits() -> None:
    edited = dataclasses.replace(ROUTE, format=Format.BYTES, flush=FlushPolicy(count=7))
    assert job_name_for(Plan((ROUTE,))) == job_name_for(Plan((edited,)))


def test_name_changes_with_target_or_topic() -> None:
    base = job_name_for(Plan((ROUTE,)))
    assert job_name_for(Plan((dataclasses.replace(ROUTE, topic="payments"),))) != base
    other = dataclasses.replace(ROUTE, target=Target("bucket-one", "other"))
    assert job_name_for(Plan((other,))) != base


def test_name_is_readable_and_valid() -> None:
    name = job_name_for(Plan((ROUTE,)))
    assert name.startswith("orders-")
    assert check_job_name(name) == name


@pytest.mark.parametrize("bad", ["", "..", "a/b", "-x", "x" * 129])
def test_bad_job_names_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError):
        check_job_name(bad)


class _OpenUploads:
    """The multipart-upload calls of an S3Store: the uploads left open, those aborted."""

    def __init__(self, keys: list[str]) -> None:
        self.open = {key: f"upload-{i}" for i, key in enumerate(keys)}
        self.aborted: list[str] = []

    def incomplete_uploads(self, bucket: str, prefix: str) -> list[tuple[str, str]]:
        return [(k, u) for k, u in self.open.items() if k.startswith(prefix)]

    def abort_upload(self, bucket: str, key: str, upload_id: str) -> None:
        assert self.open[key] == upload_id
        self.aborted.append(key)


@pytest.mark.parametrize("partition_by", ["", " PARTITIONBY _key"])
@pytest.mark.parametrize("topic", ["orders", "_orders", ".x"])
def test_the_open_uploads_of_a_routes_objects_are_aborted_whatever_its_topic(
    topic: str, partition_by: str
) -> None:
    # A topic starting with '_' or '.' is %5F… or %2E… in keys (its uploads were kept).
    (route,) = kcql.parse(f"INSERT INTO bkt:archive SELECT * FROM `{topic}`{partition_by}").routes
    other = dataclasses.replace(route, topic="payments")
    keys = []
    for each in (route, other):
        layout = layout_for(each)
        group = layout.group(["k"] * len(layout.fields))
        keys.append(layout.key(TopicPartition(each.topic, 0), 100, group))
    uploads = _OpenUploads(keys)
    assert abort_stale_uploads(cast(S3Store, uploads), [route]) == 1
    assert uploads.aborted == keys[:1]

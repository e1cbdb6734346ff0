"""`s3_stream_part_mb`: objects are uploaded in parts while they are still written.

The object appears only whole (multipart, completed at roll), its bytes are exactly what the
plain path writes, and an object that is not committed (a held-back tail) leaves no upload
open behind it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import run_args

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

RECORDS = 12_000  # ~1 KB each: ~12 MB, three 5 MiB parts per object when whole


def data_objects(s3: Any, bucket: str) -> dict[str, dict[str, Any]]:
    listing = s3.list_objects_v2(Bucket=bucket, Prefix="arch/").get("Contents", [])
    return {o["Key"]: o for o in listing if "/.kafka-archive/" not in o["Key"]}


def test_parts_stream_while_writing_and_held_back_tails_leave_no_upload(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    produce(name, RECORDS, partitions=1, value=lambda i: {"id": i, "pad": "x" * 1000}, linger_ms=20)
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_STREAM_PART_MB", "5")

    def run(flush: str) -> int:
        kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` {flush}"
        return main(run_args(kcql, broker, s3_endpoint))

    # Records are seconds old, the interval an hour: the one open object (~12 MB, two parts
    # already sent) is held back for a later run, and its upload is aborted, not left open.
    assert run("WITH_FLUSH_INTERVAL = 3600 WITH_FLUSH_COUNT = 100000") == 0, capsys.readouterr()
    assert data_objects(s3_client, bkt) == {}
    assert s3_client.list_multipart_uploads(Bucket=bkt).get("Uploads", []) == []

    # Now without the interval: the same object (spanning several read batches) is sent
    # as parts while it is written, completed when the run ends.
    assert run("WITH_FLUSH_COUNT = 100000") == 0, capsys.readouterr()
    objects = data_objects(s3_client, bkt)
    assert sorted(objects) == [f"arch/{name}/0/000000000000.json"]
    etag = objects[f"arch/{name}/0/000000000000.json"]["ETag"].strip('"')
    assert "-" in etag and int(etag.rsplit("-", 1)[1]) >= 2, etag  # a multipart upload
    ids: list[int] = []
    for key in sorted(objects):
        body = s3_client.get_object(Bucket=bkt, Key=key)["Body"].read()
        ids.extend(json.loads(line)["id"] for line in body.splitlines())
    assert ids == list(range(RECORDS))
    assert s3_client.list_multipart_uploads(Bucket=bkt).get("Uploads", []) == []


def test_a_whole_object_above_the_threshold_is_uploaded_in_checksummed_parts(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without `s3_stream_part_mb`, an object of 16 MiB or more is a multipart upload of
    16 MiB parts (from memory, sent while it is written), each with its CRC32: the object
    is the records, whole."""
    records = 18_000  # ~18.5 MB: two parts
    name, bkt = topic(partitions=1), bucket()
    produce(name, records, partitions=1, value=lambda i: {"id": i, "pad": "x" * 1000}, linger_ms=20)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 100000"
    assert main(run_args(kcql, broker, s3_endpoint)) == 0, capsys.readouterr()
    key = f"arch/{name}/0/000000000000.json"
    assert sorted(data_objects(s3_client, bkt)) == [key]
    head = s3_client.head_object(Bucket=bkt, Key=key, ChecksumMode="ENABLED")
    assert head["ETag"].strip('"').endswith("-2"), head["ETag"]
    assert head["ContentLength"] >= 16 * 1024 * 1024
    assert head.get("ChecksumCRC32"), head
    body = s3_client.get_object(Bucket=bkt, Key=key)["Body"].read()
    assert [json.loads(line)["id"] for line in body.splitlines()] == list(range(records))
    assert s3_client.list_multipart_uploads(Bucket=bkt).get("Uploads", []) == []

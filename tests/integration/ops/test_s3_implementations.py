"""The conditional requests the exactly-once protocol relies on, asked of each S3
implementation of the test bed with plain boto3 (moto, and SeaweedFS's S3 gateway: a real
second implementation): a create (``If-None-Match: *``) of a key that exists is refused, on a
PUT and on a CompleteMultipartUpload; a replacement or a delete with a stale ``If-Match`` is
refused; each with the right condition is applied. The runs, fences and recoveries that
rest on them run against both in test_fencing.py, test_concurrent_runs.py and
test_s3_faults.py (marked ``every_s3``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

pytestmark = [pytest.mark.integration, pytest.mark.every_s3]

PART = 5 * 1024 * 1024  # S3's smallest part but the last


def _status(call: Callable[[], Any]) -> int:
    """The HTTP status of a request: 200 (or 204) when applied, else the error's."""
    try:
        response = call()
    except ClientError as exc:
        return int(exc.response["ResponseMetadata"]["HTTPStatusCode"])
    return int(response["ResponseMetadata"]["HTTPStatusCode"])


def _body(s3: Any, bucket: str, key: str) -> bytes:
    data: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return data


def test_a_put_creates_only_a_key_that_is_free(s3_client: Any, bucket: Callable[..., str]) -> None:
    bkt, key = bucket(), f"k-{uuid.uuid4().hex}"
    assert (
        _status(lambda: s3_client.put_object(Bucket=bkt, Key=key, Body=b"1", IfNoneMatch="*"))
        == 200
    )
    assert (
        _status(lambda: s3_client.put_object(Bucket=bkt, Key=key, Body=b"2", IfNoneMatch="*"))
        == 412
    )
    assert _body(s3_client, bkt, key) == b"1"


def test_a_put_replaces_only_the_version_it_names(
    s3_client: Any, bucket: Callable[..., str]
) -> None:
    bkt, key = bucket(), f"k-{uuid.uuid4().hex}"
    etag = s3_client.put_object(Bucket=bkt, Key=key, Body=b"1")["ETag"]
    stale = '"0123456789abcdef0123456789abcdef"'
    assert (
        _status(lambda: s3_client.put_object(Bucket=bkt, Key=key, Body=b"2", IfMatch=stale)) == 412
    )
    assert _body(s3_client, bkt, key) == b"1"
    assert (
        _status(lambda: s3_client.put_object(Bucket=bkt, Key=key, Body=b"3", IfMatch=etag)) == 200
    )
    assert _body(s3_client, bkt, key) == b"3"
    # The ETag it had is stale now.
    assert (
        _status(lambda: s3_client.put_object(Bucket=bkt, Key=key, Body=b"4", IfMatch=etag)) == 412
    )
    assert _body(s3_client, bkt, key) == b"3"


def test_a_delete_removes_only_the_version_it_names(
    s3_client: Any, bucket: Callable[..., str]
) -> None:
    bkt, key = bucket(), f"k-{uuid.uuid4().hex}"
    etag = s3_client.put_object(Bucket=bkt, Key=key, Body=b"1")["ETag"]
    stale = '"0123456789abcdef0123456789abcdef"'
    assert _status(lambda: s3_client.delete_object(Bucket=bkt, Key=key, IfMatch=stale)) == 412
    assert _body(s3_client, bkt, key) == b"1"
    assert _status(lambda: s3_client.delete_object(Bucket=bkt, Key=key, IfMatch=etag)) == 204
    page = s3_client.list_objects_v2(Bucket=bkt)
    assert page.get("KeyCount", 0) == 0


def test_a_multipart_completion_creates_only_a_key_that_is_free(
    s3_client: Any, bucket: Callable[..., str]
) -> None:
    """As a stale run completing an object over 16 MiB would: the completion with
    ``If-None-Match: *`` of a key another run committed meanwhile is refused and leaves it;
    of a free key it is applied."""
    bkt, key = bucket(), f"k-{uuid.uuid4().hex}"

    def upload(fill: bytes) -> tuple[str, list[dict[str, Any]]]:
        upload_id = s3_client.create_multipart_upload(Bucket=bkt, Key=key)["UploadId"]
        parts = []
        for number, size in ((1, PART), (2, 1024)):
            etag = s3_client.upload_part(
                Bucket=bkt, Key=key, UploadId=upload_id, PartNumber=number, Body=fill * size
            )["ETag"]
            parts.append({"ETag": etag, "PartNumber": number})
        return upload_id, parts

    def complete(upload_id: str, parts: list[dict[str, Any]]) -> int:
        return _status(
            lambda: s3_client.complete_multipart_upload(
                Bucket=bkt,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                IfNoneMatch="*",
            )
        )

    stale = upload(b"a")  # started first, completed last (the stale run's)
    assert complete(*upload(b"b")) == 200
    assert complete(*stale) == 412
    body = _body(s3_client, bkt, key)
    assert len(body) == PART + 1024 and set(body) == {ord("b")}
    s3_client.abort_multipart_upload(Bucket=bkt, Key=key, UploadId=stale[0])

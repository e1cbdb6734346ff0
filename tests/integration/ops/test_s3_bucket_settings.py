"""S3 settings production buckets need, checked on the wire (a recording proxy in front of
moto's S3) and by reading the objects back with boto3: SSE-KMS with key id and bucket key,
storage class on archived objects only, path-style addressing, SHA256 checksums (single PUTs
and streamed multipart uploads), canned ACL, an assumed role with an external id, and an
Object Lock bucket."""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs

import boto3
import pytest
from archive_helpers import archived_ids, run_args
from confluent_kafka import Producer
from faultproxy import FaultProxy

from kafka_archive.cli import main

pytestmark = pytest.mark.integration


class RecordingProxy(FaultProxy):
    """Forwards everything, recording each request's method, path, headers and body."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream, rate=0.0, seed=0)
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        base: Any = super()._handler()
        proxy = self

        class Handler(base):  # type: ignore[misc, valid-type]
            _cached: bytes | None = None

            def _body(self) -> bytes:
                if self._cached is None:
                    self._cached = base._body(self)
                return self._cached  # type: ignore[no-any-return]

            def _forward(self) -> None:
                self._cached = None
                body = self._body()
                headers = {k.lower(): v for k, v in self.headers.items()}
                proxy.seen.append((self.command, self.path, headers, body))
                return base._forward(self)  # type: ignore[no-any-return]

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        return Handler

    def writes(self, bucket: str) -> list[tuple[str, str, dict[str, str]]]:
        """PUTs (objects, parts) and multipart creations into ``bucket``."""
        return [
            (method, path, headers)
            for method, path, headers, _ in self.seen
            if path.startswith(f"/{bucket}/")
            and (method == "PUT" or (method == "POST" and "uploads" in path))
        ]


def _is_data(path: str) -> bool:
    return "/.kafka-archive/" not in path


def test_encryption_storage_class_checksum_acl_and_path_style_on_every_write(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, bkt = topic(partitions=2), bucket()
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5})
    for i in range(14000):  # partition 0: one ~6 MB object, streamed in 5 MiB parts
        pad = "x" * 900 if i % 2 == 0 else ""
        producer.produce(name, value=json.dumps({"id": i, "pad": pad}).encode(), partition=i % 2)
        if i % 2000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    kms = boto3.client("kms", endpoint_url=s3_endpoint, region_name="us-east-1")
    key_id = kms.create_key()["KeyMetadata"]["KeyId"]
    settings = {
        "S3_SSE": "SSE-KMS",
        "S3_SSE_KMS_KEY_ID": key_id,
        "S3_BUCKET_KEY": "true",
        "S3_STORAGE_CLASS": "standard_ia",
        "S3_ADDRESSING_STYLE": "path",
        "S3_CHECKSUM": "sha256",
        "S3_ACL": "bucket-owner-full-control",
    }
    for option, value in settings.items():
        monkeypatch.setenv(f"KAFKA_ARCHIVE_{option}", value)
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_STREAM_PART_MB", "5")
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_SIZE = 100000000 "
        "WITH_FLUSH_COUNT = 100000"
    )
    with RecordingProxy(s3_endpoint) as proxy:
        code = main(run_args(kcql, broker, proxy.url))
        assert code == 0, capsys.readouterr().err
    assert archived_ids(s3_client, bkt) == list(range(14000))

    writes = proxy.writes(bkt)
    parts = [w for w in writes if "partNumber=" in w[1]]
    creations = [w for w in writes if w[0] == "POST"]
    puts = [w for w in writes if w not in parts and w not in creations]
    # The conditional-write probe completes a one-part upload under .kafka-archive/ too.
    data_parts = [w for w in parts if _is_data(w[1])]
    data_creations = [w for w in creations if _is_data(w[1])]
    assert len(data_parts) >= 2 and len(data_creations) == 1, "partition 0 was streamed in parts"
    assert any(not _is_data(p) for _, p, _ in puts), "state, lock and markers were written"
    for _, path, headers in puts + creations:  # path style: /bucket/key on the host
        assert headers["host"].startswith("127.0.0.1:"), path
        assert headers["x-amz-server-side-encryption"] == "aws:kms", path
        assert headers["x-amz-server-side-encryption-aws-kms-key-id"] == key_id, path
        assert headers["x-amz-server-side-encryption-bucket-key-enabled"] == "true", path
        assert headers["x-amz-acl"] == "bucket-owner-full-control", path
        expected_class = "STANDARD_IA" if _is_data(path) else None
        assert headers.get("x-amz-storage-class") == expected_class, path
    for _, path, headers in puts + parts:
        checksums = {k for k in headers if k.startswith("x-amz-checksum-")}
        assert checksums == {"x-amz-checksum-sha256"}, (path, checksums)
    assert creations[0][2]["x-amz-checksum-algorithm"] == "SHA256"

    # And as S3 stored them (read with boto3, not our code).
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bkt)["Contents"]]
    for key in keys:
        head = s3_client.head_object(Bucket=bkt, Key=key, ChecksumMode="ENABLED")
        assert head["ServerSideEncryption"] == "aws:kms"
        assert key_id in head["SSEKMSKeyId"]
        assert head.get("StorageClass", "STANDARD") == (
            "STANDARD_IA" if _is_data(f"/{key}") else "STANDARD"
        )
        if _is_data(f"/{key}"):
            assert "ChecksumSHA256" in head, key


def test_an_assumed_role_with_external_id_signs_every_request(
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
    name, bkt = topic(partitions=2), bucket()
    produce(name, 500)
    role = "arn:aws:iam::123456789012:role/archiver"
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_ROLE_ARN", role)
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_EXTERNAL_ID", "ext-4711")
    monkeypatch.setenv("KAFKA_ARCHIVE_REGION", "us-east-1")
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 100"
    with RecordingProxy(s3_endpoint) as proxy:
        monkeypatch.setenv("KAFKA_ARCHIVE_STS_ENDPOINT_URL", proxy.url)
        code = main(run_args(kcql, broker, proxy.url))
        assert code == 0, capsys.readouterr().err
    assert archived_ids(s3_client, bkt) == list(range(500))
    assumed = [
        parse_qs(body.decode())
        for method, _, _, body in proxy.seen
        if method == "POST" and b"Action=AssumeRole" in body
    ]
    assert assumed, "the role was assumed through STS"
    for form in assumed:
        assert form["RoleArn"] == [role] and form["ExternalId"] == ["ext-4711"]
        assert form["RoleSessionName"] == ["kafka-archive"]
    # Every S3 request is signed with the role's session credentials, not the base ones.
    s3_requests = [h for m, p, h, b in proxy.seen if p.startswith(f"/{bkt}")]
    assert s3_requests
    for headers in s3_requests:
        assert "x-amz-security-token" in headers
        assert "Credential=testing/" not in headers["authorization"]


def test_settings_are_checked_before_the_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_STORAGE_CLASS", "COLD")
    code = main(
        ["run", "--kcql", "INSERT INTO b:p SELECT * FROM t", "--bootstrap-servers", "127.0.0.1:9"]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert (
        "s3_storage_class from environment KAFKA_ARCHIVE_S3_STORAGE_CLASS is 'COLD', "
        "not one of: STANDARD"
    ) in err


def test_an_object_lock_bucket_takes_the_checksummed_writes(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = topic(partitions=2)
    bkt = f"lock-{name}"
    s3_client.create_bucket(Bucket=bkt, ObjectLockEnabledForBucket=True)
    s3_client.put_object_lock_configuration(
        Bucket=bkt,
        ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled",
            "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}},
        },
    )
    produce(name, 300)
    args = run_args(
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 100", broker, s3_endpoint
    )
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_CHECKSUM", "off")  # S3 refuses: one clear line
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2
    assert (
        f"kafka-archive: error: s3://{bkt}/arch/.kafka-archive/" in err
        and "has Object Lock: S3 refuses uploads without a checksum" in err
    ), err
    monkeypatch.delenv("KAFKA_ARCHIVE_S3_CHECKSUM")  # CRC32, boto3's default
    code = main(args)
    assert code == 0, capsys.readouterr().err
    assert archived_ids(s3_client, bkt) == list(range(300))

"""The S3 settings production buckets need: parsed, normalized and checked before a run."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from kafka_archive.archiver.config.load import load_settings
from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.store.s3 import S3Store, write_args


def s3(env: dict[str, str]) -> S3Settings:
    return load_settings(None, {f"KAFKA_ARCHIVE_{k}": v for k, v in env.items()}, {}).settings.s3


def test_values_are_normalized() -> None:
    got = s3(
        {
            "S3_SSE": "sse-kms",
            "S3_SSE_KMS_KEY_ID": "alias/a",
            "S3_BUCKET_KEY": "yes",
            "S3_STORAGE_CLASS": "glacier_ir",
            "S3_ADDRESSING_STYLE": "PATH",
            "S3_CHECKSUM": "sha256",
            "S3_ACL": "Bucket-Owner-Full-Control",
            "S3_ROLE_ARN": "arn:aws:iam::123456789012:role/a/b",
            "S3_EXTERNAL_ID": "x",
        }
    )
    assert (got.sse, got.sse_kms_key_id, got.bucket_key) == ("aws:kms", "alias/a", True)
    assert (got.storage_class, got.addressing_style) == ("GLACIER_IR", "path")
    assert (got.checksum, got.acl) == ("SHA256", "bucket-owner-full-control")
    assert s3({"S3_SSE": "SSE-S3"}).sse == "AES256"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"S3_SSE": "rot13"},
            "s3_sse from environment KAFKA_ARCHIVE_S3_SSE is 'rot13', not one of",
        ),
        ({"S3_STORAGE_CLASS": "COLD"}, "is 'COLD', not one of: STANDARD, REDUCED_REDUNDANCY"),
        ({"S3_ADDRESSING_STYLE": "dns"}, "not one of: auto, path, virtual"),
        ({"S3_CHECKSUM": "md4"}, "not one of: CRC32, CRC32C"),
        ({"S3_ACL": "mine"}, "not one of: private, public-read"),
        (
            {"S3_BUCKET_KEY": "maybe"},
            "s3_bucket_key from environment KAFKA_ARCHIVE_S3_BUCKET_KEY must be true or false",
        ),
        (
            {"S3_SSE_KMS_KEY_ID": "k"},
            "s3_sse_kms_key_id from environment "
            "KAFKA_ARCHIVE_S3_SSE_KMS_KEY_ID needs s3_sse SSE-KMS",
        ),
        (
            {"S3_SSE": "SSE-S3", "S3_BUCKET_KEY": "true"},
            "s3_bucket_key from environment KAFKA_ARCHIVE_S3_BUCKET_KEY needs s3_sse SSE-KMS",
        ),
        ({"S3_ROLE_ARN": "archiver"}, "is not an IAM role ARN"),
        (
            {"S3_EXTERNAL_ID": "x"},
            "s3_external_id from environment KAFKA_ARCHIVE_S3_EXTERNAL_ID needs s3_role_arn",
        ),
    ],
)
def test_mistakes_are_refused_naming_the_source(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        s3(env)
    assert message in str(raised.value)


def test_every_write_gets_encryption_acl_and_checksum_and_data_the_storage_class() -> None:
    settings = s3(
        {
            "S3_SSE": "SSE-KMS",
            "S3_SSE_KMS_KEY_ID": "k",
            "S3_ACL": "private",
            "S3_CHECKSUM": "SHA1",
            "S3_STORAGE_CLASS": "DEEP_ARCHIVE",
        }
    )
    assert write_args(settings) == {
        "ServerSideEncryption": "aws:kms",
        "SSEKMSKeyId": "k",
        "ACL": "private",
        "ChecksumAlgorithm": "SHA1",
    }
    store = S3Store(settings)
    assert store._args("arch/t/0/000.json")["StorageClass"] == "DEEP_ARCHIVE"
    for own in ("arch/.kafka-archive/j/state/t/0.json", ".kafka-archive/j/lock.json"):
        assert "StorageClass" not in store._args(own)
    assert "ChecksumAlgorithm" not in write_args(s3({"S3_CHECKSUM": "off"}))


def test_plan_shows_the_settings() -> None:
    loaded = load_settings(None, {"KAFKA_ARCHIVE_S3_STORAGE_CLASS": "STANDARD_IA"}, {})
    shown = loaded.settings.redacted()["s3_storage_class"]
    assert shown == {"value": "STANDARD_IA", "source": "environment KAFKA_ARCHIVE_S3_STORAGE_CLASS"}


class _Raw:
    """An empty HTTP response body."""

    def stream(self) -> list[bytes]:
        return []


def _sent_headers(settings: S3Settings) -> dict[str, str]:
    """The headers of a PUT the store sends to a plain-http endpoint (answered here)."""
    from botocore.awsrequest import AWSResponse

    store = S3Store(settings)
    sent: dict[str, str] = {}

    def answer(request: Any, **_: Any) -> AWSResponse:
        sent.update(
            {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        )
        return AWSResponse(request.url, 200, {"ETag": '"e"'}, _Raw())

    store.client.meta.events.register("before-send.s3.PutObject", answer)
    store.put_bytes("b", "k", b"x" * 1000)
    return sent


def test_bodies_carry_a_checksum_and_are_signed_only_without_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    http = {"ENDPOINT_URL": "http://127.0.0.1:9", "REGION": "us-east-1"}
    default = _sent_headers(s3(http))
    # S3 verifies the CRC32 against the body: the SHA-256 signature of the body (a second
    # pass over every upload, made over http only) is not computed.
    assert default["x-amz-checksum-crc32"]
    assert default["X-Amz-Content-SHA256"] == "UNSIGNED-PAYLOAD"
    unchecked = _sent_headers(s3({**http, "S3_CHECKSUM": "off"}))
    assert "x-amz-checksum-crc32" not in unchecked
    assert unchecked["X-Amz-Content-SHA256"] == hashlib.sha256(b"x" * 1000).hexdigest()

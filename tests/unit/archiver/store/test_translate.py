"""botocore's errors as the runtime's: the error family by S3's answer, and the one question
(is the bucket gone?) asked only where a 404 could mean it."""

from __future__ import annotations

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
)

from kafka_archive.archiver.core.errors import (
    AccessDeniedError,
    ArchiveError,
    BucketNotFoundError,
    ConfigError,
    S3UnavailableError,
    UploadError,
)
from kafka_archive.archiver.store.translate import ConditionFailed, is_missing_key, translate

ENDPOINT = "http://user:***@s3.local:9000"  # its password redacted


def _answer(status: int, code: str = "") -> ClientError:
    error = {"Code": code} if code else {}
    return ClientError(
        {"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}},  # type: ignore[typeddict-item]
        "PutObject",
    )


def _translate(
    exc: Exception, what: str = "write", key: str = "k", *, missing: bool = False
) -> tuple[ArchiveError, int]:
    asked: list[str] = []

    def bucket_missing(bucket: str) -> bool:
        asked.append(bucket)
        return missing

    error = translate(
        exc,
        what,
        "bkt",
        key,
        endpoint_url="http://user:pw@s3.local:9000",
        bucket_missing=bucket_missing,
    )
    return error, len(asked)


W = "write s3://bkt/k"
REFUSED = "S3 refused to " + W


@pytest.mark.parametrize(
    ("status", "code", "family", "message"),
    [
        (412, "PreconditionFailed", ConditionFailed, f"{REFUSED}: precondition failed"),
        (409, "ConditionalRequestConflict", ConditionFailed, f"{REFUSED}: precondition failed"),
        (404, "NoSuchBucket", BucketNotFoundError, "bucket 'bkt' does not exist at " + ENDPOINT),
        (403, "AccessDenied", AccessDeniedError, f"access denied to {W}"),
        (
            400,
            "ExpiredToken",
            S3UnavailableError,
            f"the AWS credentials expired (ExpiredToken) to {W}",
        ),
        (
            400,
            "MissingUploadObjectWithObjectLockHeaders",
            ConfigError,
            "s3://bkt/k has Object Lock: S3 refuses uploads without a checksum",
        ),
        (403, "SignatureDoesNotMatch", AccessDeniedError, f"access denied to {W}"),
        (
            400,
            "InvalidAccessKeyId",
            S3UnavailableError,
            f"the AWS credentials were rejected (InvalidAccessKeyId) to {W}",
        ),
        (500, "InternalError", UploadError, f"{REFUSED}: InternalError"),
        (503, "", UploadError, f"{REFUSED}: 503"),
    ],
)
def test_an_answer_is_the_error_family_it_means(
    status: int, code: str, family: type[ArchiveError], message: str
) -> None:
    error, _ = _translate(_answer(status, code))
    assert type(error) is family and error.message == message


def test_a_404_asks_whether_the_bucket_is_gone_only_where_it_could_mean_it() -> None:
    error, asked = _translate(_answer(404, "NoSuchKey"), missing=True)
    assert isinstance(error, BucketNotFoundError) and asked == 1
    error, asked = _translate(_answer(404, "NoSuchKey"), missing=False)
    assert error.message == "S3 refused to write s3://bkt/k: NoSuchKey" and asked == 1
    error, asked = _translate(_answer(404, "NoSuchKey"), what="read", missing=True)
    assert not isinstance(error, BucketNotFoundError) and asked == 0  # a read's 404 is the key's
    error, asked = _translate(_answer(404), key="")  # a request of the bucket itself
    assert isinstance(error, BucketNotFoundError) and asked == 0
    error, asked = _translate(_answer(403, "AccessDenied"))
    assert asked == 0


def test_failures_before_an_answer_name_the_endpoint_without_its_secret() -> None:
    unreachable, _ = _translate(EndpointConnectionError(endpoint_url="http://s3.local:9000"))
    assert type(unreachable) is S3UnavailableError
    assert unreachable.message == "cannot reach http://user:***@s3.local:9000 to write s3://bkt/k"
    none, _ = _translate(NoCredentialsError())
    assert none.message == "no AWS credentials found to write s3://bkt/k"
    other, _ = _translate(ConnectTimeoutError(endpoint_url="http://s3.local:9000"))
    assert type(other) is UploadError
    assert other.message == "S3 request failed to write s3://bkt/k: ConnectTimeoutError"


def test_a_missing_key_is_a_get_of_nothing() -> None:
    assert is_missing_key(_answer(404, "NoSuchKey")) and is_missing_key(_answer(404, "404"))
    assert not is_missing_key(_answer(404, "NoSuchBucket"))

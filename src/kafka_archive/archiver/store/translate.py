"""botocore's errors in the runtime's taxonomy: what a failed request means to a user (no
credentials, TLS, unreachable, no such bucket, access denied, expired credentials, Object
Lock, a lost condition), with the request and the object named. Pure: the one question
it may have to ask S3 (is the bucket gone?) is asked by the caller's function."""

from __future__ import annotations

from collections.abc import Callable

from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, SSLError

from kafka_archive.archiver.config.secrets import redact_url
from kafka_archive.archiver.core.errors import (
    AccessDeniedError,
    ArchiveError,
    BucketNotFoundError,
    ConfigError,
    S3UnavailableError,
    UploadError,
)

EXPIRED_CODES = (
    "ExpiredToken",
    "ExpiredTokenException",
    "TokenRefreshRequired",
    "RequestExpired",
    "InvalidToken",
)


class ConditionFailed(UploadError):
    """A 412/409 on a request that has no caller of its own to see it (a managed transfer's
    PUT or completion): :meth:`S3Store.creating` turns it into PreconditionFailed."""


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def error_status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def is_precondition(exc: ClientError) -> bool:
    return error_status(exc) in (409, 412) or error_code(exc) in (
        "PreconditionFailed",
        "ConditionalRequestConflict",
    )


def is_missing_key(exc: ClientError) -> bool:
    """A GET of a key that does not exist."""
    return error_code(exc) in ("NoSuchKey", "404")


def translate(
    exc: Exception,
    what: str,
    bucket: str,
    key: str,
    *,
    endpoint_url: str | None,
    bucket_missing: Callable[[str], bool],
) -> ArchiveError:
    """The runtime's error for ``exc``, raised by a request to ``what`` (``read``, ``upload
    part 3 of``, ...) ``s3://bucket/key``; ``bucket_missing`` asks S3 whether the bucket
    is gone (only for a 404 that is not a read's)."""
    where = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
    endpoint = redact_url(endpoint_url or "AWS S3")
    if isinstance(exc, NoCredentialsError):
        return S3UnavailableError(
            f"no AWS credentials found to {what} {where}",
            hint="Set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with an "
            "instance or container role",
        )
    if isinstance(exc, SSLError):
        return S3UnavailableError(
            f"TLS failed with {endpoint} to {what} {where} (SSLError)",
            hint="Check the scheme of --endpoint-url (http:// or https://) and the "
            "store's certificate (AWS_CA_BUNDLE for a private CA)",
        )
    if isinstance(exc, EndpointConnectionError):
        return S3UnavailableError(
            f"cannot reach {endpoint} to {what} {where}",
            hint="Check --endpoint-url and that the store is up",
        )
    if isinstance(exc, ClientError):
        return _refused(exc, what, bucket, key, endpoint, bucket_missing)
    return UploadError(f"S3 request failed to {what} {where}: {type(exc).__name__}")


def _refused(
    exc: ClientError,
    what: str,
    bucket: str,
    key: str,
    endpoint: str,
    bucket_missing: Callable[[str], bool],
) -> ArchiveError:
    """The runtime's error for a request S3 answered with an error."""
    where = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
    code, status = error_code(exc), error_status(exc)
    if is_precondition(exc):
        return ConditionFailed(f"S3 refused to {what} {where}: precondition failed")
    if (
        code in ("NoSuchBucket",)
        or (status == 404 and not key)
        or (
            # A conditional write to a key of a deleted bucket can say NoSuchKey.
            status == 404 and what != "read" and bucket_missing(bucket)
        )
    ):
        return BucketNotFoundError(
            f"bucket {bucket!r} does not exist at {endpoint}",
            hint="Create it first, or fix the bucket in INSERT INTO",
        )
    if code in ("AccessDenied", "403", "Forbidden") or status == 403:
        return AccessDeniedError(
            f"access denied to {what} {where}",
            hint="Check the credentials' S3 permissions (s3:ListBucket, s3:GetObject, "
            "s3:PutObject, s3:DeleteObject, s3:AbortMultipartUpload)",
        )
    if code in EXPIRED_CODES:
        return S3UnavailableError(
            f"the AWS credentials expired ({code}) to {what} {where}",
            hint="Renew them (a profile or role that refreshes, or new session "
            "credentials) and run again; what was committed stays committed",
        )
    if code == "MissingUploadObjectWithObjectLockHeaders":
        return ConfigError(
            f"{where} has Object Lock: S3 refuses uploads without a checksum",
            hint="Set s3_checksum to CRC32 (the default) or another algorithm, not off",
        )
    if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return S3UnavailableError(
            f"the AWS credentials were rejected ({code}) to {what} {where}",
            hint="Check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the profile",
        )
    return UploadError(f"S3 refused to {what} {where}: {code or status}")

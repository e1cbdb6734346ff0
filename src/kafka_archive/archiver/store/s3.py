"""S3 access for the runtime: objects, conditional JSON documents, listings, multipart cleanup.

Every boto3 error is translated into the runtime's taxonomy with the bucket and key named.
Objects become visible only complete: a single PUT, or a multipart upload that is completed
(boto3's managed transfer aborts the upload when a part fails).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import email.utils
import hashlib
import json
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast

import botocore.session
import botocore.utils
from botocore.config import Config
from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    InvalidRegionError,
    NoCredentialsError,
    ProfileNotFound,
    SSLError,
)

from kafka_archive.archiver.config.secrets import redact_url
from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import (
    AccessDeniedError,
    ArchiveError,
    BucketNotFoundError,
    ConfigError,
    S3UnavailableError,
    UploadError,
)
from kafka_archive.archiver.core.pooling import Pool
from kafka_archive.archiver.state.paths import STATE_DIR

try:
    # zlib-ng's CRC32 (carry-less multiplication): ~0.04 CPU-s per GiB against ~0.26 for
    # the system zlib's (measured here); the same checksum.
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - a platform without its wheel
    from zlib import crc32


def write_args(settings: S3Settings) -> dict[str, Any]:
    """The arguments of every PUT and multipart upload: encryption, ACL, checksum (the
    S3 Bucket Key is added by an event handler: boto3's managed upload refuses it)."""
    args: dict[str, Any] = {}
    if settings.sse:
        args["ServerSideEncryption"] = settings.sse
    if settings.sse_kms_key_id:
        args["SSEKMSKeyId"] = settings.sse_kms_key_id
    if settings.acl:
        args["ACL"] = settings.acl
    if settings.checksum and settings.checksum != "OFF":
        args["ChecksumAlgorithm"] = settings.checksum
    return args


# Assumed-role credentials per process (driver, executor), refreshed before they expire.
_ROLE_CREDENTIALS: dict[tuple[str | None, ...], Any] = {}
_ROLE_LOCK = threading.Lock()


# One botocore session per process and credentials source: a client of a warm one costs
# ~5 ms. A Spark worker runs many short tasks, each with its own S3Store. Sessions are not
# thread-safe: clients are made under the lock. botocore's own sessions, not boto3's: the
# clients are the same (boto3 adds only its resources and managed transfers, unused here),
# and importing boto3 (with s3transfer) costs ~0.1 CPU-s in every process that does.
_SESSIONS: dict[str, Any] = {}
_SESSION_LOCK = threading.Lock()
_CREDENTIAL_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)


def _client(settings: S3Settings, **kwargs: Any) -> Any:
    """An S3 client of the process's session for ``settings``' credentials."""
    source = [
        settings.role_arn,
        settings.external_id,
        settings.role_session_name,
        settings.sts_endpoint_url,
        settings.region,
        *(os.environ.get(name) for name in _CREDENTIAL_ENV),
    ]
    key = hashlib.sha256(repr(source).encode()).hexdigest()
    with _SESSION_LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            session = _SESSIONS[key] = _session(settings)
        return session.create_client("s3", **kwargs)


# botocore's loader of its data files (service models, endpoint rules: ~0.09 CPU-s of JSON
# to parse), shared by the process's sessions; the Spark worker daemon fills it before it
# forks (preload_models), so a worker's first client costs ~0.01 s.
_LOADER: list[Any] = []


def _timestamp(value: Any) -> Any:
    """botocore's timestamp parser, without dateutil for the two forms S3 sends: ISO 8601
    (``2026-11-24T12:17:01.000Z``, every key of a listing: dateutil took ~0.2 ms each, two
    CPU-seconds per 10,000 keys listed) and RFC 1123 headers (``Last-Modified`` of a GET).
    The same instant, timezone-aware; anything else goes to botocore's parser."""
    if isinstance(value, str):
        try:
            if value.endswith("Z"):
                return datetime.datetime.fromisoformat(value[:-1]).replace(tzinfo=datetime.UTC)
            if value.endswith(" GMT"):
                return email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            pass
    return botocore.utils.parse_timestamp(value)


def _botocore_session() -> Any:
    core = botocore.session.Session()
    core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=_timestamp)
    if _LOADER:
        core.register_component("data_loader", _LOADER[0])
    else:
        _LOADER.append(core.get_component("data_loader"))
    return core


def preload_models() -> None:
    """Load what an S3 client needs of botocore's data into the process's loader (no
    credentials looked up, no request, no thread)."""
    _botocore_session().create_client(
        "s3",
        region_name="us-east-1",
        aws_access_key_id="preload",
        aws_secret_access_key="preload",
    )


def _session(settings: S3Settings) -> Any:
    """The default credential chain, or with ``role_arn`` a role assumed with it."""
    if settings.role_arn is None:
        return _botocore_session()
    cache = (
        settings.role_arn,
        settings.external_id,
        settings.role_session_name,
        settings.sts_endpoint_url,
        settings.region,
    )
    with _ROLE_LOCK:
        credentials = _ROLE_CREDENTIALS.get(cache)
        if credentials is None:
            credentials = _assume_role(settings)
            _ROLE_CREDENTIALS[cache] = credentials
    session = _botocore_session()
    session._credentials = credentials  # botocore's way to hand a session refreshable ones
    return session


def credentials(settings: S3Settings) -> Any:
    """botocore's credentials of the chain (or the assumed role), or None: refreshable ones
    renew themselves when :meth:`get_frozen_credentials` is asked near their expiry."""
    return _session(settings).get_credentials()


def frozen_credentials(settings: S3Settings) -> Any:
    """The credentials S3 requests are signed with now (access key, secret key, token), or
    None when there are none; for clients that take them as values (pyiceberg's FileIO)."""
    found = credentials(settings)
    return None if found is None else found.get_frozen_credentials()


def _assume_role(settings: S3Settings) -> Any:
    assert settings.role_arn is not None
    base = botocore.session.Session()
    source = base.get_credentials()
    if source is None:
        raise S3UnavailableError(
            f"no AWS credentials found to assume {settings.role_arn}",
            hint="Set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with an "
            "instance or container role",
        )

    def sts_client(service: str, **kwargs: Any) -> Any:
        return base.create_client(
            service, endpoint_url=settings.sts_endpoint_url, region_name=settings.region, **kwargs
        )

    extra: dict[str, Any] = {"RoleSessionName": settings.role_session_name}
    if settings.external_id:
        extra["ExternalId"] = settings.external_id
    fetcher = AssumeRoleCredentialFetcher(
        client_creator=sts_client,
        source_credentials=source,
        role_arn=settings.role_arn,
        extra_args=extra,
    )
    credentials = DeferredRefreshableCredentials(
        refresh_using=fetcher.fetch_credentials, method="assume-role"
    )
    try:
        credentials.get_frozen_credentials()  # fail here, naming the role, not at a PUT
    except ClientError as exc:
        raise AccessDeniedError(
            f"cannot assume role {settings.role_arn}: {_code(exc) or _status(exc)}",
            hint="Check the role's trust policy (the principal of your credentials, "
            "sts:ExternalId) and s3_external_id",
        ) from None
    except BotoCoreError as exc:
        raise S3UnavailableError(
            f"cannot reach STS to assume role {settings.role_arn}: {type(exc).__name__}",
            hint="Check sts_endpoint_url and the network",
        ) from None
    return credentials


_EXPIRED = (
    "ExpiredToken",
    "ExpiredTokenException",
    "TokenRefreshRequired",
    "RequestExpired",
    "InvalidToken",
)
MULTIPART_THRESHOLD = 16 * 1024 * 1024
PART_SIZE = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Document:
    """A JSON document read from S3 with the ETag to make a conditional write against."""

    body: dict[str, Any]
    etag: str


@dataclass(frozen=True, slots=True)
class ObjectHead:
    """An object's ETag and user metadata (``x-amz-meta-*``), from a HEAD."""

    etag: str
    metadata: Mapping[str, str]


class PreconditionFailed(Exception):
    """A conditional write lost: the object changed (If-Match) or exists (If-None-Match)."""


class _ConditionFailed(UploadError):
    """A 412/409 on a request that has no caller of its own to see it (a managed transfer's
    PUT or completion): :meth:`S3Store.creating` turns it into PreconditionFailed."""


class ConditionalWritesIgnored(Exception):
    """The endpoint applied a request whose condition was false; the message names the
    header and the request ("If-None-Match on CompleteMultipartUpload")."""


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _is_precondition(exc: ClientError) -> bool:
    return _status(exc) in (409, 412) or _code(exc) in (
        "PreconditionFailed",
        "ConditionalRequestConflict",
    )


def _s3_config(settings: S3Settings) -> dict[str, Any]:
    """botocore's ``s3`` client options: addressing style, and payload signing.

    Over plain http botocore signs every body with its SHA-256 (a second pass over each
    upload, ~1.5 CPU-s per GB) even when the request carries a checksum; over https it does
    not. Where a checksum goes with every upload (CRC32 by default, ``s3_checksum``), S3
    verifies it and refuses a corrupted body: that checksum is the integrity check, over
    http as over https, and the body is sent unsigned. With ``s3_checksum`` off, botocore's
    default stays (signed over http).
    """
    config: dict[str, Any] = {"addressing_style": settings.addressing_style or "auto"}
    if settings.checksum != "OFF":
        config["payload_signing_enabled"] = False
    return config


class S3Store:
    """A thin, typed wrapper over one boto3 S3 client."""

    # Retried requests of every store of this process (the driver's, for --follow metrics).
    process_retries: ClassVar[int] = 0

    def __init__(self, settings: S3Settings) -> None:
        self._settings = settings
        config = Config(
            # botocore's standard mode: exponential backoff with full jitter (base 1 s,
            # at most 20 s) on throttling (503 SlowDown), 5xx and connection errors.
            retries={"mode": "standard", "max_attempts": settings.max_attempts},
            connect_timeout=10,
            read_timeout=60,
            s3=cast(Any, _s3_config(settings)),
            request_checksum_calculation=(
                "when_required" if settings.checksum == "OFF" else "when_supported"
            ),
        )
        try:
            self._client = _client(
                settings,
                endpoint_url=settings.endpoint_url,
                region_name=settings.region,
                config=config,
            )
        except ProfileNotFound as exc:
            raise S3UnavailableError(
                f"no AWS credentials found: {exc}",
                hint="Fix AWS_PROFILE (a profile of ~/.aws/config or ~/.aws/credentials), or "
                "unset it to use the environment or an instance or container role",
            ) from None
        except InvalidRegionError:
            named = repr(settings.region) if settings.region else "of AWS_DEFAULT_REGION"
            raise ConfigError(
                f"the AWS region {named} is not a region name",
                hint="Fix region (--region, KAFKA_ARCHIVE_REGION) or AWS_DEFAULT_REGION, "
                "e.g. eu-west-1",
            ) from None
        self._write_args = write_args(settings)
        if settings.bucket_key is not None:  # boto3's managed upload does not pass it on
            for operation in ("PutObject", "CreateMultipartUpload"):
                self._client.meta.events.register(
                    f"before-parameter-build.s3.{operation}", self._bucket_key
                )
        self._part_checksums: dict[tuple[str, int], dict[str, str]] = {}
        # Requests botocore had to retry (throttling, 5xx, connection errors), for metrics.
        self.retries = 0
        self._client.meta.events.register("after-call.s3", self._count_retries)
        # Fencing: keys being created with If-None-Match (any attempt, any transfer thread),
        # and the user metadata naming the writer that every new object of this store gets.
        self._creating: dict[tuple[str, str], Mapping[str, str]] = {}
        self._creating_lock = threading.Lock()
        # A completion refused (If-None-Match) by key: the ETag the object would have had.
        self._refused_etags: dict[tuple[str, str], str] = {}
        self.object_metadata: dict[str, str] = {}
        events = self._client.meta.events
        for operation in ("PutObject", "CompleteMultipartUpload"):
            events.register(f"before-parameter-build.s3.{operation}", self._create_only)
        for operation in ("PutObject", "CreateMultipartUpload"):
            events.register(f"before-parameter-build.s3.{operation}", self._add_metadata)

    def _args(self, key: str) -> dict[str, Any]:
        """The production settings of a write of ``key``: encryption, ACL and checksum for
        every object; the storage class only for archived objects (kafka-archive's own
        small, often rewritten state, lock and marker documents stay STANDARD)."""
        args = dict(self._write_args)
        if self._settings.storage_class and f"/{STATE_DIR}/" not in f"/{key}":
            args["StorageClass"] = self._settings.storage_class
        return args

    def _bucket_key(self, params: dict[str, Any], **_: Any) -> None:
        params["BucketKeyEnabled"] = self._settings.bucket_key

    def _count_retries(self, parsed: Any = None, **_: Any) -> None:
        if isinstance(parsed, dict):
            retried = int(parsed.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0)
            self.retries += retried
            S3Store.process_retries += retried

    def _create_only(self, params: dict[str, Any], **_: Any) -> None:
        if (params.get("Bucket"), params.get("Key")) in self._creating:
            params.setdefault("IfNoneMatch", "*")

    def _add_metadata(self, params: dict[str, Any], **_: Any) -> None:
        extra = self._creating.get((str(params.get("Bucket")), str(params.get("Key"))), {})
        if (self.object_metadata or extra) and "Metadata" not in params:
            params["Metadata"] = {**self.object_metadata, **extra}

    @contextlib.contextmanager
    def creating(
        self, bucket: str, key: str, metadata: Mapping[str, str] | None = None
    ) -> Iterator[None]:
        """Within: every PUT or multipart completion of ``key`` (by any thread: boto3's
        managed transfer, :mod:`.streaming`) is sent with ``If-None-Match: *``, so it never
        replaces an existing object; :class:`PreconditionFailed` when one exists. A PUT or
        multipart upload of ``key`` started within gets ``metadata`` too."""
        with self._creating_lock:
            self._creating[(bucket, key)] = metadata or {}
        try:
            yield
        except _ConditionFailed:
            raise PreconditionFailed(key) from None
        finally:
            with self._creating_lock:
                self._creating.pop((bucket, key), None)

    def refused_etag(self, bucket: str, key: str) -> str | None:
        """The ETag the last multipart upload of ``key`` refused for existing would have
        had (S3's: the MD5 of its parts' MD5s, and their count), once; None when none was."""
        with self._creating_lock:
            return self._refused_etags.pop((bucket, key), None)

    @property
    def client(self) -> Any:
        return self._client

    def _translate(self, exc: Exception, what: str, bucket: str, key: str = "") -> ArchiveError:
        where = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
        endpoint = redact_url(self._settings.endpoint_url or "AWS S3")
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
            code, status = _code(exc), _status(exc)
            if _is_precondition(exc):
                return _ConditionFailed(f"S3 refused to {what} {where}: precondition failed")
            if (
                code in ("NoSuchBucket",)
                or (status == 404 and not key)
                or (
                    # A conditional write to a key of a deleted bucket can say NoSuchKey.
                    status == 404 and what != "read" and self._bucket_missing(bucket)
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
            if code in _EXPIRED:
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
        return UploadError(f"S3 request failed to {what} {where}: {type(exc).__name__}")

    def _bucket_missing(self, bucket: str) -> bool:
        try:
            self._client.head_bucket(Bucket=bucket)
        except ClientError as exc:
            return _status(exc) == 404 or _code(exc) in ("NoSuchBucket", "404", "NotFound")
        except BotoCoreError:
            return False
        return False

    # -- preflight ---------------------------------------------------------------------

    def check_bucket(self, bucket: str) -> None:
        """Fail with a precise error unless the bucket exists and is reachable."""
        try:
            self._client.head_bucket(Bucket=bucket)
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "open", bucket) from None

    # -- objects -----------------------------------------------------------------------

    def upload_file(self, bucket: str, key: str, path: Path) -> None:
        """Upload a spool file as one object: one PUT below the multipart threshold (no
        threads or futures per object: PARTITIONBY with many values uploads many small
        objects), else a multipart upload of :data:`PART_SIZE` parts on 4 threads
        (:mod:`.streaming`: each part read into a reused buffer, its checksum computed
        once), aborted if it fails."""
        size = path.stat().st_size
        if size < MULTIPART_THRESHOLD:
            self.upload_bytes(bucket, key, path.read_bytes())
            return
        from kafka_archive.archiver.store.streaming import StreamingUpload

        upload = StreamingUpload(self, bucket, key, path, part_size=PART_SIZE, max_in_flight=4)
        try:
            upload.complete(size)
        except BaseException:
            upload.abort()
            raise

    def upload_bytes(self, bucket: str, key: str, body: bytes | bytearray) -> None:
        """Upload an object held in memory with one PUT, its checksum computed here."""
        try:
            args = {**self._args(key), **self.checksum(body)}
            self._client.put_object(Bucket=bucket, Key=key, Body=body, **args)
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "upload", bucket, key) from None

    def checksum(self, body: bytes | bytearray) -> dict[str, str]:
        """The checksum parameters of a PUT or part of ``body``, when this store sends the
        CRC32 (botocore's default), SHA1 or SHA256: computed here in one pass over the bytes
        in memory, the request carries it as a header and its body as it is (botocore would
        compute it while framing the body in aws-chunked blocks, a copy per block). Other
        algorithms are left to botocore."""
        algorithm = self._settings.checksum or "CRC32"
        if algorithm == "CRC32":
            digest = crc32(body).to_bytes(4, "big")
        elif algorithm in ("SHA1", "SHA256"):
            digest = hashlib.new(algorithm.lower(), body).digest()
        else:
            return {}
        return {
            "ChecksumAlgorithm": algorithm,
            f"Checksum{algorithm}": base64.b64encode(digest).decode(),
        }

    def put_bytes(self, bucket: str, key: str, body: bytes) -> None:
        try:
            self._client.put_object(Bucket=bucket, Key=key, Body=body, **self._args(key))
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "write", bucket, key) from None

    def get_bytes(
        self, bucket: str, key: str, byte_range: tuple[int, int] | None = None
    ) -> bytes | None:
        """The object's bytes (``byte_range``: start and length only, one range GET), or
        None when it does not exist."""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if byte_range is not None:
            start, length = byte_range
            kwargs["Range"] = f"bytes={start}-{start + length - 1}"
        try:
            response = self._client.get_object(**kwargs)
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                return None
            raise self._translate(exc, "read", bucket, key) from None
        except BotoCoreError as exc:
            raise self._translate(exc, "read", bucket, key) from None
        body: bytes = response["Body"].read()
        return body

    def delete(self, bucket: str, keys: list[str]) -> None:
        """Delete keys in batches of 1,000; a key that is already gone is fine."""
        for i in range(0, len(keys), 1000):
            chunk = keys[i : i + 1000]
            try:
                response = self._client.delete_objects(
                    Bucket=bucket,
                    Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
                )
            except (ClientError, BotoCoreError) as exc:
                raise self._translate(exc, "delete from", bucket, chunk[0]) from None
            errors = response.get("Errors") or []
            if errors:
                first = errors[0]
                raise UploadError(
                    f"could not delete s3://{bucket}/{first.get('Key')}: {first.get('Code')}"
                )

    def list_keys(self, bucket: str, prefix: str, start_after: str = "") -> Iterator[str]:
        for key, _ in self.list_objects(bucket, prefix, start_after):
            yield key

    def list_objects(
        self, bucket: str, prefix: str, start_after: str = ""
    ) -> Iterator[tuple[str, int]]:
        """(key, size) of every object under ``prefix``, in key order."""
        for item in self._listing(bucket, prefix, start_after):
            yield item["Key"], int(item.get("Size", 0))

    def list_etags(self, bucket: str, prefix: str) -> Iterator[tuple[str, str]]:
        """(key, ETag) of every object under ``prefix``, in key order (a listing returns
        up to 1,000 a request: the ETags of many documents without a GET each)."""
        for item in self._listing(bucket, prefix):
            yield item["Key"], str(item.get("ETag", ""))

    def _listing(self, bucket: str, prefix: str, start_after: str = "") -> Iterator[Any]:
        """The listing's entries of every object under ``prefix``, in key order."""
        paginator = self._client.get_paginator("list_objects_v2")
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if start_after:
            kwargs["StartAfter"] = start_after
        try:
            for page in paginator.paginate(**kwargs):
                yield from page.get("Contents", [])
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "list", bucket, prefix) from None

    # -- conditional JSON documents (state, lock) ----------------------------------------

    def get_document(self, bucket: str, key: str) -> Document | None:
        try:
            response = self._client.get_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                return None
            raise self._translate(exc, "read", bucket, key) from None
        except BotoCoreError as exc:
            raise self._translate(exc, "read", bucket, key) from None
        raw = response["Body"].read()
        try:
            body = json.loads(raw)
        except ValueError:
            raise UploadError(
                f"s3://{bucket}/{key} is not valid JSON",
                hint="It is kafka-archive's own state; restore it from versioning or remove it",
            ) from None
        return Document(body=body, etag=str(response["ETag"]))

    def put_document(
        self, bucket: str, key: str, body: dict[str, Any], *, if_match: str | None
    ) -> str:
        """Write a JSON document only if it still has ETag ``if_match`` (None: not exists).

        Returns the new ETag; raises :class:`PreconditionFailed` when the condition fails.
        """
        data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "Body": data, **self._args(key)}
        if if_match is None:
            kwargs["IfNoneMatch"] = "*"
        else:
            kwargs["IfMatch"] = if_match
        try:
            response = self._client.put_object(**kwargs)
        except ClientError as exc:
            if _is_precondition(exc) or (
                # If-Match on a key that is gone: S3 answers 404, the ETag we expected is not
                # the current one (unless the whole bucket is gone).
                if_match is not None and _status(exc) == 404 and not self._bucket_missing(bucket)
            ):
                raise PreconditionFailed(key) from None
            raise self._translate(exc, "write", bucket, key) from None
        except BotoCoreError as exc:
            raise self._translate(exc, "write", bucket, key) from None
        return str(response["ETag"])

    def head(self, bucket: str, key: str) -> ObjectHead | None:
        """The object's ETag and user metadata, or None when it does not exist."""
        try:
            response = self._client.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if _code(exc) in ("NoSuchKey", "404", "NotFound") or _status(exc) == 404:
                return None
            raise self._translate(exc, "read", bucket, key) from None
        except BotoCoreError as exc:
            raise self._translate(exc, "read", bucket, key) from None
        return ObjectHead(str(response["ETag"]), dict(response.get("Metadata") or {}))

    def delete_if_match(self, bucket: str, key: str, etag: str) -> bool:
        """Delete the object only while it still has ``etag``; False when it changed or is
        gone (S3 conditional delete)."""
        try:
            self._client.delete_object(Bucket=bucket, Key=key, IfMatch=etag)
        except ClientError as exc:
            if _is_precondition(exc) or _status(exc) == 404 or _code(exc) == "NoSuchKey":
                return False
            raise self._translate(exc, "delete", bucket, key) from None
        except BotoCoreError as exc:
            raise self._translate(exc, "delete", bucket, key) from None
        return True

    def probe_conditional_writes(self, bucket: str, key: str) -> None:
        """Check, with a throw-away object at ``key``, that the endpoint refuses every
        conditional request the protocol sends when its condition is false: a PUT with
        If-None-Match (creates, locks) or If-Match (state, lock), a CompleteMultipartUpload
        with If-None-Match (objects from 16 MiB) and a DELETE with If-Match (replacing or
        recovering an object). :class:`ConditionalWritesIgnored` names the first one
        ignored. Nine requests."""
        try:
            self.put_document(bucket, key, {"probe": 1}, if_match=None)
            try:
                self.put_document(bucket, key, {"probe": 2}, if_match=None)
            except PreconditionFailed:
                pass
            else:
                raise ConditionalWritesIgnored("If-None-Match on PutObject")
            try:
                self.put_document(bucket, key, {"probe": 3}, if_match='"0123456789abcdef"')
            except PreconditionFailed:
                pass
            else:
                raise ConditionalWritesIgnored("If-Match on PutObject")
            self._probe_multipart_create(bucket, key)
            if self.delete_if_match(bucket, key, '"0123456789abcdef"'):
                raise ConditionalWritesIgnored("If-Match on DeleteObject")
            if self.head(bucket, key) is None:  # answered 412, yet deleted it
                raise ConditionalWritesIgnored("If-Match on DeleteObject")
        finally:
            with contextlib.suppress(ArchiveError):
                self.delete_document(bucket, key)

    def _probe_multipart_create(self, bucket: str, key: str) -> None:
        """A multipart upload of one small part, completed over the existing ``key`` with
        If-None-Match: the endpoint must refuse it (and the upload is aborted)."""
        upload_id = self.start_multipart(bucket, key)
        try:
            etag = self.upload_part(bucket, key, upload_id, 1, b'{"probe": 4}')
            with self.creating(bucket, key):
                self.complete_multipart(bucket, key, upload_id, [etag])
        except PreconditionFailed:
            return
        finally:
            with contextlib.suppress(ArchiveError):
                self.abort_upload(bucket, key, upload_id)
        raise ConditionalWritesIgnored("If-None-Match on CompleteMultipartUpload")

    def delete_document(self, bucket: str, key: str) -> None:
        try:
            self._client.delete_object(Bucket=bucket, Key=key)
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "delete", bucket, key) from None

    # -- multipart uploads written part by part (archiver.store.streaming) -------------------

    def _multipart_algorithm(self) -> str | None:
        """The checksum of multipart uploads: the one set, else CRC32 (as boto3's managed
        transfer does); None with ``s3_checksum`` off."""
        if self._settings.checksum is None:
            return "CRC32"
        return self._write_args.get("ChecksumAlgorithm")

    def start_multipart(self, bucket: str, key: str) -> str:
        algorithm = self._multipart_algorithm()
        extra = {"ChecksumAlgorithm": algorithm} if algorithm else {}
        try:
            response = self._client.create_multipart_upload(
                Bucket=bucket, Key=key, **{**self._args(key), **extra}
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "upload", bucket, key) from None
        return str(response["UploadId"])

    def upload_part(
        self, bucket: str, key: str, upload_id: str, number: int, body: bytes | bytearray
    ) -> str:
        """Upload part ``number`` (from 1); returns its ETag."""
        algorithm = self._multipart_algorithm()
        extra = {"ChecksumAlgorithm": algorithm} if algorithm else {}
        extra.update(self.checksum(body))
        try:
            response = self._client.upload_part(
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                PartNumber=number,
                Body=body,
                **extra,
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, f"upload part {number} of", bucket, key) from None
        if algorithm:  # CompleteMultipartUpload names each part's checksum
            field = f"Checksum{algorithm}"
            self._part_checksums[(upload_id, number)] = {field: str(response.get(field, ""))}
        return str(response["ETag"])

    def complete_multipart(
        self, bucket: str, key: str, upload_id: str, etags: list[str]
    ) -> None:  # with If-None-Match inside :meth:`creating`
        """Make the object visible, whole: parts ``1..len(etags)`` in order."""
        parts: list[Any] = [
            {"ETag": etag, "PartNumber": i, **self._part_checksums.pop((upload_id, i), {})}
            for i, etag in enumerate(etags, start=1)
        ]
        try:
            self._client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            )
        except (ClientError, BotoCoreError) as exc:
            error = self._translate(exc, "complete the upload of", bucket, key)
            if isinstance(error, _ConditionFailed):
                with self._creating_lock:
                    self._refused_etags[(bucket, key)] = multipart_etag(etags)
            raise error from None

    # -- multipart cleanup ----------------------------------------------------------------

    def incomplete_uploads(self, bucket: str, prefix: str) -> Iterator[tuple[str, str]]:
        """(key, upload id) of every multipart upload still open under ``prefix``."""
        paginator = self._client.get_paginator("list_multipart_uploads")
        try:
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
                for upload in page.get("Uploads", []):
                    yield upload["Key"], upload["UploadId"]
        except (ClientError, BotoCoreError) as exc:
            raise self._translate(exc, "list uploads in", bucket, prefix) from None

    def abort_upload(self, bucket: str, key: str, upload_id: str) -> None:
        try:
            self._client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        except ClientError as exc:
            if _code(exc) == "NoSuchUpload" or _status(exc) in (404, 500):
                return  # already gone (moto answers 500 for some missing uploads)
            raise self._translate(exc, "abort upload of", bucket, key) from None
        except BotoCoreError as exc:
            raise self._translate(exc, "abort upload of", bucket, key) from None


def multipart_etag(part_etags: list[str]) -> str:
    """The ETag S3 gives an object completed from parts with these ETags."""
    digests = b"".join(bytes.fromhex(e.strip('"').split("-")[0]) for e in part_etags)
    return f'"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{len(part_etags)}"'


def store_key(settings: S3Settings) -> str:
    """Stores of equal settings and credentials (from the environment) are interchangeable."""
    source = [repr(settings), *(os.environ.get(name) for name in _CREDENTIAL_ENV)]
    return hashlib.sha256(repr(source).encode()).hexdigest()


def _reset(store: S3Store) -> bool:
    if store._creating:  # a write still in flight: not reusable
        return False
    store.retries = 0
    store.object_metadata = {}
    store._part_checksums.clear()
    store._refused_etags.clear()
    return True


StorePool = Pool[S3Settings, S3Store]


def store_pool() -> StorePool:
    """Stores of this process reused from one unit to the next, by settings and credentials.

    A boto3 client of a warm session still costs ~16 ms of CPU (measured, bench/RESULTS.md),
    a good part of a tiny unit. A store serves one unit at a time; given back, its per-unit
    state (retry count, writer metadata, part checksums) is reset. Made lazily in the
    process that writes, forgotten by a forked child (:mod:`kafka_archive.archiver.core.pooling`).
    """
    return Pool(S3Store, store_key, reset=_reset, max_idle=16)


# The process's pool, used by the units of Spark tasks (archiver.task).
STORES = store_pool()

"""S3 access for the runtime: objects, conditional JSON documents, listings, multipart cleanup.

Every boto3 error is translated into the runtime's taxonomy with the bucket and key named
(:mod:`.translate`, applied to each request by :meth:`S3Store._translated`); the client
and its credentials are :mod:`.client`'s.
Objects become visible only complete: a single PUT, or a multipart upload that is completed
(boto3's managed transfer aborts the upload when a part fails).
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from botocore.exceptions import BotoCoreError, ClientError

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import ArchiveError, UploadError
from kafka_archive.archiver.core.pooling import Pool
from kafka_archive.archiver.state.paths import STATE_DIR
from kafka_archive.archiver.store.client import CREDENTIAL_ENV, open_client
from kafka_archive.archiver.store.requests import RequestCounter, count_requests
from kafka_archive.archiver.store.streaming import StreamingUpload
from kafka_archive.archiver.store.translate import (
    ConditionFailed,
    error_code,
    error_status,
    is_missing_key,
    is_precondition,
    translate,
)

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


MULTIPART_THRESHOLD = 16 * 1024 * 1024
PART_SIZE = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Document:
    """A JSON document read from S3 with the ETag to make a conditional write against."""

    body: dict[str, Any]
    etag: str
    # By the store's clock (0: not told): Last-Modified, and the Date it was read at.
    modified: float = field(default=0.0, repr=False, compare=False)
    served: float = field(default=0.0, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ObjectHead:
    """An object's ETag and user metadata (``x-amz-meta-*``), from a HEAD."""

    etag: str
    metadata: Mapping[str, str]


class PreconditionFailed(Exception):
    """A conditional write lost: the object changed (If-Match) or exists (If-None-Match)."""


class ConditionalWritesIgnored(Exception):
    """The endpoint applied a request whose condition was false; the message names the
    header and the request ("If-None-Match on CompleteMultipartUpload")."""


def _is_not_found(exc: ClientError) -> bool:
    """A HEAD of a key that does not exist."""
    return error_code(exc) in ("NoSuchKey", "404", "NotFound") or error_status(exc) == 404


def _is_changed_or_gone(exc: ClientError) -> bool:
    """A conditional DELETE of a key that changed or is gone."""
    return is_precondition(exc) or error_status(exc) == 404 or error_code(exc) == "NoSuchKey"


def _is_upload_gone(exc: ClientError) -> bool:
    """An abort of a multipart upload that is no more (moto answers 500 for some)."""
    return error_code(exc) == "NoSuchUpload" or error_status(exc) in (404, 500)


def _served(response: Mapping[str, Any]) -> float:
    """When the store answered, by its clock (the Date header; 0 when missing)."""
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    try:
        return email.utils.parsedate_to_datetime(str(date)).timestamp() if date else 0.0
    except (TypeError, ValueError):
        return 0.0


class S3Store:
    """A thin, typed wrapper over one boto3 S3 client."""

    # Retried requests of every store of this process (the driver's, for --follow metrics).
    process_retries: ClassVar[int] = 0

    def __init__(self, settings: S3Settings) -> None:
        self._settings = settings
        self._client = open_client(settings)
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
        self.requests = RequestCounter()  # every HTTP attempt, by type (for cost)
        count_requests(self._client, self.requests)
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
        except ConditionFailed:
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
        return translate(
            exc,
            what,
            bucket,
            key,
            endpoint_url=self._settings.endpoint_url,
            bucket_missing=self._bucket_missing,
        )

    @contextlib.contextmanager
    def _translated(
        self,
        what: str,
        bucket: str,
        key: str = "",
        *,
        unless: Callable[[ClientError], bool] | None = None,
    ) -> Iterator[None]:
        """Within: botocore's errors are raised as the runtime's (:func:`.translate.translate`),
        naming the request (``what``) and the object; a ClientError ``unless`` holds for is
        the caller's to handle, raised as it is."""
        try:
            yield
        except ClientError as exc:
            if unless is not None and unless(exc):
                raise
            raise self._translate(exc, what, bucket, key) from None
        except BotoCoreError as exc:
            raise self._translate(exc, what, bucket, key) from None

    def _bucket_missing(self, bucket: str) -> bool:
        try:
            self._client.head_bucket(Bucket=bucket)
        except ClientError as exc:
            return error_status(exc) == 404 or error_code(exc) in (
                "NoSuchBucket",
                "404",
                "NotFound",
            )
        except BotoCoreError:
            return False
        return False

    # -- preflight ---------------------------------------------------------------------

    def check_bucket(self, bucket: str) -> None:
        """Fail with a precise error unless the bucket exists and is reachable."""
        with self._translated("open", bucket):
            self._client.head_bucket(Bucket=bucket)

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
        upload = StreamingUpload(self, bucket, key, path, part_size=PART_SIZE, max_in_flight=4)
        try:
            upload.complete(size)
        except BaseException:
            upload.abort()
            raise

    def upload_bytes(self, bucket: str, key: str, body: bytes | bytearray) -> None:
        """Upload an object held in memory with one PUT, its checksum computed here."""
        with self._translated("upload", bucket, key):
            args = {**self._args(key), **self.checksum(body)}
            self._client.put_object(Bucket=bucket, Key=key, Body=body, **args)

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
        with self._translated("write", bucket, key):
            self._client.put_object(Bucket=bucket, Key=key, Body=body, **self._args(key))

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
            with self._translated("read", bucket, key, unless=is_missing_key):
                response = self._client.get_object(**kwargs)
        except ClientError:
            return None
        body: bytes = response["Body"].read()
        return body

    def delete(self, bucket: str, keys: list[str]) -> None:
        """Delete keys in batches of 1,000; a key that is already gone is fine."""
        for i in range(0, len(keys), 1000):
            chunk = keys[i : i + 1000]
            with self._translated("delete from", bucket, chunk[0]):
                response = self._client.delete_objects(
                    Bucket=bucket,
                    Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
                )
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
        with self._translated("list", bucket, prefix):
            for page in paginator.paginate(**kwargs):
                yield from page.get("Contents", [])

    # -- conditional JSON documents (state, lock) ----------------------------------------

    def get_document(self, bucket: str, key: str) -> Document | None:
        try:
            with self._translated("read", bucket, key, unless=is_missing_key):
                response = self._client.get_object(Bucket=bucket, Key=key)
        except ClientError:
            return None
        raw = response["Body"].read()
        try:
            body = json.loads(raw)
        except ValueError:
            raise UploadError(
                f"s3://{bucket}/{key} is not valid JSON",
                hint="It is kafka-archive's own state; restore it from versioning or remove it",
            ) from None
        modified = response["LastModified"].timestamp() if "LastModified" in response else 0.0
        return Document(body, str(response["ETag"]), modified, _served(response))

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

        def lost(exc: ClientError) -> bool:
            return is_precondition(exc) or (
                # If-Match on a key that is gone: S3 answers 404, the ETag we expected is not
                # the current one (unless the whole bucket is gone).
                if_match is not None
                and error_status(exc) == 404
                and not self._bucket_missing(bucket)
            )

        try:
            with self._translated("write", bucket, key, unless=lost):
                response = self._client.put_object(**kwargs)
        except ClientError:
            raise PreconditionFailed(key) from None
        return str(response["ETag"])

    def head(self, bucket: str, key: str) -> ObjectHead | None:
        """The object's ETag and user metadata, or None when it does not exist."""
        try:
            with self._translated("read", bucket, key, unless=_is_not_found):
                response = self._client.head_object(Bucket=bucket, Key=key)
        except ClientError:
            return None
        return ObjectHead(str(response["ETag"]), dict(response.get("Metadata") or {}))

    def delete_if_match(self, bucket: str, key: str, etag: str) -> bool:
        """Delete the object only while it still has ``etag``; False when it changed or is
        gone (S3 conditional delete)."""
        try:
            with self._translated("delete", bucket, key, unless=_is_changed_or_gone):
                self._client.delete_object(Bucket=bucket, Key=key, IfMatch=etag)
        except ClientError:
            return False
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
        with self._translated("delete", bucket, key):
            self._client.delete_object(Bucket=bucket, Key=key)

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
        with self._translated("upload", bucket, key):
            response = self._client.create_multipart_upload(
                Bucket=bucket, Key=key, **{**self._args(key), **extra}
            )
        return str(response["UploadId"])

    def upload_part(
        self, bucket: str, key: str, upload_id: str, number: int, body: bytes | bytearray
    ) -> str:
        """Upload part ``number`` (from 1); returns its ETag."""
        algorithm = self._multipart_algorithm()
        extra = {"ChecksumAlgorithm": algorithm} if algorithm else {}
        extra.update(self.checksum(body))
        with self._translated(f"upload part {number} of", bucket, key):
            response = self._client.upload_part(
                Bucket=bucket,
                Key=key,
                UploadId=upload_id,
                PartNumber=number,
                Body=body,
                **extra,
            )
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
            with self._translated("complete the upload of", bucket, key):
                self._client.complete_multipart_upload(
                    Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
                )
        except ConditionFailed:
            with self._creating_lock:
                self._refused_etags[(bucket, key)] = multipart_etag(etags)
            raise

    # -- multipart cleanup ----------------------------------------------------------------

    def incomplete_uploads(self, bucket: str, prefix: str) -> Iterator[tuple[str, str]]:
        """(key, upload id) of every multipart upload still open under ``prefix``."""
        paginator = self._client.get_paginator("list_multipart_uploads")
        with self._translated("list uploads in", bucket, prefix):
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
                for upload in page.get("Uploads", []):
                    yield upload["Key"], upload["UploadId"]

    def abort_upload(self, bucket: str, key: str, upload_id: str) -> None:
        try:
            with self._translated("abort upload of", bucket, key, unless=_is_upload_gone):
                self._client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        except ClientError:
            return  # already gone (moto answers 500 for some missing uploads)


def multipart_etag(part_etags: list[str]) -> str:
    """The ETag S3 gives an object completed from parts with these ETags."""
    digests = b"".join(bytes.fromhex(e.strip('"').split("-")[0]) for e in part_etags)
    return f'"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{len(part_etags)}"'


def store_key(settings: S3Settings) -> str:
    """Stores of equal settings and credentials (from the environment) are interchangeable."""
    source = [repr(settings), *(os.environ.get(name) for name in CREDENTIAL_ENV)]
    return hashlib.sha256(repr(source).encode()).hexdigest()


def _reset(store: S3Store) -> bool:
    if store._creating:  # a write still in flight: not reusable
        return False
    store.retries = 0
    store.requests.reset()
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

"""The protocol's `Store` over one real S3 bucket: our `S3Store`'s client (endpoint, region,
credentials, retries, timeouts, encryption, checksums), its conditional requests, and its
answers as the protocol tells them apart.

- 412 (and 409 ConditionalRequestConflict, a concurrent conditional write) is
  `PreconditionFailed`; 404 / NoSuchKey is `NotFound`. A DELETE If-Match of a missing key is
  either (AWS and moto answer 404, SeaweedFS 412): nothing was deleted.
- A write whose answer never came (a read timeout, a connection dropped after the request
  was sent, a 500/502/503/504) is `Ambiguous`: it may have taken effect. botocore has retried it by
  then (standard mode retries 5xx and every connection error), so the first attempt may
  have landed and a retry been refused for it: a create-only PUT answers 412 *for our own
  object*, an If-Match PUT 412 for the ETag our first attempt gave it. That 412 is settled
  here, not passed on as "taken": when an attempt of the request may have reached S3, the
  object is read back, and if it holds our bytes and our metadata it is ours (its ETag is
  returned), as `state.lock` settles a lock write whose response was lost. A writer's
  metadata names its run, epoch and attempt, an entry's body its writer: no other request
  writes the same. A DELETE refused after such a retry is `Ambiguous` (ours may be the one
  that deleted it).
- A write whose every attempt failed before anything was sent (connection refused, connect
  timeout) had no effect, and a read that fails after botocore's retries has none to
  settle: both are the runtime's errors (`store.translate`: `S3UnavailableError` when the
  endpoint cannot be reached), as are the other refusals (access denied, no such bucket,
  expired credentials, 501 NotImplemented), never a `StoreError`: the protocol stops on
  them with one line instead of retrying what cannot succeed.

DELETE If-Match is honoured by AWS (general purpose buckets since 2025-09-16), moto and
SeaweedFS; a store that ignores it is refused before any write by the conditional-write
probe (`S3Store.probe_conditional_writes`, exit 19), which the wiring must keep running.
"""

from __future__ import annotations

import builtins
import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
)

from kafka_archive.archiver.protocol.store import (
    Ambiguous,
    ListedKey,
    NotFound,
    OpenUpload,
    PreconditionFailed,
    Stored,
)
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.store.translate import error_code, error_status, is_precondition

# Failures of an attempt before its request was sent: it cannot have taken effect.
_UNSENT = (EndpointConnectionError, ConnectTimeoutError)

_EVENTS = "kafka-archive-protocol-attempts"


class _Attempts(threading.local):
    """Per thread (a boto3 client is shared by threads; its events run in the caller's):
    whether an attempt of the request being made may have reached S3 without its answer
    being the one the caller sees (a retry followed it)."""

    tracking = False
    maybe_landed = False


_ATTEMPTS = _Attempts()


def _after_attempt(
    response: Any = None, caught_exception: Exception | None = None, **_: Any
) -> None:
    """botocore's `needs-retry` event, after every attempt (the last one included)."""
    if not _ATTEMPTS.tracking:
        return
    if caught_exception is not None:
        if not isinstance(caught_exception, _UNSENT):
            _ATTEMPTS.maybe_landed = True
    elif response is not None:
        status = int(getattr(response[0], "status_code", 0) or 0)
        if status in (500, 502, 503, 504):
            _ATTEMPTS.maybe_landed = True


def _is_missing(exc: ClientError) -> bool:
    """No object at the key (a missing bucket is the runtime's error, not this)."""
    code = error_code(exc)
    return code != "NoSuchBucket" and (
        error_status(exc) == 404 or code in ("NoSuchKey", "404", "NotFound")
    )


def _server_error(exc: ClientError) -> bool:
    """An answer that does not say whether the request was applied (botocore's transient
    statuses); 501 NotImplemented (a store without conditional writes) is a refusal."""
    return error_status(exc) in (500, 502, 503, 504)


class BucketStore:
    """The protocol's `Store` (`protocol.store.Store`) over one bucket of an `S3Store`.
    Listings are read a page (`page_size` keys, S3's 1,000 by default) per request."""

    def __init__(self, store: S3Store, bucket: str, *, page_size: int | None = None) -> None:
        self._store = store
        self._bucket = bucket
        self._page_size = page_size
        self._client = store.client
        # (upload id, part number) -> the part's checksum, which its Complete must name
        self._part_checksums: dict[tuple[str, int], dict[str, str]] = {}
        # Once per client (a pooled S3Store's client serves many adapters).
        self._client.meta.events.register("needs-retry.s3", _after_attempt, unique_id=_EVENTS)

    @property
    def bucket(self) -> str:
        return self._bucket

    # -- requests ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _request(self, what: str, key: str, *, write: bool) -> Iterator[None]:
        """Within: one request's failures as the runtime's errors, except those the caller
        tells apart (ClientErrors it handles itself are re-raised by it); a write that may
        have landed without answer is `Ambiguous`."""
        try:
            yield
        except ClientError as exc:
            if write and _server_error(exc):
                raise Ambiguous(f"{what} s3://{self._bucket}/{key}: {error_status(exc)}") from None
            raise self._store._translate(exc, what, self._bucket, key) from None
        except BotoCoreError as exc:
            if write and _ATTEMPTS.maybe_landed:
                raise Ambiguous(f"{what} s3://{self._bucket}/{key}: {type(exc).__name__}") from None
            raise self._store._translate(exc, what, self._bucket, key) from None

    @contextlib.contextmanager
    def _tracked(self) -> Iterator[None]:
        _ATTEMPTS.tracking, _ATTEMPTS.maybe_landed = True, False
        try:
            yield
        finally:
            _ATTEMPTS.tracking = False

    def _maybe_landed(self) -> bool:
        return _ATTEMPTS.maybe_landed

    # -- the Store protocol -----------------------------------------------------------------

    def get(self, key: str) -> Stored:
        with self._request("read", key, write=False):
            try:
                response = self._client.get_object(Bucket=self._bucket, Key=key)
                body: bytes = response["Body"].read()
            except ClientError as exc:
                if _is_missing(exc):
                    raise NotFound(key) from None
                raise
        return self._stored(key, response, body)

    def head(self, key: str) -> Stored:
        with self._request("read", key, write=False):
            try:
                response = self._client.head_object(Bucket=self._bucket, Key=key)
            except ClientError as exc:
                if _is_missing(exc):
                    raise NotFound(key) from None
                raise
        return self._stored(key, response, b"")

    def put(
        self,
        key: str,
        body: bytes,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> str:
        kwargs: dict[str, Any] = {
            "Bucket": self._bucket,
            "Key": key,
            "Body": body,
            "Metadata": dict(metadata),
            **self._store._args(key),
            **self._store.checksum(body),
        }
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        conditional = if_none_match or if_match is not None
        with self._tracked(), self._request("write", key, write=True):
            try:
                response = self._client.put_object(**kwargs)
            except ClientError as exc:
                if not conditional or not (is_precondition(exc) or _is_missing(exc)):
                    raise
                refused = (PreconditionFailed if is_precondition(exc) else NotFound)(key)
                etag = self._ours(key, body, metadata) if self._maybe_landed() else None
                if etag is None:
                    raise refused from None
                return etag
        return str(response["ETag"])

    def _ours(self, key: str, body: bytes, metadata: Mapping[str, str]) -> str | None:
        """The ETag of the object at `key` when it is the one we sent (our bytes, our
        metadata): an attempt of ours landed before the retry that was refused."""
        try:
            found = self.get(key)
        except NotFound:
            return None
        mine = {k.lower(): v for k, v in metadata.items()}
        if found.body == body and dict(found.metadata) == mine:
            return found.etag
        return None

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": key}
        if if_match is not None:
            kwargs["IfMatch"] = if_match
        with self._tracked(), self._request("delete", key, write=True):
            try:
                self._client.delete_object(**kwargs)
            except ClientError as exc:
                if if_match is None or not (is_precondition(exc) or _is_missing(exc)):
                    raise
                if self._maybe_landed():  # our own earlier attempt may have deleted it
                    raise Ambiguous(
                        f"delete s3://{self._bucket}/{key}: refused after a retry"
                    ) from None
                raise (PreconditionFailed if is_precondition(exc) else NotFound)(key) from None

    def list(self, prefix: str, start_after: str = "") -> list[ListedKey]:
        paginator = self._client.get_paginator("list_objects_v2")
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": prefix}
        if start_after:
            kwargs["StartAfter"] = start_after
        if self._page_size is not None:
            kwargs["PaginationConfig"] = {"PageSize": self._page_size}
        out: list[ListedKey] = []
        with self._request("list", prefix, write=False):
            for page in paginator.paginate(**kwargs):
                for item in page.get("Contents", []):
                    out.append(
                        ListedKey(
                            str(item["Key"]),
                            str(item.get("ETag", "")),
                            item["LastModified"].timestamp(),
                            int(item.get("Size", 0)),
                        )
                    )
        return out

    # -- multipart -------------------------------------------------------------------------

    def _part_args(self, body: bytes | None = None) -> dict[str, Any]:
        algorithm = self._store._multipart_algorithm()
        extra = {"ChecksumAlgorithm": algorithm} if algorithm else {}
        if body is not None:
            extra.update(self._store.checksum(body))
        return extra

    def create_upload(self, key: str, metadata: Mapping[str, str]) -> str:
        kwargs = {**self._store._args(key), **self._part_args()}
        with self._tracked(), self._request("upload", key, write=True):
            response = self._client.create_multipart_upload(
                Bucket=self._bucket, Key=key, Metadata=dict(metadata), **kwargs
            )
        return str(response["UploadId"])

    def upload_part(self, key: str, upload_id: str, number: int, body: bytes) -> str:
        with self._tracked(), self._request(f"upload part {number} of", key, write=True):
            try:
                response = self._client.upload_part(
                    Bucket=self._bucket,
                    Key=key,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=body,
                    **self._part_args(body),
                )
            except ClientError as exc:
                if error_code(exc) == "NoSuchUpload" or _is_missing(exc):
                    raise NotFound(key) from None
                raise
        algorithm = self._store._multipart_algorithm()
        if algorithm:  # CompleteMultipartUpload names each part's checksum
            field = f"Checksum{algorithm}"
            self._part_checksums[(upload_id, number)] = {field: str(response.get(field, ""))}
        return str(response["ETag"])

    def complete_upload(
        self,
        key: str,
        upload_id: str,
        parts: Sequence[tuple[int, str]],
        *,
        if_none_match: bool = False,
    ) -> str:
        named = [
            {"ETag": etag, "PartNumber": n, **self._part_checksums.get((upload_id, n), {})}
            for n, etag in parts
        ]
        kwargs: dict[str, Any] = {"IfNoneMatch": "*"} if if_none_match else {}
        with self._tracked(), self._request("complete the upload of", key, write=True):
            try:
                response = self._client.complete_multipart_upload(
                    Bucket=self._bucket,
                    Key=key,
                    UploadId=upload_id,
                    MultipartUpload={"Parts": named},
                    **kwargs,
                )
            except ClientError as exc:
                if is_precondition(exc):
                    raise PreconditionFailed(key) from None
                if error_code(exc) == "NoSuchUpload" or _is_missing(exc):
                    raise NotFound(key) from None
                raise
        for n, _ in parts:
            self._part_checksums.pop((upload_id, n), None)
        return str(response["ETag"])

    def abort_upload(self, key: str, upload_id: str) -> None:
        with self._tracked(), self._request("abort the upload of", key, write=True):
            try:
                self._client.abort_multipart_upload(
                    Bucket=self._bucket, Key=key, UploadId=upload_id
                )
            except ClientError as exc:
                if error_code(exc) == "NoSuchUpload" or _is_missing(exc):
                    raise NotFound(key) from None
                raise

    def list_uploads(self, prefix: str) -> builtins.list[OpenUpload]:
        paginator = self._client.get_paginator("list_multipart_uploads")
        out: list[OpenUpload] = []
        with self._request("list uploads in", prefix, write=False):
            for page in paginator.paginate(Bucket=self._bucket, Prefix=prefix):
                for u in page.get("Uploads", []):
                    out.append(
                        OpenUpload(str(u["Key"]), str(u["UploadId"]), u["Initiated"].timestamp())
                    )
        return out

    @staticmethod
    def _stored(key: str, response: Mapping[str, Any], body: bytes) -> Stored:
        meta = {str(k).lower(): str(v) for k, v in (response.get("Metadata") or {}).items()}
        return Stored(key, str(response["ETag"]), response["LastModified"].timestamp(), meta, body)

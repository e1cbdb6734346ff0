"""The narrow store interface the protocol needs: S3's conditional requests, nothing more."""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol


class StoreError(Exception):
    """A request's failure as the protocol tells them apart."""


class PreconditionFailed(StoreError):
    """412: If-None-Match found the key, or If-Match another ETag. Nothing changed."""


class NotFound(StoreError):
    """404: no object at the key."""


class Ambiguous(StoreError):
    """No answer (timeout, lost response): the request may have taken effect, or may still."""


@dataclass(frozen=True)
class Stored:
    """An object as GET or HEAD returns it (HEAD: body empty)."""

    key: str
    etag: str
    last_modified: float
    metadata: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass(frozen=True)
class ListedKey:
    key: str
    etag: str
    last_modified: float
    size: int


@dataclass(frozen=True)
class OpenUpload:
    """A multipart upload created and neither completed nor aborted."""

    key: str
    upload_id: str
    initiated: float


class Store(Protocol):
    """One bucket. Keys are full keys; the protocol builds them from the target prefix."""

    def get(self, key: str) -> Stored: ...

    def head(self, key: str) -> Stored: ...

    def put(
        self,
        key: str,
        body: bytes,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> str:
        """Creates or replaces `key`; returns the new ETag."""
        ...

    def delete(self, key: str, *, if_match: str | None = None) -> None: ...

    def list(self, prefix: str, start_after: str = "") -> list[ListedKey]:
        """Keys under `prefix` after `start_after`, in byte order."""
        ...

    # -- multipart (objects above the part size: store/streaming.py) ---------------------
    # CreateMultipartUpload and UploadPart take no condition (S3 refuses them there); the
    # object appears at Complete, which is the create: If-None-Match as a PUT's, and an
    # ETag that is not the body's MD5 but "<MD5 of the parts' MD5s>-<parts>".

    def create_upload(self, key: str, metadata: Mapping[str, str]) -> str:
        """Opens an upload of `key` with `metadata`; returns its id."""
        ...

    def upload_part(self, key: str, upload_id: str, number: int, body: bytes) -> str:
        """Part `number` (from 1; sent again, it replaces itself); returns its ETag.
        `NotFound`: no such upload (aborted, or completed)."""
        ...

    def complete_upload(
        self,
        key: str,
        upload_id: str,
        parts: Sequence[tuple[int, str]],
        *,
        if_none_match: bool = False,
    ) -> str:
        """The object from the parts (number, ETag); returns its ETag. `PreconditionFailed`:
        `key` exists (If-None-Match); `NotFound`: no such upload (aborted, or completed:
        a retry of a Complete that landed may answer either, or succeed, as moto does)."""
        ...

    def abort_upload(self, key: str, upload_id: str) -> None:
        """Drops an open upload and its parts. `NotFound`: no such upload."""
        ...

    def list_uploads(self, prefix: str) -> builtins.list[OpenUpload]:
        """The open uploads of keys under `prefix`."""
        ...

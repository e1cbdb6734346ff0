"""The narrow store interface the protocol needs: S3's conditional requests, nothing more."""

from __future__ import annotations

from collections.abc import Mapping
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

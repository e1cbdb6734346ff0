"""An in-memory S3 model with S3's conditional semantics and injectable faults.

Semantics: strong read-after-write; ETags that name the content, as S3's ETag of a single PUT
(the body's MD5): the same bytes written again have the same ETag whatever their metadata, so
If-Match cannot tell two writers' objects of the same bytes apart; 412 on a failed
If-None-Match / If-Match, 404 on a missing key (DELETE included when it carries If-Match),
listings in byte order. Faults, chosen per request by a `Faults`:
a lost response (the request took effect, the caller sees `Ambiguous`), a delayed request
(the caller sees `Ambiguous` now; the request lands later, when `deliver` is called: after
its sender paused, crashed or retried), a dropped request (`Ambiguous`, and it never
lands), a stale listing (keys created most recently are missing from it), a read without
answer.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from kafka_archive.archiver.protocol.store import (
    Ambiguous,
    ListedKey,
    NotFound,
    OpenUpload,
    PreconditionFailed,
    Stored,
)

T = TypeVar("T")


class Fate(Enum):
    DELIVER = "deliver"
    LOSE_RESPONSE = "lose_response"
    DELAY = "delay"
    DROP = "drop"  # never lands: an endpoint that times out without applying anything


class Faults:
    """No faults; subclass (the simulation's draws from its seeded RNG)."""

    def fate(self, op: str, key: str) -> Fate:
        return Fate.DELIVER

    def stale_by(self) -> int:
        """How many of the most recently created keys a listing misses."""
        return 0


@dataclass
class _Object:
    body: bytes
    etag: str
    metadata: dict[str, str]
    last_modified: float
    created: int  # creation order, for stale listings


@dataclass
class _Upload:
    key: str
    metadata: dict[str, str]
    initiated: float
    parts: dict[int, bytes] = field(default_factory=dict)


def md5(body: bytes) -> str:
    return hashlib.md5(body, usedforsecurity=False).hexdigest()


def multipart_etag(parts: Sequence[bytes]) -> str:
    """S3's ETag of a completed multipart upload: the MD5 of the parts' MD5 digests, then the
    count of parts."""
    digests = b"".join(hashlib.md5(p, usedforsecurity=False).digest() for p in parts)
    return f'"{md5(digests)}-{len(parts)}"'


@dataclass
class Delayed:
    """A request in flight: `land()` applies it to the store (its result goes nowhere)."""

    op: str
    key: str
    land: Callable[[], None]


@dataclass
class MemStore:
    faults: Faults = field(default_factory=Faults)
    now: float = 0.0
    objects: dict[str, _Object] = field(default_factory=dict)
    in_flight: list[Delayed] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    changed: set[str] = field(default_factory=set)  # keys put or deleted (for a checker)
    uploads: dict[str, _Upload] = field(default_factory=dict)  # open multipart uploads, by id
    _creates: int = 0
    _uploads: int = 0

    # -- the Store protocol ------------------------------------------------------------

    def get(self, key: str) -> Stored:
        self.requests["GET"] += 1
        self._read("GET", key)
        o = self.objects.get(key)
        if o is None:
            raise NotFound(key)
        return Stored(key, o.etag, o.last_modified, dict(o.metadata), o.body)

    def head(self, key: str) -> Stored:
        self.requests["HEAD"] += 1
        self._read("HEAD", key)
        o = self.objects.get(key)
        if o is None:
            raise NotFound(key)
        return Stored(key, o.etag, o.last_modified, dict(o.metadata))

    def put(
        self,
        key: str,
        body: bytes,
        metadata: Mapping[str, str],
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> str:
        self.requests["PUT"] += 1
        meta = dict(metadata)
        return self._send(
            "PUT",
            key,
            lambda: self._write(key, body, f'"{md5(body)}"', meta, if_none_match, if_match),
        )

    def _write(
        self,
        key: str,
        body: bytes,
        etag: str,
        meta: dict[str, str],
        if_none_match: bool,
        if_match: str | None,
    ) -> str:
        old = self.objects.get(key)
        if if_none_match and old is not None:
            raise PreconditionFailed(key)
        if if_match is not None and (old is None or old.etag != if_match):
            raise (NotFound if old is None else PreconditionFailed)(key)
        if old is None:
            self._creates += 1
        created = self._creates if old is None else old.created
        self.objects[key] = _Object(body, etag, meta, self.now, created)
        self.changed.add(key)
        return etag

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        self.requests["DELETE"] += 1

        def apply() -> None:
            old = self.objects.get(key)
            if if_match is not None:
                if old is None:
                    raise NotFound(key)
                if old.etag != if_match:
                    raise PreconditionFailed(key)
            if self.objects.pop(key, None) is not None:
                self.changed.add(key)

        self._send("DELETE", key, apply)

    def list(self, prefix: str, start_after: str = "") -> list[ListedKey]:
        self.requests["LIST"] += 1
        self._read("LIST", prefix)
        hide = self.faults.stale_by()
        newest = self._creates - hide
        keys = sorted(k for k in self.objects if k.startswith(prefix) and k > start_after)
        return [
            ListedKey(k, o.etag, o.last_modified, len(o.body))
            for k in keys
            if (o := self.objects[k]).created <= newest
        ]

    # -- multipart: a completed upload is one object; a retried Complete of it answers
    # NotFound (AWS's NoSuchUpload; moto answers it again, SeaweedFS 412 If-None-Match) ----

    def create_upload(self, key: str, metadata: Mapping[str, str]) -> str:
        self.requests["POST"] += 1
        self._uploads += 1
        upload_id = f"upload-{self._uploads}"  # drawn when sent: a lost answer loses it
        meta = dict(metadata)

        def apply() -> str:
            self.uploads[upload_id] = _Upload(key, meta, self.now)
            return upload_id

        return self._send("POST", key, apply)

    def upload_part(self, key: str, upload_id: str, number: int, body: bytes) -> str:
        self.requests["PUT"] += 1

        def apply() -> str:
            up = self.uploads.get(upload_id)
            if up is None or up.key != key:
                raise NotFound(f"{key}: no upload {upload_id}")
            up.parts[number] = body
            return f'"{md5(body)}"'

        return self._send("PUT", key, apply)

    def complete_upload(
        self,
        key: str,
        upload_id: str,
        parts: Sequence[tuple[int, str]],
        *,
        if_none_match: bool = False,
    ) -> str:
        self.requests["POST"] += 1

        def apply() -> str:
            up = self.uploads.get(upload_id)
            if up is None or up.key != key:
                raise NotFound(f"{key}: no upload {upload_id}")
            bodies = [up.parts.get(n, b"") for n, _ in parts]
            if [n for n, _ in parts] != sorted(up.parts) or [f'"{md5(b)}"' for b in bodies] != [
                etag for _, etag in parts
            ]:
                raise ValueError(f"{key}: Complete names parts the upload does not hold")
            etag = self._write(
                key, b"".join(bodies), multipart_etag(bodies), up.metadata, if_none_match, None
            )
            del self.uploads[upload_id]  # a refused Complete (412) leaves the upload open
            return etag

        return self._send("POST", key, apply)

    def abort_upload(self, key: str, upload_id: str) -> None:
        self.requests["DELETE"] += 1

        def apply() -> None:
            if self.uploads.pop(upload_id, None) is None:
                raise NotFound(f"{key}: no upload {upload_id}")

        self._send("DELETE", key, apply)

    def list_uploads(self, prefix: str) -> builtins.list[OpenUpload]:
        self.requests["LIST"] += 1
        self._read("LIST", prefix)
        found = [
            OpenUpload(u.key, i, u.initiated)
            for i, u in self.uploads.items()
            if u.key.startswith(prefix)
        ]
        return sorted(found, key=lambda u: (u.key, u.upload_id))

    # -- faults ------------------------------------------------------------------------

    def _read(self, op: str, key: str) -> None:
        """A read's fault: no answer (a read has no effect, so a delayed one is a lost one)."""
        if self.faults.fate(op, key) is not Fate.DELIVER:
            raise Ambiguous(f"{op} {key}: no response")

    def _send(self, op: str, key: str, apply: Callable[[], T]) -> T:
        fate = self.faults.fate(op, key)
        if fate is Fate.DELIVER:
            return apply()
        if fate is Fate.LOSE_RESPONSE:
            with contextlib.suppress(PreconditionFailed, NotFound):
                apply()
            raise Ambiguous(f"{op} {key}: response lost")
        if fate is Fate.DROP:
            raise Ambiguous(f"{op} {key}: no response")

        def land() -> None:
            with contextlib.suppress(PreconditionFailed, NotFound):
                apply()

        self.in_flight.append(Delayed(op, key, land))
        raise Ambiguous(f"{op} {key}: no response yet")

    def deliver(self, index: int) -> Delayed:
        """Lands the request in flight at `index` now."""
        d = self.in_flight.pop(index)
        d.land()
        return d

    def deliver_all(self) -> None:
        while self.in_flight:
            self.deliver(0)

    def raw(self, key: str) -> tuple[str, bytes] | None:
        """The ETag and body at `key`, bypassing faults and counts (the checker's view)."""
        o = self.objects.get(key)
        return None if o is None else (o.etag, o.body)

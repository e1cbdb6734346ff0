"""The Kafka record as the runtime sees it, independent of the Kafka client library."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Record:
    """One Kafka record. ``timestamp`` is milliseconds since the epoch, or None if unknown."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()

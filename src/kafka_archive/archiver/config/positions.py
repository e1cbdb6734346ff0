"""The ``--start`` setting and the ISO-8601 times of ``--start``, ``--until`` and
``--from-time``/``--to-time``, parsed. Pure logic.

``--start`` applies only to partitions that have no state yet: ``earliest`` (default), ``latest``,
an ISO-8601 timestamp (the first offset whose record time is at or after it), or
``group:<consumer-group>`` (adopt that group's committed offsets, to migrate from a Kafka
Connect sink with no gap and no duplicate). Where a partition starts is
:mod:`.plan.start`'s decision.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

from kafka_archive.archiver.core.errors import ConfigError


class StartKind(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    TIMESTAMP = "timestamp"
    GROUP = "group"


@dataclass(frozen=True, slots=True)
class StartPosition:
    kind: StartKind = StartKind.EARLIEST
    timestamp_ms: int | None = None
    group: str | None = None

    def __str__(self) -> str:
        if self.kind is StartKind.GROUP:
            return f"group:{self.group}"
        if self.kind is StartKind.TIMESTAMP and self.timestamp_ms is not None:
            return to_iso(self.timestamp_ms)
        return str(self.kind.value)


def to_iso(ms: int) -> str:
    moment = dt.datetime.fromtimestamp(ms / 1000, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(text: str, what: str) -> int:
    """ISO-8601 (``2026-11-01``, ``2026-11-01T10:00:00Z``, ``…+02:00``) to epoch ms.

    A time without a zone is UTC, as are dates (midnight UTC).
    """
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(
            f"{what} {text!r} is not an ISO-8601 time",
            hint="Use e.g. 2026-11-01 or 2026-11-01T10:00:00Z",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def parse_start(text: str) -> StartPosition:
    value = text.strip()
    lowered = value.lower()
    if lowered in ("earliest", "latest"):
        return StartPosition(StartKind(lowered))
    if lowered.startswith("group:"):
        group = value[len("group:") :].strip()
        if not group:
            raise ConfigError("--start group: needs a consumer group name, e.g. group:s3-sink")
        return StartPosition(StartKind.GROUP, group=group)
    if value[:1].isdigit():
        return StartPosition(StartKind.TIMESTAMP, timestamp_ms=parse_timestamp(value, "--start"))
    raise ConfigError(
        f"--start {text!r} is not a start position",
        hint="Use earliest, latest, an ISO-8601 time, or group:<consumer-group>",
    )

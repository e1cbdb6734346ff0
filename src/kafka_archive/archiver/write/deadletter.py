"""Records the format cannot store, under ``PROPERTIES('error.policy'=…)``:

- ``fail`` (default): the unit stops at the record, commits what it cleanly wrote before
  it, and the run exits 10 naming topic, partition and offset;
- ``skip``: the record is counted (summary, report, a log line with its offset — never its
  payload) and left out;
- ``dead-letter``: the record, whole (the JSON envelope: key, value, headers, metadata) with
  the error, goes to ``<prefix>/_dead-letter/<topic>/<partition>/<first offset>.json``
  (the leading ``_`` keeps Hive-style readers from taking it for data). The object is
  written with an intent marker before the unit commits, so a crashed attempt's object is
  removed like any other and a retry writes the same key.

Nothing is dropped without a count.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.envelope import to_json_document
from kafka_archive.kcql.plan import Envelope, Route

FAIL, SKIP, DEAD_LETTER = "fail", "skip", "dead-letter"
DIRECTORY = "_dead-letter"


def policy_of(route: Route) -> str:
    return route.error_policy.value


def dead_letter_key(route: Route, tp: TopicPartition, first_offset: int) -> str:
    head = route.target.head
    return f"{head}{DIRECTORY}/{tp.topic}/{tp.partition}/{first_offset:012d}.json"


@dataclass
class DeadLetters:
    """The refused records of one unit, kept until the unit ends (they are expected few)."""

    lines: list[bytes] = field(default_factory=list)
    first_offset: int | None = None
    offsets: list[int] = field(default_factory=list)

    def add(self, record: Record, error: str) -> None:
        document = to_json_document(record, Envelope(enabled=True))
        document["error"] = error
        line = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
        self.lines.append(line + b"\n")
        self.offsets.append(record.offset)
        if self.first_offset is None:
            self.first_offset = record.offset

    def below(self, cut: int) -> DeadLetters:
        """The letters of records before offset ``cut`` (those a commit at ``cut`` covers)."""
        kept = [(o, line) for o, line in zip(self.offsets, self.lines, strict=True) if o < cut]
        return DeadLetters(
            [line for _, line in kept], kept[0][0] if kept else None, [o for o, _ in kept]
        )

    def body(self) -> bytes:
        return b"".join(self.lines)


@dataclass
class Refused:
    """Records of one unit that the error policy kept out of the archive. ``log`` names a
    skipped record (the task's logger: its lines keep their logger's name)."""

    policy: str = FAIL
    tp: TopicPartition | None = None
    log: logging.Logger = field(default_factory=lambda: logging.getLogger(__name__))
    skipped: int = 0
    letters: DeadLetters = field(default_factory=DeadLetters)

    def take(self, record: Record, error: Exception) -> bool:
        """Keep ``record``, which the archive cannot store (``error``), out of it as the
        policy says: counted (``skip``) or a dead letter; False under ``fail`` (the unit
        stops at the record)."""
        if self.policy == SKIP:
            self.skipped += 1
            self.log.warning("skipped %s offset %d: %s", self.tp, record.offset, error)
            return True
        if self.policy == DEAD_LETTER:
            self.letters.add(record, str(error))
            return True
        return False

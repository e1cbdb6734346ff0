"""STOREAS TEXT: one UTF-8 value per line."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import repeat

from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.base import BadRecordError, EncodedBatch
from kafka_archive.archiver.formats.lines import LineWriter


class TextWriter(LineWriter):
    """Writes each value followed by a newline.

    A line-per-value file cannot hold a value that contains a line break, nor tell a
    tombstone from an empty value, so both are refused (use JSON or BYTES for such topics).
    """

    def encode(self, record: Record) -> bytes:
        return checked_line(record.value)


def checked_line(value: bytes | None) -> bytes:
    """The TEXT line of a value; raises :class:`BadRecordError` for one TEXT cannot store."""
    if value is None:
        raise BadRecordError("a tombstone (null value) cannot be stored as TEXT")
    if b"\n" in value or b"\r" in value:
        raise BadRecordError("value contains a line break, which TEXT cannot store")
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRecordError("value is not UTF-8 text") from None
    return value + b"\n"


_NEWLINE = ord("\n")


def encode_values(values: Sequence[bytes | None]) -> EncodedBatch:
    """The lines of a batch of values, back to back; raises :class:`BadRecordError` for any
    value TEXT cannot store, before anything is written.

    Checked in C, with memchr where it can: no value holds a newline (an int needle), the
    values joined by newlines hold no carriage return, and are ASCII (valid UTF-8 as it is)
    or else decode as UTF-8 (a newline cannot complete a split character). Counting the
    newlines of the joined batch instead costs ten times more (bytes.count is no memchr).
    """
    if not values:
        return EncodedBatch(b"", [0])
    if None in values:
        raise BadRecordError("a tombstone (null value) cannot be stored as TEXT")
    present: Sequence[bytes] = values  # type: ignore[assignment]  # no None, checked above
    joined = b"\n".join([*present, b""])
    if any(map(operator.contains, present, repeat(_NEWLINE))) or b"\r" in joined:
        raise BadRecordError("value contains a line break, which TEXT cannot store")
    if not joined.isascii():
        try:
            joined.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRecordError("value is not UTF-8 text") from None
    return EncodedBatch.framed(present, 1, joined)

"""STOREAS TEXT: one UTF-8 value per line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import BinaryIO

from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.records import Record
from kafka_archive.archiver.schema_registry import SchemaRegistry
from kafka_archive.kcql.plan import Route


class TextWriter:
    """Writes each value followed by a newline.

    A line-per-value file cannot hold a value that contains a line break, nor tell a
    tombstone from an empty value, so both are refused (use JSON or BYTES for such topics).
    """

    def __init__(
        self, sink: BinaryIO, route: Route, registry: SchemaRegistry | None = None
    ) -> None:
        self._registry = registry
        self._sink = sink
        self._written = 0

    def accepts(self, record: Record) -> bool:
        return True

    def write(self, record: Record) -> None:
        line = _line(record.value)
        self._sink.write(line)
        self._written += len(line)

    def write_encoded(self, data: bytes) -> None:
        """Write lines made by :func:`encode_values` (the batch path)."""
        self._sink.write(data)
        self._written += len(data)

    def bytes_written(self) -> int:
        return self._written

    def close(self) -> None:
        self._sink.flush()


def _line(value: bytes | None) -> bytes:
    if value is None:
        raise BadRecordError("a tombstone (null value) cannot be stored as TEXT")
    if b"\n" in value or b"\r" in value:
        raise BadRecordError("value contains a line break, which TEXT cannot store")
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRecordError("value is not UTF-8 text") from None
    return value + b"\n"


def encode_values(values: Sequence[bytes | None]) -> list[bytes]:
    """The lines of a batch of values; raises :class:`BadRecordError` for any value TEXT
    cannot store, before anything is written.

    Checked on the batch joined by newlines: a value that adds a line break, or bytes that
    are not UTF-8 (a newline cannot complete a split character), show in the whole.
    """
    if not values:
        return []
    if None in values:
        raise BadRecordError("a tombstone (null value) cannot be stored as TEXT")
    present: Sequence[bytes] = values  # type: ignore[assignment]  # no None, checked above
    joined = b"\n".join(present)
    if joined.count(b"\n") != len(present) - 1 or b"\r" in joined:
        raise BadRecordError("value contains a line break, which TEXT cannot store")
    try:
        joined.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRecordError("value is not UTF-8 text") from None
    return [v + b"\n" for v in present]

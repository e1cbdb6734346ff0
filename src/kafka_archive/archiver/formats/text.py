"""STOREAS TEXT: one UTF-8 value per line."""

from __future__ import annotations

from typing import BinaryIO

from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.formats.registry import SchemaRegistry
from kafka_archive.archiver.records import Record
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
        value = record.value
        if value is None:
            raise BadRecordError("a tombstone (null value) cannot be stored as TEXT")
        if b"\n" in value or b"\r" in value:
            raise BadRecordError("value contains a line break, which TEXT cannot store")
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRecordError("value is not UTF-8 text") from None
        self._sink.write(value)
        self._sink.write(b"\n")
        self._written += len(value) + 1

    def bytes_written(self) -> int:
        return self._written

    def close(self) -> None:
        self._sink.flush()

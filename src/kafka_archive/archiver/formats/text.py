"""STOREAS TEXT: one UTF-8 value per line."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from itertools import repeat
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

    Checked value by value in C (``map``): line breaks, then ASCII (valid UTF-8 as it is);
    only a batch with other bytes is decoded, joined by newlines (a newline cannot complete
    a split character). Measured, this costs half of decoding every batch joined.
    """
    if not values:
        return []
    if None in values:
        raise BadRecordError("a tombstone (null value) cannot be stored as TEXT")
    present: Sequence[bytes] = values  # type: ignore[assignment]  # no None, checked above
    try:
        breaks = any(map(operator.contains, present, repeat(b"\n"))) or any(
            map(operator.contains, present, repeat(b"\r"))
        )
        ascii_only = all(map(bytes.isascii, present))
    except TypeError:  # bytes-like values (a transform's): checked on the joined batch
        joined = b"\n".join(present)
        breaks = joined.count(b"\n") != len(present) - 1 or b"\r" in joined
        ascii_only = False
    if breaks:
        raise BadRecordError("value contains a line break, which TEXT cannot store")
    if not ascii_only:
        try:
            b"\n".join(present).decode("utf-8")
        except UnicodeDecodeError:
            raise BadRecordError("value is not UTF-8 text") from None
    return [v + b"\n" for v in present]

"""STOREAS CSV and CSV_WITHHEADERS: RFC 4180 rows (``\\r\\n`` line ends, fields quoted when
they need it) of the selected fields, or of the value's top-level fields for ``SELECT *``.

Columns are the SELECT list's names; for ``SELECT *`` they are the top-level fields of the
object's first value, and a value with a field outside them starts a new object (a field it
lacks is an empty cell). A cell holds a string as it is, a number or ``true``/``false`` as
JSON text, an object or array as compact JSON, and null as nothing. ``CSV_WITHHEADERS``
starts each object with the column names.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any, BinaryIO

from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.lines import LineWriter
from kafka_archive.archiver.formats.structured import decode_value
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry
from kafka_archive.archiver.partition.fields import projector_for
from kafka_archive.kcql.plan import Format, Route


def cell(value: Any) -> str:
    """The CSV text of one JSON value."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def comparable(cells: list[str]) -> tuple[str, ...]:
    """What ``verify`` compares of a CSV row: its non-empty cells, whatever their order
    (a row does not name its columns)."""
    return tuple(sorted(c for c in cells if c))


class CsvWriter(LineWriter):
    def __init__(
        self, sink: BinaryIO, route: Route, registry: SchemaRegistry | None = None
    ) -> None:
        super().__init__(sink, route, registry)
        self._headers = route.format is Format.CSV_WITHHEADERS
        self._projector = projector_for(route)
        self._columns: tuple[str, ...] | None = None
        self._last: tuple[Record, dict[str, Any]] | None = None
        self._buffer = io.StringIO()
        self._csv = csv.writer(self._buffer, lineterminator="\r\n")

    def _row(self, record: Record) -> dict[str, Any]:
        if self._last is not None and self._last[0] is record:
            return self._last[1]
        row = (
            self._projector.project(record, self._registry)
            if self._projector is not None
            else decode_value(record, self._registry)
        )
        self._last = (record, row)
        return row

    def accepts(self, record: Record) -> bool:
        if self._columns is None or self._projector is not None:
            return True
        try:
            return set(self._row(record)) <= set(self._columns)
        except ValueError:
            return True  # write raises BadRecordError

    def encode(self, record: Record) -> bytes:
        row = self._row(record)
        if self._columns is None:
            self._columns = tuple(row)
            if self._headers:
                self._csv.writerow(self._columns)
        self._csv.writerow([cell(row.get(name)) for name in self._columns])
        data = self._buffer.getvalue().encode("utf-8")
        self._buffer.seek(0)
        self._buffer.truncate()
        return data


def read_rows(data: bytes, headers: bool) -> list[list[str]]:
    """The rows of a CSV object (without its header row).

    Raises:
        ValueError: not UTF-8, or not complete CSV.
    """
    text = data.decode("utf-8")
    if text and not text.endswith("\n"):
        raise ValueError("the last row has no line break (the object is cut short)")
    rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    return rows[1:] if headers else rows

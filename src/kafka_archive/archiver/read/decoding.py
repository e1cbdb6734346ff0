"""Decode archived objects into records, and say how a Kafka record should read back.

``read_object`` decodes an object's bytes with the format's own framing (it never guesses);
``stored_form`` gives the form a Kafka record takes in that format, so that ``verify`` can
compare the archive with Kafka record by record. A damaged object (cut short, not the
format) raises :class:`UnreadableObject`.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import fastavro

from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import avsc, csv_, json_, schema, text
from kafka_archive.archiver.formats import envelope as env
from kafka_archive.archiver.formats.bytes_ import read_values
from kafka_archive.archiver.formats.structured import ENVELOPE_NAME, decode_value, row_to_record
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry, decoded, jsonable
from kafka_archive.archiver.partition.fields import Projector
from kafka_archive.kcql.plan import Envelope, Format

FULL_ENVELOPE = Envelope(enabled=True)


class UnreadableObject(ValueError):
    """An object's bytes do not decode in its format (truncated or corrupt)."""


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record as an object holds it.

    ``value`` is the comparable form (see :func:`stored_form`); ``raw`` the value's bytes as
    stored (None for a tombstone), what a values-only restore produces; ``content`` the
    value as the object holds it, what ``cat`` prints: a JSON value (JSON; AVRO and PARQUET
    rows in their JSON form), a string (TEXT), bytes (BYTES), the row's cells (CSV), None
    in an envelope (whose value is ``raw``). ``offset``, ``key``, ``headers`` and
    ``timestamp`` are known only where the format keeps them (the envelope).
    """

    value: Any
    raw: bytes | None = None
    content: Any = None
    offset: int | None = None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes | None], ...] | None = None
    timestamp: int | None = None
    has_envelope: bool = False


def _lines(data: bytes) -> list[bytes]:
    if not data:
        return []
    if not data.endswith(b"\n"):
        raise UnreadableObject("the last line has no line break (the object is cut short)")
    return data[:-1].split(b"\n")


Reader = Callable[[bytes, Envelope | None], list[StoredRecord]]


def from_envelope(record: Record, envelope: Envelope) -> StoredRecord:
    """The stored form of a record read from an envelope (one without its metadata part,
    ``'store.envelope.fields.metadata'=false``, stores no offset)."""
    return StoredRecord(
        value=env.comparable(record, envelope),
        raw=record.value,
        offset=record.offset if envelope.metadata and record.offset >= 0 else None,
        key=record.key,
        headers=record.headers,
        timestamp=record.timestamp,
        has_envelope=True,
    )


def _read_json(data: bytes, envelope: Envelope | None) -> list[StoredRecord]:
    out = []
    for number, line in enumerate(_lines(data), start=1):
        try:
            value = json.loads(line)
        except ValueError:
            raise UnreadableObject(f"line {number} is not JSON") from None
        if envelope is None:  # not told: an envelope archive is recognised by its first line
            envelope = FULL_ENVELOPE if env.is_json_envelope(value) else Envelope()
        if envelope.enabled:
            try:
                out.append(from_envelope(env.from_json_document(value), envelope))
            except env.EnvelopeError as exc:
                raise UnreadableObject(f"line {number}: {exc}") from None
        else:
            out.append(StoredRecord(value, None if value is None else line, value))
    return out


def _read_text(data: bytes, envelope: Envelope | None) -> list[StoredRecord]:
    try:
        texts = [(line.decode("utf-8"), line) for line in _lines(data)]
    except UnicodeDecodeError:
        raise UnreadableObject("not UTF-8 text") from None
    return [StoredRecord(text, line, text) for text, line in texts]


def _read_bytes(data: bytes, envelope: Envelope | None) -> list[StoredRecord]:
    try:
        return [StoredRecord(value, value, value) for value in read_values(data)]
    except ValueError as exc:
        raise UnreadableObject(str(exc)) from None


def _structured(
    rows: list[dict[str, Any]], is_envelope: bool, envelope: Envelope | None
) -> list[StoredRecord]:
    if envelope is None or (is_envelope and not envelope.enabled):
        envelope = FULL_ENVELOPE if is_envelope else Envelope()
    if envelope.enabled:
        return [from_envelope(row_to_record(row), envelope) for row in rows]
    # Rows of an object written with a registry schema hold bytes, decimals and times; their
    # JSON form is what every other reader of those values sees (registry.jsonable).
    rows = [jsonable(row) for row in rows]
    return [
        StoredRecord(
            schema.normalized(row),
            json.dumps(row, separators=(",", ":")).encode(),
            row,
        )
        for row in rows
    ]


def _read_avro(data: bytes, envelope: Envelope | None) -> list[StoredRecord]:
    try:
        reader = fastavro.reader(io.BytesIO(data))
        rows = [row for row in reader if isinstance(row, dict)]
    except Exception as exc:  # fastavro raises many types for damaged files
        raise UnreadableObject(f"not a complete Avro file ({type(exc).__name__})") from None
    written = reader.writer_schema
    name = str(written.get("name", "")) if isinstance(written, dict) else ""
    return _structured(rows, name.endswith(ENVELOPE_NAME), envelope)


def _read_parquet(data: bytes, envelope: Envelope | None) -> list[StoredRecord]:
    # Heavy to import (pyarrow): loaded only when a PARQUET object is read.
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # One thread: Arrow's thread pools, once started, can abort the process as it exits
        # (apache/arrow#34314), and one object is small work.
        table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
    except (pa.ArrowException, OSError) as exc:
        raise UnreadableObject(f"not a complete Parquet file ({type(exc).__name__})") from None
    return read_parquet_table(table, envelope)


def read_parquet_table(table: Any, envelope: Envelope | None) -> list[StoredRecord]:
    """The records of a pyarrow table read from a Parquet object (or some of its row
    groups): what :func:`read_object` returns for them."""
    meta = table.schema.metadata or {}
    return _structured(table.to_pylist(), meta.get(b"kafka_archive.envelope") == b"true", envelope)


def _row_text(cells: list[str]) -> str:
    """A CSV row as the writer writes it, without its line break."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(cells)
    return out.getvalue()[:-2]


def _read_csv(headers: bool) -> Reader:
    def read(data: bytes, envelope: Envelope | None) -> list[StoredRecord]:
        try:
            rows = csv_.read_rows(data, headers)
        except (ValueError, csv.Error) as exc:
            raise UnreadableObject(f"not complete UTF-8 CSV ({exc})") from None
        return [StoredRecord(csv_.comparable(row), _row_text(row).encode(), row) for row in rows]

    return read


_READERS: Mapping[Format, Reader] = MappingProxyType(
    {
        Format.JSON: _read_json,
        Format.TEXT: _read_text,
        Format.BYTES: _read_bytes,
        Format.AVRO: _read_avro,
        Format.CSV: _read_csv(headers=False),
        Format.CSV_WITHHEADERS: _read_csv(headers=True),
        Format.PARQUET: _read_parquet,
    }
)


def read_object(fmt: Format, data: bytes, envelope: Envelope | None = None) -> list[StoredRecord]:
    """The records of one object, in the order they were written.

    ``envelope`` is the route's envelope setting; None when it is not known (``cat`` of an
    archive without its KCQL), and then an envelope is recognised by its shape.

    Raises:
        UnreadableObject: the bytes are not a complete object of ``fmt``.
        NotImplementedError: reading ``fmt`` back is not supported.
    """
    reader = _READERS.get(fmt)
    if reader is None:
        raise NotImplementedError(f"reading STOREAS {fmt.value} objects back is not supported yet")
    return reader(data, envelope)


def stored_form(
    fmt: Format,
    record: Record,
    envelope: Envelope | None = None,
    projector: Projector | None = None,
    registry: SchemaRegistry | None = None,
    value_schema: str | None = None,
) -> Any:
    """What ``read_object`` returns as the value of ``record`` archived in ``fmt`` (with
    the route's envelope setting, SELECT projector and ``avro.schema.file`` text).

    Raises ValueError (BadRecordError) for a record the format refuses."""
    if envelope is not None and envelope.enabled:
        return env.comparable(record, envelope)
    if value_schema is not None and fmt in (Format.AVRO, Format.PARQUET):
        return _with_schema(record, value_schema, projector, registry)
    if fmt in (Format.CSV, Format.CSV_WITHHEADERS):
        row = (
            projector.project(record, registry)
            if projector is not None
            else decode_value(record, registry)
        )
        return csv_.comparable([csv_.cell(v) for v in row.values()])
    if projector is not None:
        projected = projector.project(record, registry)
        return projected if fmt is Format.JSON else _inferred(fmt, projected)
    value = record.value
    if fmt in (Format.JSON, Format.AVRO, Format.PARQUET):  # TEXT and BYTES store the bytes
        framed, datum = decoded(registry, value)
        if framed:
            return (
                datum if fmt is Format.JSON else schema.normalized(decode_value(record, registry))
            )
    # Each format refuses what its writer refuses (the same checks), so a record left out
    # under error.policy skip/dead-letter is not expected in the archive.
    if fmt is Format.JSON:
        return json.loads(json_.pass_through_line(value))
    if fmt is Format.TEXT:
        return text.checked_line(value).decode("utf-8")[:-1]
    if fmt in (Format.AVRO, Format.PARQUET):
        return _inferred(fmt, decode_value(record, registry))
    return value


def _inferred(fmt: Format, value: Any) -> Any:
    """A value stored under a schema inferred from it, as read back; raises BadRecordError
    where the writer does: no schema fits it (mixed arrays, numbers out of range), or for
    AVRO a field name Avro does not allow."""
    inferred = schema.value_schema(value)
    if fmt is Format.AVRO:
        schema.to_avro(inferred)
    return schema.normalized(value)


_NAN = object()  # stands for every NaN in same_value: NaN equals no float, not even itself


def _nan_free(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return _NAN
    if isinstance(value, dict):
        return {k: _nan_free(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_free(v) for v in value]
    return value


def same_value(stored: Any, expected: Any) -> bool:
    """Whether an archived value is the one ``stored_form`` expects: equal, NaN included
    (a JSON value may hold NaN, which Python's float never finds equal to itself)."""
    return bool(stored == expected) or bool(_nan_free(stored) == _nan_free(expected))


def _with_schema(
    record: Record,
    value_schema: str,
    projector: Projector | None,
    registry: SchemaRegistry | None,
) -> Any:
    """A value written with a user schema (AVRO, PARQUET): refused unless it matches, and
    read back with the schema's defaults filled in."""
    value = (
        projector.project(record, registry)
        if projector is not None
        else decode_value(record, registry)
    )
    return schema.normalized(avsc.conformed(value, value_schema))

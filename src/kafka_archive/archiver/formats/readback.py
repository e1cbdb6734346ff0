"""Committed objects read back as the records they hold, streaming, for the maintenance
engine (:mod:`kafka_archive.archiver.write.rewrite`), which writes them again through the
format writers.

Unlike :mod:`kafka_archive.archiver.read.decoding` (what ``cat`` and ``verify`` compare), a
record comes back in the form its writer takes it: the envelope's key, value, headers, time
and offset as a :class:`Record`; without the envelope the value as the object stores it
(already projected by SELECT and decoded from the registry: JSON, TEXT and BYTES lines as
they are, AVRO and PARQUET rows and CSV cells as JSON objects), its offset the object's first
offset plus its position. One Parquet row group, Avro block or line at a time.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Iterator
from typing import Any, Protocol

from kafka_archive.archiver.core.errors import DamagedObjectError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import compression
from kafka_archive.archiver.formats import envelope as env
from kafka_archive.archiver.formats.bytes_ import read_values
from kafka_archive.archiver.formats.structured import ENVELOPE_NAME, row_to_record
from kafka_archive.archiver.kafka.schema_registry import jsonable
from kafka_archive.kcql.plan import Format, Route


class Replaced(Protocol):
    """A committed object to read (the planner's ``CommittedObject`` is one): its key, and
    the offsets and count of its records as the commit log names them."""

    @property
    def key(self) -> str: ...
    @property
    def first(self) -> int: ...
    @property
    def last(self) -> int: ...
    @property
    def records(self) -> int: ...


def records_of(route: Route, obj: Replaced, data: bytes) -> Iterator[Record]:
    """The records of one committed object (``data``: its bytes as stored), in order, each
    with its offset: stored (the envelope's metadata) or the object's first offset plus its
    position (only for an object whose records fill its offsets).

    Raises:
        DamagedObjectError: the bytes are not the format's, or hold another count of records
            than the commit names, or offsets must be derived in an object with gaps.
    """
    tp = TopicPartition(route.topic, -1)
    try:
        raw = compression.decompress(obj.key, data)
        count = 0
        for count, record in enumerate(_decoded(route, raw), start=1):
            if record.offset < 0:
                if obj.records != obj.last - obj.first + 1:
                    raise ValueError(
                        "its records do not fill its offsets and store none, so their offsets"
                        " are not known"
                    )
                record = dataclasses.replace(record, offset=obj.first + count - 1)
            yield record
    except (ValueError, csv.Error, OSError, EOFError) as exc:
        raise DamagedObjectError(
            f"s3://{route.target.bucket}/{obj.key} cannot be rewritten: {exc}",
            tp=tp,
            hint="Run kafka-archive verify on this archive to list damaged objects",
        ) from None
    if count != obj.records:
        raise DamagedObjectError(
            f"s3://{route.target.bucket}/{obj.key} holds {count} records, its commit {obj.records}",
            tp=tp,
            hint="Run kafka-archive verify on this archive to list damaged objects",
        )


def _bare(route: Route, value: bytes | None) -> Record:
    """A record that is only its value (its offset filled in from its position)."""
    return Record(route.topic, -1, -1, None, None, value)


def _decoded(route: Route, data: bytes) -> Iterator[Record]:
    fmt = route.format
    if fmt is Format.JSON:
        for line in io.BytesIO(data):
            if not line.endswith(b"\n"):
                raise ValueError("the last line has no line break (cut short)")
            if route.envelope.enabled:
                yield env.from_json_document(json.loads(line))
            else:
                yield _bare(route, line[:-1])
    elif fmt is Format.TEXT:
        for line in io.BytesIO(data):
            if not line.endswith(b"\n"):
                raise ValueError("the last line has no line break (cut short)")
            yield _bare(route, line[:-1])
    elif fmt is Format.BYTES:
        for value in read_values(data):
            yield _bare(route, value)
    elif fmt in (Format.CSV, Format.CSV_WITHHEADERS):
        yield from _csv_records(route, data)
    elif fmt is Format.AVRO:
        yield from _avro_records(route, data)
    elif fmt is Format.PARQUET:
        yield from _parquet_records(route, data)
    else:
        raise NotImplementedError(f"rewriting STOREAS {fmt.value} objects is not supported")


def _csv_records(route: Route, data: bytes) -> Iterator[Record]:
    """CSV rows as JSON objects of their cells: named by the header row
    (CSV_WITHHEADERS), else by position; the writer writes each cell back as it was."""
    text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline="")
    if data and not data.endswith(b"\n"):
        raise ValueError("the last row has no line break (cut short)")
    rows = csv.reader(text, strict=True)
    names: list[str] | None = None
    if route.format is Format.CSV_WITHHEADERS:
        names = next(rows, None)
    for cells in rows:
        header = names if names is not None else [f"c{i}" for i in range(len(cells))]
        if len(header) != len(cells):
            raise ValueError("a row has another number of cells than its header")
        value = json.dumps(dict(zip(header, cells, strict=True)), separators=(",", ":"))
        yield _bare(route, value.encode())


def _row_record(route: Route, row: dict[str, Any], enveloped: bool) -> Record:
    if enveloped:
        return row_to_record(row)
    return _bare(route, json.dumps(jsonable(row), separators=(",", ":")).encode())


def _avro_records(route: Route, data: bytes) -> Iterator[Record]:
    import fastavro  # heavy: only a rewrite of AVRO objects loads it

    reader = fastavro.reader(io.BytesIO(data))
    written = reader.writer_schema
    name = str(written.get("name", "")) if isinstance(written, dict) else ""
    enveloped = name.endswith(ENVELOPE_NAME)
    for row in reader:
        if isinstance(row, dict):
            yield _row_record(route, row, enveloped)


def _parquet_records(route: Route, data: bytes) -> Iterator[Record]:
    # Heavy (pyarrow, which starts a thread): only a rewrite of PARQUET objects loads it.
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        meta = parquet.schema_arrow.metadata or {}
        enveloped = meta.get(b"kafka_archive.envelope") == b"true"
        for index in range(parquet.metadata.num_row_groups):
            # One row group at a time; one thread (apache/arrow#34314, see read/decoding).
            rows = parquet.read_row_group(index, use_threads=False).to_pylist()
            for row in rows:
                yield _row_record(route, row, enveloped)
    except pa.ArrowException as exc:
        raise ValueError(f"not a complete Parquet file ({type(exc).__name__})") from None

"""STOREAS PARQUET: a Parquet file written with pyarrow, in bounded row groups.

Rows are buffered and written as a row group every ``parquet.row.group.records`` records
(default 10,000) or ~64 MB of buffered values, whichever comes first, so memory per open
object is bounded. Codec: ``PROPERTIES('parquet.codec'='…')``, one of snappy (default),
zstd, gzip, lz4, brotli, none. Schema as for AVRO (:mod:`.schema`: open, growing with the
records, until the first row group is written); with
``avro.schema.file`` every object has the columns of that schema, and a value that does not
match it is refused.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import avsc
from kafka_archive.archiver.formats import schema as schemas
from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.formats.stamp import METADATA_KEY
from kafka_archive.archiver.formats.structured import ValueSchema, envelope_row
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry
from kafka_archive.kcql.plan import RECORD_TIME_COLUMN, Envelope, Route

CODECS = ("snappy", "zstd", "gzip", "lz4", "brotli", "none")
ROW_GROUP_BYTES = 64 * 1024 * 1024
# RECORD_TIME_COLUMN's type: Iceberg's timestamptz (microseconds, UTC).
RECORD_TIME_TYPE = pa.timestamp("us", tz="UTC")


def envelope_arrow_schema(envelope: Envelope) -> pa.Schema:
    fields = []
    if envelope.key:
        fields.append(pa.field("key", pa.binary()))
    if envelope.value:
        fields.append(pa.field("value", pa.binary()))
    if envelope.headers:
        header = pa.struct([pa.field("name", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(header)))
    if envelope.metadata:
        meta = pa.struct(
            [
                pa.field("topic", pa.string()),
                pa.field("partition", pa.int32()),
                pa.field("offset", pa.int64()),
                pa.field("timestamp", pa.int64()),
            ]
        )
        fields.append(pa.field("metadata", meta))
    return pa.schema(fields, metadata={b"kafka_archive.envelope": b"true"})


class ParquetWriter:
    def __init__(
        self,
        sink: BinaryIO,
        route: Route,
        registry: SchemaRegistry | None = None,
        user_schema: str | None = None,
        table_schema: str | None = None,
        columns: str | None = None,
        stamp: str | None = None,
    ) -> None:
        """``table_schema``: an existing Iceberg table's columns (Avro JSON); ``columns``:
        those the route's committed objects have (:mod:`.plan.columns`); the types of the
        inferred fields values share with them (:class:`.structured.ValueSchema`);
        ``stamp``: the writer's, into the file's key-value metadata (:mod:`.stamp`)."""
        self._stamp = stamp
        self._user = user_schema
        self._registry = registry
        self._sink = sink
        self._start = sink.tell()
        self._codec = route.codecs.parquet
        self._group_records = route.codecs.parquet_row_group_records
        self._envelope = route.envelope if route.envelope.enabled else None
        self._values = ValueSchema(route, registry, table_schema, columns)
        self._schema: pa.Schema | None = None
        self._writer: pq.ParquetWriter | None = None
        self._rows: list[dict[str, Any]] = []
        self._buffered = 0
        self._record_time = route.iceberg is not None and route.iceberg.time is not None
        self._first: Record | None = None  # the object's first record (inferred schemas)

    def inherit(self, state: tuple[Any, int | None] | None) -> None:
        """Start from the previous object's schema (``schema.compatibility``)."""
        self._values.inherit(state)

    def successor(self) -> tuple[Any, int | None] | None:
        return self._values.successor()

    def accepts(self, record: Record) -> bool:
        if self._envelope is not None or self._user is not None:
            return True
        if self._record_time and self._has_record_time(record):
            return True  # write refuses it, and it must not grow the open schema
        return self._values.accepts(record)

    def _has_record_time(self, record: Record) -> bool:
        try:
            return RECORD_TIME_COLUMN in self._values.decode(record)
        except BadRecordError:
            return False

    def write(self, record: Record) -> None:
        if self._envelope is not None:
            if self._schema is None:
                self._schema = envelope_arrow_schema(self._envelope)
            self._rows.append(envelope_row(record, self._envelope))
        elif self._user is not None:
            row = avsc.conformed(self._values.decode(record), self._user)  # may raise
            if self._schema is None:
                columns = avsc.columns(self._user)
                assert columns is not None  # checked when the plan's schemas were loaded
                self._schema = schemas.to_arrow(columns)
            self._rows.append(row)
        else:
            if self._values.schema is None:
                self._values.first(self._values.decode(record), record)
                self._first = record
                # Fields null so far take their type from later rows of the first group.
                self._values.hold_open()
            # Projected onto the object's schema under 'schema.compatibility', if it was.
            self._rows.append(self._values.decode(record))
        if self._record_time:
            self._add_record_time(record)
        self._buffered += len(record.value or b"") + len(record.key or b"")
        if len(self._rows) >= self._group_records or self._buffered >= ROW_GROUP_BYTES:
            self._write_group()

    def _add_record_time(self, record: Record) -> None:
        """Add :data:`RECORD_TIME_COLUMN` to the row just buffered (the schema gets it when
        it is made, :meth:`_arrow_schema`)."""
        row = self._rows[-1]
        if RECORD_TIME_COLUMN in row:
            self._rows.pop()
            raise BadRecordError(
                f"the value has a field {RECORD_TIME_COLUMN!r}, the column that holds the "
                "record timestamp in a table partitioned by _date"
            )
        millis = record.timestamp
        self._rows[-1] = {**row, RECORD_TIME_COLUMN: None if millis is None else millis * 1000}

    def _arrow_schema(self) -> pa.Schema:
        """The object's schema, fixed when its first row group is written: the values'
        schema as the buffered rows typed it (fields null in all of them: strings)."""
        if self._schema is None:
            assert self._values.schema is not None
            self._schema = schemas.to_arrow(self._values.schema)
            self._values.freeze()
            schemas.log_untyped(self._values.schema, self._first)
        if self._record_time and self._schema.get_field_index(RECORD_TIME_COLUMN) < 0:
            self._schema = self._schema.append(pa.field(RECORD_TIME_COLUMN, RECORD_TIME_TYPE))
        return self._schema

    def _write_group(self) -> None:
        if not self._rows:
            return
        schema = self._arrow_schema()
        if self._writer is None:
            stamped = schema
            if self._stamp is not None:
                meta = {**(schema.metadata or {}), METADATA_KEY.encode(): self._stamp.encode()}
                stamped = schema.with_metadata(meta)
            self._writer = pq.ParquetWriter(
                self._sink,
                stamped,
                compression=self._codec.upper() if self._codec != "none" else "NONE",
            )
        table = pa.Table.from_pylist(self._rows, schema=schema)
        self._writer.write_table(table)
        self._rows.clear()
        self._buffered = 0

    def columns(self) -> schemas.Type | None:
        """The object's inferred columns (None: envelope or a declared schema)."""
        if self._envelope is not None or self._user is not None:
            return None
        return self._values.schema

    def bytes_written(self) -> int:
        # Buffered rows count by their raw size, so flush by size sees them before a group.
        return self._sink.tell() - self._start + self._buffered

    def close(self) -> None:
        self._write_group()
        if self._writer is not None:
            self._writer.close()
        self._sink.flush()

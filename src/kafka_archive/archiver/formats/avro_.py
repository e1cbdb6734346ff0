"""STOREAS AVRO: an Avro object container file, schema embedded, written with fastavro.

Codec: ``PROPERTIES('avro.codec'='…')``, one of null (default), deflate, snappy, zstandard,
bzip2, xz. The object's schema is, in this order: the fixed envelope schema with
``store.envelope``; for values in the Confluent wire format (with a Schema Registry and no
SELECT list), their writer schema from the registry, each datum stored as it was written (an
object holds one schema id; a value of another id starts a new object); else the schema
inferred from the object's first JSON value (see :mod:`.structured`).
"""

from __future__ import annotations

from typing import Any, BinaryIO

import fastavro
from fastavro.write import Writer

from kafka_archive.archiver.formats import avsc
from kafka_archive.archiver.formats import schema as schemas
from kafka_archive.archiver.formats.registry import SchemaRegistry, schema_id
from kafka_archive.archiver.formats.structured import (
    ValueSchema,
    envelope_avro_schema,
    envelope_row,
)
from kafka_archive.archiver.partition.fields import projector_for
from kafka_archive.archiver.records import Record
from kafka_archive.kcql.plan import Route

CODECS = ("null", "deflate", "snappy", "zstandard", "bzip2", "xz")


class AvroWriter:
    """``user_schema``: the text of the route's ``avro.schema.file``; every object is written
    with it, and a value that does not match it is refused (BadRecordError)."""

    def __init__(
        self,
        sink: BinaryIO,
        route: Route,
        registry: SchemaRegistry | None = None,
        user_schema: str | None = None,
    ) -> None:
        self._user = avsc.parsed(user_schema) if user_schema is not None else None
        self._registry = registry
        self._sink = sink
        self._start = sink.tell()
        self._codec = route.codecs.avro
        self._envelope = route.envelope if route.envelope.enabled else None
        self._values = ValueSchema(route, registry)
        self._writer: Writer | None = None
        # Registry values are stored with their writer schema unless a SELECT list reshapes them.
        self._as_written = registry is not None and projector_for(route) is None
        self._schema_id: int | None = None  # the writer schema id of this object's values

    def _open(self, avro_schema: Any) -> Writer:
        if not isinstance(avro_schema, dict) or "__fastavro_parsed" not in avro_schema:
            avro_schema = fastavro.parse_schema(avro_schema)
        writer = Writer(self._sink, avro_schema, codec=self._codec)
        self._writer = writer
        return writer

    def _id_of(self, record: Record) -> int | None:
        return schema_id(record.value) if self._as_written else None

    def accepts(self, record: Record) -> bool:
        if self._envelope is not None or self._writer is None or self._user is not None:
            return True
        ident = self._id_of(record)
        if ident is not None or self._schema_id is not None:
            return ident == self._schema_id
        return self._values.accepts(record)

    def write(self, record: Record) -> None:
        if self._envelope is not None:
            writer = self._writer or self._open(envelope_avro_schema(self._envelope))
            writer.write(envelope_row(record, self._envelope))
            return
        if self._user is not None:
            value = self._values.decode(record)  # a JSON object, or a registry value's JSON form
            avsc.check(value, self._user)
            (self._writer or self._open(self._user)).write(value)
            return
        if self._registry is not None and self._id_of(record) is not None:
            assert record.value is not None
            ident, written_schema, datum = self._registry.decode(record.value)  # may raise
            if self._writer is None:
                self._open(written_schema)
                self._schema_id = ident
            assert self._writer is not None
            self._writer.write(datum)
            return
        value = self._values.decode(record)
        if self._writer is None:
            avro_schema = schemas.to_avro(self._values.first(value))  # may raise: nothing written
            self._open(avro_schema)
        assert self._writer is not None
        self._writer.write(value)

    def bytes_written(self) -> int:
        return self._sink.tell() - self._start

    def close(self) -> None:
        if self._writer is not None:
            self._writer.flush()
        self._sink.flush()

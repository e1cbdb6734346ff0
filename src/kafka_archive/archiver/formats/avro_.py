"""STOREAS AVRO: an Avro object container file, schema embedded, written with fastavro.

Codec: ``PROPERTIES('avro.codec'='…')``, one of null (default), deflate, snappy, zstandard,
bzip2, xz. The object's schema is, in this order: the fixed envelope schema with
``store.envelope``; for values in the Confluent wire format (with a Schema Registry and no
SELECT list), their writer schema from the registry, each datum stored as it was written (an
object holds one schema id; a value of another id starts a new object); else the schema
inferred from the object's JSON values (see :mod:`.schema`): they are held, the schema
open, until :data:`HOLD_RECORDS` records or :data:`HOLD_BYTES` bytes, then the file begins
with the schema they typed.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import fastavro
from fastavro.write import Writer

from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import avsc, evolution
from kafka_archive.archiver.formats import schema as schemas
from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.formats.stamp import METADATA_KEY
from kafka_archive.archiver.formats.structured import (
    ValueSchema,
    envelope_avro_schema,
    envelope_row,
)
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry, schema_id
from kafka_archive.archiver.partition.fields import projector_for
from kafka_archive.kcql.plan import Route, SchemaCompatibility

CODECS = ("null", "deflate", "snappy", "zstandard", "bzip2", "xz")
# Values of an inferred schema are held (the schema open: fields null so far take a type,
# new fields join, see .schema) until this many records or bytes, then the file is begun.
HOLD_RECORDS = 1000
HOLD_BYTES = 1024 * 1024


class AvroWriter:
    """``user_schema``: the text of the route's ``avro.schema.file``; every object is written
    with it, and a value that does not match it is refused (BadRecordError)."""

    def __init__(
        self,
        sink: BinaryIO,
        route: Route,
        registry: SchemaRegistry | None = None,
        user_schema: str | None = None,
        columns: str | None = None,
        stamp: str | None = None,
    ) -> None:
        """``columns``: those the route's committed objects have (:mod:`.plan.columns`), the
        types of the inferred fields values share with them; ``stamp``: the writer's, into
        the file metadata (:mod:`.stamp`)."""
        self._metadata = {METADATA_KEY: stamp} if stamp is not None else None
        self._user = avsc.parsed(user_schema) if user_schema is not None else None
        self._registry = registry
        self._sink = sink
        self._start = sink.tell()
        self._codec = route.codecs.avro
        self._envelope = route.envelope if route.envelope.enabled else None
        self._values = ValueSchema(route, registry, columns=columns)
        self._writer: Writer | None = None
        # Registry values are stored with their writer schema unless a SELECT list reshapes them.
        self._as_written = registry is not None and projector_for(route) is None
        self._schema_id: int | None = None  # the writer schema id of this object's values
        self._mode = route.schema_compatibility
        self._inherited_id: int | None = None  # schema.compatibility: the previous object's
        self._projected: tuple[Record, Any] | None = None  # a datum resolved onto the object's
        self._held: list[dict[str, Any]] = []  # values of the open inferred schema
        self._first: Record | None = None  # the first of them
        self._held_bytes = 0

    def _open(self, avro_schema: Any) -> Writer:
        if not isinstance(avro_schema, dict) or "__fastavro_parsed" not in avro_schema:
            avro_schema = fastavro.parse_schema(avro_schema)
        writer = Writer(self._sink, avro_schema, codec=self._codec, metadata=self._metadata)
        self._writer = writer
        return writer

    def _id_of(self, record: Record) -> int | None:
        return schema_id(record.value) if self._as_written else None

    def inherit(self, state: tuple[Any, int | None] | None) -> None:
        """Start from the previous object's schema (``schema.compatibility``, see
        :mod:`.evolution`)."""
        if state is not None and state[0] is None:
            self._inherited_id = state[1]
        else:
            self._values.inherit(state)

    def successor(self) -> tuple[Any, int | None] | None:
        if self._schema_id is not None:
            return None if self._mode is SchemaCompatibility.NONE else (None, self._schema_id)
        return self._values.successor()

    def accepts(self, record: Record) -> bool:
        if self._envelope is not None or self._user is not None:
            return True
        if self._writer is None and not self._held:
            return True
        ident = self._id_of(record)
        if ident is not None or self._schema_id is not None:
            return ident == self._schema_id or self._resolves(record, ident, self._schema_id)
        if self._held and not self._avro_names(record):
            return True  # write refuses it, and it must not grow the open schema
        return self._values.accepts(record)

    def _avro_names(self, record: Record) -> bool:
        """Whether the record's value can be stored in Avro at all (its field names)."""
        try:
            schemas.to_avro(schemas.infer(self._values.decode(record)))
        except BadRecordError:
            return False
        return True

    def _resolves(self, record: Record, ident: int | None, current: int | None) -> bool:
        """Whether a registry value of another schema id joins an object of ``current`` by
        ``schema.compatibility`` (projected: the datum read with the object's schema)."""
        if ident is None or current is None or self._registry is None:
            return False
        if evolution.by_version(self._mode, current, ident) is evolution.Action.ROLL:
            return False
        assert record.value is not None
        datum = self._registry.resolve(record.value, current)
        if datum is None:
            return False
        self._projected = (record, datum)
        return True

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
            if self._writer is None and self._inherited_id is not None:
                inherited, self._inherited_id = self._inherited_id, None
                if self._id_of(record) != inherited and self._resolves(
                    record, self._id_of(record), inherited
                ):
                    self._open(self._registry.schema(inherited)[0])
                    self._schema_id = inherited
            if self._projected is not None and self._projected[0] is record:
                assert self._writer is not None
                self._writer.write(self._projected[1])
                self._projected = None
                return
            ident, written_schema, datum = self._registry.decode(record.value)  # may raise
            if self._writer is None:
                self._open(written_schema)
                self._schema_id = ident
            assert self._writer is not None
            self._writer.write(datum)
            return
        value = self._values.decode(record)
        if self._writer is None:
            schemas.to_avro(schemas.infer(value))  # may raise: nothing held
            if self._values.schema is None:
                self._values.first(value, record)  # may raise: nothing held
                self._first = record
                self._values.hold_open()
            value = self._values.decode(record)  # projected onto the object's schema, if it was
            self._held.append(value)
            self._held_bytes += len(record.value or b"")
            if len(self._held) >= HOLD_RECORDS or self._held_bytes >= HOLD_BYTES:
                self._begin()
            return
        value = self._values.decode(record)  # projected onto the object's schema, if it was
        self._writer.write(value)

    def _begin(self) -> None:
        """Fix the open schema (fields null in every held value: strings) and write what
        was held under it."""
        assert self._values.schema is not None
        writer = self._open(schemas.to_avro(self._values.schema))
        self._values.freeze()
        schemas.log_untyped(self._values.schema, self._first)
        for value in self._held:
            writer.write(value)
        self._held.clear()
        self._held_bytes = 0

    def columns(self) -> schemas.Type | None:
        """The object's inferred columns (None: envelope, a declared or a registry schema)."""
        if self._envelope is not None or self._user is not None or self._schema_id is not None:
            return None
        return self._values.schema

    def bytes_written(self) -> int:
        return self._sink.tell() - self._start + self._held_bytes

    def close(self) -> None:
        if self._held:
            self._begin()
        if self._writer is not None:
            self._writer.flush()
        self._sink.flush()

"""What the AVRO and PARQUET writers share: decoding a value, the schema of the open
object, and the envelope as columns.

Without the envelope a value must be a JSON object; its object's schema is inferred from
the first value and grows with the next ones while the writer holds it open
(:mod:`.schema`'s type rules), and :meth:`ValueSchema.accepts` tells the chunking runtime
to roll the object before a value that does not fit. With the envelope, key, value
and header values are stored as bytes under one fixed schema, so any record fits.
"""

from __future__ import annotations

import json
from typing import Any

from kafka_archive.archiver.core import jsontext
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import evolution, schema
from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.kafka.schema_registry import (
    SchemaRegistry,
    decoded,
    jsonable,
    schema_id,
)
from kafka_archive.archiver.partition.fields import projector_for
from kafka_archive.kcql.plan import Envelope, Route, SchemaCompatibility

ENVELOPE_NAME = "KafkaArchiveEnvelope"


def decode_value(record: Record, registry: SchemaRegistry | None = None) -> dict[str, Any]:
    """The record's value as a JSON object (a Confluent-framed Avro value decoded with the
    registry's schema, in its JSON form).

    Raises:
        BadRecordError: a tombstone, a value that is not JSON, or not a JSON object.
    """
    if record.value is None:
        raise BadRecordError(
            "a tombstone (null value) has no fields to store; use "
            "PROPERTIES('store.envelope'=true) to archive tombstones"
        )
    framed, value = decoded(registry, record.value)
    if not framed:
        try:
            value = jsontext.loads(record.value)
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRecordError(f"value is not JSON ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise BadRecordError(
            "a value must be a JSON object to be stored in a structured format "
            "(or use PROPERTIES('store.envelope'=true) to keep any value as bytes)"
        )
    return value


class ValueSchema:
    """The schema of one open object, begun by its first value (projected by the SELECT
    list, if the route has one) and refined by later ones until :meth:`freeze` — or, under
    ``schema.compatibility``, by the schema the previous object of the unit handed on
    (:meth:`inherit`, :mod:`.evolution`)."""

    def __init__(
        self,
        route: Route,
        registry: SchemaRegistry | None = None,
        seed: str | None = None,
        columns: str | None = None,
    ) -> None:
        self.schema: schema.Type | None = None
        # An existing Iceberg table's columns (Avro JSON, WorkUnit.table_schema), or the
        # columns the route's committed objects have (schema.to_json, WorkUnit.columns): the
        # types of the fields values share with them, where they fit (schema.seeded).
        self._seed: schema.Type | None = None
        if seed is not None:
            self._seed = schema.from_avro(json.loads(seed))
        elif columns is not None:
            self._seed = schema.stored(schema.from_json(json.loads(columns)))
        self.schema_id: int | None = None  # the registry id the schema was taken from
        self._registry = registry
        self._last: tuple[Record, dict[str, Any]] | None = None
        self._projector = projector_for(route)
        self._mode = route.schema_compatibility
        self._inherited: tuple[schema.Type, int | None] | None = None
        self._successor: schema.Type | None = None  # the newer, merged schema (BACKWARD)
        # Whether fields null so far may still take a type (schema.refined): until the
        # writer has written something under the schema (PARQUET: its first row group).
        self._open = False

    def hold_open(self) -> None:
        """Let later values type the fields the schema has no type for yet (null so far),
        until :meth:`freeze`: for a writer that buffers its first rows."""
        self._open = True

    def freeze(self) -> None:
        """The schema is written: from now on a value fits it or rolls the object."""
        self._open = False

    def inherit(self, state: tuple[schema.Type, int | None] | None) -> None:
        """Start from the schema the unit's previous object of this group had (or the newer
        one it rolled for): the first value takes it when it fits or projects onto it."""
        self._inherited = state

    def successor(self) -> tuple[schema.Type, int | None] | None:
        """What the next object starts from (None under NONE: each object starts afresh)."""
        if self._mode is SchemaCompatibility.NONE or self.schema is None:
            return None
        if self._successor is not None:
            return self._successor, None
        return self.schema, self.schema_id

    def decode(self, record: Record) -> dict[str, Any]:
        """The record's value, decoded once for ``accepts`` and ``write`` together."""
        if self._last is not None and self._last[0] is record:
            return self._last[1]
        if self._projector is not None:
            value = self._projector.project(record, self._registry)
        else:
            value = decode_value(record, self._registry)
        self._last = (record, value)
        return value

    def accepts(self, record: Record) -> bool:
        """Whether ``record`` may go into this object (True before the first record, and for
        a record that cannot be stored at all: ``write`` then raises BadRecordError). Under
        ``schema.compatibility`` a record it accepts may be projected: ``decode`` then gives
        the projected value."""
        if self.schema is None:
            return True
        if self._open and self.schema_id is None:
            try:
                value = self.decode(record)
            except BadRecordError:
                return True
            typed = schema.refined(self.schema, value)
            if typed is not None and self._seed is not None:
                typed = schema.seeded(typed, self._seed, value, self.schema)
            if typed is not None:
                self.schema = typed
                return True
        return self._joins(record, self.schema, self.schema_id)

    def _joins(self, record: Record, current: schema.Type, current_id: int | None) -> bool:
        if current_id is not None:
            ident = schema_id(record.value)
            if ident == current_id:
                return True
            if ident is None or self._registry is None:
                return False
            if evolution.by_version(self._mode, current_id, ident) is evolution.Action.ROLL:
                return False
            assert record.value is not None
            datum = self._registry.resolve(record.value, current_id)
            if datum is None:
                return False  # does not resolve: incompatible
            value = jsonable(datum)
            if not schema.fits(value, current):
                return False
            self._last = (record, value)
            return True
        try:
            value = self.decode(record)
        except BadRecordError:
            return True
        if schema.fits(value, current):
            return True
        action, newer = evolution.inferred(self._mode, current, value)
        if action is evolution.Action.PROJECT:
            self._last = (record, evolution.projected(value, current))
            return True
        self._successor = newer
        return False

    def first(self, value: dict[str, Any], record: Record | None = None) -> schema.Type:
        """Fix the schema from the object's first value: the inherited schema when the value
        joins it (see :meth:`inherit`); from the registry writer schema of a framed
        ``record`` (no SELECT list) when it has a fixed JSON shape, so that a field null in
        the first value keeps its type; else inferred from ``value``."""
        if self._inherited is not None and record is not None:
            current, current_id = self._inherited
            self._inherited = None
            if self._joins(record, current, current_id):
                self.schema, self.schema_id = current, current_id
                return current
            if self._successor is not None and schema.fits(value, self._successor):
                self.schema, self._successor = self._successor, None
                return self.schema
            self._successor = None
            value = self.decode(record)  # not projected: the record starts its own schema
        ident = schema_id(record.value) if record is not None else None
        if ident is not None and self._registry is not None and self._projector is None:
            from_registry = schema.from_avro(self._registry.schema(ident)[0])
            if from_registry is not None and schema.fits(value, from_registry):
                self.schema, self.schema_id = from_registry, ident
                return from_registry
        self.schema = schema.value_schema(value)
        if self._seed is not None:
            self.schema = schema.seeded(self.schema, self._seed, value)
        return self.schema


def envelope_row(record: Record, envelope: Envelope) -> dict[str, Any]:
    """The envelope of ``record`` as a row of :func:`envelope_avro_schema` / Arrow schema."""
    row: dict[str, Any] = {}
    if envelope.key:
        row["key"] = record.key
    if envelope.value:
        row["value"] = record.value
    if envelope.headers:
        row["headers"] = [{"name": n, "value": v} for n, v in record.headers]
    if envelope.metadata:
        row["metadata"] = {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
        }
    return row


def row_to_record(row: dict[str, Any]) -> Record:
    """The record an envelope row holds (parts it does not keep come back empty)."""
    meta = row.get("metadata") or {}
    return Record(
        topic=meta.get("topic") or "",
        partition=-1 if meta.get("partition") is None else int(meta["partition"]),
        offset=int(meta["offset"]) if meta.get("offset") is not None else -1,
        timestamp=meta.get("timestamp"),
        key=_bytes(row.get("key")),
        value=_bytes(row.get("value")),
        headers=tuple((h["name"], _bytes(h["value"])) for h in row.get("headers") or ()),
    )


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def envelope_avro_schema(envelope: Envelope) -> dict[str, Any]:
    fields: list[dict[str, Any]] = []
    if envelope.key:
        fields.append({"name": "key", "type": ["null", "bytes"], "default": None})
    if envelope.value:
        fields.append({"name": "value", "type": ["null", "bytes"], "default": None})
    if envelope.headers:
        header = {
            "type": "record",
            "name": "Header",
            "fields": [
                {"name": "name", "type": "string"},
                {"name": "value", "type": ["null", "bytes"], "default": None},
            ],
        }
        fields.append({"name": "headers", "type": {"type": "array", "items": header}})
    if envelope.metadata:
        metadata = {
            "type": "record",
            "name": "Metadata",
            "fields": [
                {"name": "topic", "type": "string"},
                {"name": "partition", "type": "int"},
                {"name": "offset", "type": "long"},
                {"name": "timestamp", "type": ["null", "long"], "default": None},
            ],
        }
        fields.append({"name": "metadata", "type": metadata})
    return {"type": "record", "name": ENVELOPE_NAME, "namespace": "kafka_archive", "fields": fields}

"""STOREAS AVRO: an Avro object container file, schema embedded, written with fastavro.

Codec: ``PROPERTIES('avro.codec'='…')``, one of null (default), deflate, snappy, zstandard,
bzip2, xz. The schema is inferred from the object's first JSON value (see
:mod:`.structured`), or the fixed envelope schema with ``store.envelope``.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import fastavro
from fastavro.write import Writer

from kafka_archive.archiver.formats import schema as schemas
from kafka_archive.archiver.formats.registry import SchemaRegistry
from kafka_archive.archiver.formats.structured import (
    ValueSchema,
    envelope_avro_schema,
    envelope_row,
)
from kafka_archive.archiver.records import Record
from kafka_archive.kcql.plan import Route

CODECS = ("null", "deflate", "snappy", "zstandard", "bzip2", "xz")
DEFAULT_CODEC = "null"


class AvroWriter:
    def __init__(
        self, sink: BinaryIO, route: Route, registry: SchemaRegistry | None = None
    ) -> None:
        self._registry = registry
        self._sink = sink
        self._start = sink.tell()
        self._codec = route.property("avro.codec") or DEFAULT_CODEC
        self._envelope = route.envelope if route.envelope.enabled else None
        self._values = ValueSchema(route, registry)
        self._writer: Writer | None = None

    def _open(self, avro_schema: dict[str, Any]) -> Writer:
        writer = Writer(self._sink, fastavro.parse_schema(avro_schema), codec=self._codec)
        self._writer = writer
        return writer

    def accepts(self, record: Record) -> bool:
        return self._envelope is not None or self._values.accepts(record)

    def write(self, record: Record) -> None:
        if self._envelope is not None:
            writer = self._writer or self._open(envelope_avro_schema(self._envelope))
            writer.write(envelope_row(record, self._envelope))
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

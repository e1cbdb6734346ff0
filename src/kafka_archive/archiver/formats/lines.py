"""The skeleton the line formats share (TEXT, BYTES, JSON, CSV): an object is its records'
encodings back to back, with no footer; each format only says how one record is encoded."""

from __future__ import annotations

from typing import BinaryIO

from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry
from kafka_archive.kcql.plan import Route


class LineWriter:
    """A :class:`~.base.FormatWriter` whose object is :meth:`encode` of each record, appended
    to the sink as it comes; subclasses define :meth:`encode` (raising
    :class:`~.base.BadRecordError` before anything of the record is written)."""

    def __init__(
        self, sink: BinaryIO, route: Route, registry: SchemaRegistry | None = None
    ) -> None:
        self._registry = registry
        self._sink = sink
        self._written = 0

    def encode(self, record: Record) -> bytes:
        """The bytes of one record in the object."""
        raise NotImplementedError

    def accepts(self, record: Record) -> bool:
        return True

    def write(self, record: Record) -> None:
        data = self.encode(record)
        self._sink.write(data)
        self._written += len(data)

    def write_encoded(self, data: bytes | memoryview) -> None:
        """Write records encoded ahead by the format's ``encode_values`` (the batch path of
        the formats that have one: :func:`.writers.batch_encoder_for`)."""
        self._sink.write(data)
        self._written += len(data)

    def bytes_written(self) -> int:
        return self._written

    def close(self) -> None:
        self._sink.flush()

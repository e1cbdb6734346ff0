"""The seam between the chunking runtime and the encoders of each STOREAS format."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, BinaryIO, Protocol

from kafka_archive.archiver.records import Record
from kafka_archive.kcql.plan import Format, Route

if TYPE_CHECKING:
    from kafka_archive.archiver.formats.registry import SchemaRegistry


class BadRecordError(ValueError):
    """A record cannot be stored in the chosen format. The message never holds payload."""


class FormatWriter(Protocol):
    """Encodes records into one object's bytes, streaming into ``sink``.

    A writer is created for one object, receives records in offset order, and is closed
    once. ``write`` raises :class:`BadRecordError` without having written anything of that
    record. ``bytes_written`` counts what has reached ``sink`` so far (flush by size uses
    it). ``close`` writes any footer and flushes, but does not close ``sink``.
    """

    def accepts(self, record: Record) -> bool:
        """Whether ``record`` may join this object; False rolls the object first (a value
        whose schema differs). Formats without a schema accept every record."""
        ...

    def write(self, record: Record) -> None: ...

    def bytes_written(self) -> int: ...

    def close(self) -> None: ...


class BatchWriter(FormatWriter, Protocol):
    """A writer that also takes a batch encoded ahead by its format's ``encode_values``."""

    def write_encoded(self, data: bytes) -> None: ...


BatchEncoder = Callable[[Sequence[bytes | None]], list[bytes]]


class WriterFactory(Protocol):
    """``registry`` decodes values in the Confluent Avro wire format (None: no registry)."""

    def __call__(
        self, sink: BinaryIO, route: Route, registry: SchemaRegistry | None = None
    ) -> FormatWriter: ...


def _registry() -> Mapping[Format, WriterFactory]:
    from kafka_archive.archiver.formats import avro_, bytes_, csv_, json_, parquet_, text

    return MappingProxyType(
        {
            Format.AVRO: avro_.AvroWriter,
            Format.CSV: csv_.CsvWriter,
            Format.CSV_WITHHEADERS: csv_.CsvWriter,
            Format.PARQUET: parquet_.ParquetWriter,
            Format.JSON: json_.JsonWriter,
            Format.TEXT: text.TextWriter,
            Format.BYTES: bytes_.BytesWriter,
        }
    )


def writer_for(fmt: Format) -> WriterFactory:
    """The writer class for a format; raises NotImplementedError for one not built yet."""
    writers = _registry()
    if fmt not in writers:
        raise NotImplementedError(f"STOREAS {fmt.value} is not supported yet")
    return writers[fmt]


def batch_encoder_for(route: Route) -> BatchEncoder | None:
    """The batch encoder of a route whose objects hold each value as it is, else None.

    A batch encoder turns a list of values into one encoded piece per value, or raises
    :class:`BadRecordError` with nothing written; the runtime then cuts the pieces into
    objects by the flush policy without a Python step per record. Only pass-through routes
    qualify: JSON, TEXT and BYTES without a SELECT list or the envelope.
    """
    from kafka_archive.archiver.formats import bytes_, json_, text

    if route.envelope.enabled or route.fields is not None:
        return None
    encoders: dict[Format, BatchEncoder] = {
        Format.JSON: json_.encode_values,
        Format.TEXT: text.encode_values,
        Format.BYTES: bytes_.encode_values,
    }
    return encoders.get(route.format)

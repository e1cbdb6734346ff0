"""The writer of each STOREAS format, and the batch encoders of pass-through routes.

The format modules are imported on first use, not at import time: the Spark worker daemon
imports the task code before it forks (:mod:`..spark_daemon`), and pyarrow starts a thread
when it is imported (a thread alive at fork time leaves its locks held in every worker).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import cast

from kafka_archive.archiver.formats.base import BatchEncoder, WriterFactory
from kafka_archive.kcql.plan import Format, Route

# Format -> (module of this package, writer class). A worker imports the one module its
# route writes, not all of them (pyarrow and fastavro cost ~0.03 CPU-s per worker).
_WRITERS: Mapping[Format, tuple[str, str]] = MappingProxyType(
    {
        Format.AVRO: ("avro_", "AvroWriter"),
        Format.CSV: ("csv_", "CsvWriter"),
        Format.CSV_WITHHEADERS: ("csv_", "CsvWriter"),
        Format.PARQUET: ("parquet_", "ParquetWriter"),
        Format.JSON: ("json_", "JsonWriter"),
        Format.TEXT: ("text", "TextWriter"),
        Format.BYTES: ("bytes_", "BytesWriter"),
    }
)


def writer_for(fmt: Format) -> WriterFactory:
    """The writer class for a format; raises NotImplementedError for one not built yet."""
    entry = _WRITERS.get(fmt)
    if entry is None:
        raise NotImplementedError(f"STOREAS {fmt.value} is not supported yet")
    module, name = entry
    return cast(WriterFactory, getattr(importlib.import_module(f"{__package__}.{module}"), name))


def batch_encoder_for(route: Route) -> BatchEncoder | None:
    """The batch encoder of a route whose objects hold each value as it is, else None.

    A batch encoder turns a list of values into one encoded piece per value, or raises
    :class:`BadRecordError` with nothing written; the runtime then cuts the pieces into
    objects by the flush policy without a Python step per record. Only pass-through routes
    qualify: JSON, TEXT and BYTES without a SELECT list or the envelope.
    """
    # Imported on first use, as the writers are (the module's doc): simdjson stays out of
    # the Spark worker daemon's imports.
    from kafka_archive.archiver.formats import bytes_, json_, text

    if route.envelope.enabled or route.fields is not None:
        return None
    encoders: dict[Format, BatchEncoder] = {
        Format.JSON: json_.encode_values,
        Format.TEXT: text.encode_values,
        Format.BYTES: bytes_.encode_values,
    }
    return encoders.get(route.format)

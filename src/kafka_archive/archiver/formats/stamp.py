"""Where an object's bytes can carry its writer's stamp (commit_protocol=log, issue 37).

A stamp (the writer's run, epoch and attempt: :class:`.protocol.tasks.Stamp`) goes where
readers ignore it, so two attempts' objects hold the same records in other bytes, hence
other ETags: Parquet's key-value file metadata and Avro's file metadata, under
:data:`METADATA_KEY`; the FNAME field of a gzip member's header (Python, gzip -d, Spark,
DuckDB and Athena decompress without reading it). Nothing of the kind in the other
formats' bytes (TEXT, BYTES, CSV, JSON: a byte more is a record or a field more) nor in
bzip2's or zstd's (zstd's skippable frames are not used: not every reader skips them):
those objects are written at a key of the attempt's own instead.
"""

from __future__ import annotations

from kafka_archive.kcql.plan import Format, Route

METADATA_KEY = "kafka-archive.writer"


def has_place(route: Route) -> bool:
    """Whether ``route``'s objects carry a stamp in their bytes."""
    if route.format in (Format.PARQUET, Format.AVRO):
        return True
    gzip_blocks = route.codecs.gzip_block_bytes  # (log mode: at the attempt's own key)
    return route.codecs.compression.value == "gzip" and not gzip_blocks

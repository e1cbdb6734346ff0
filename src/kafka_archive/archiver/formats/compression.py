"""Whole-object compression for the line formats (JSON, CSV, TEXT, BYTES):
``PROPERTIES('store.compression'='gzip')``, one of none (default), gzip, bzip2, zstd.

The object key ends with the format's extension plus ``.gz``, ``.bz2`` or ``.zst``
(``000000000042.json.gz``), which is how readers (``cat``, ``verify``, Athena, Spark, DuckDB)
know to decompress. gzip members carry a zero mtime and no file name, so a retried unit
writes the same bytes; in commit_protocol=log the FNAME field carries the writer's stamp
(:mod:`.stamp`), so each attempt's bytes are its own. ``flush.size`` counts uncompressed bytes.
"""

from __future__ import annotations

import bz2
import gzip
from typing import BinaryIO, cast

from kafka_archive.kcql.plan import Route

CODECS = ("none", "gzip", "bzip2", "zstd")
SUFFIXES = {"gzip": ".gz", "bzip2": ".bz2", "zstd": ".zst"}


def codec_of(route: Route) -> str:
    return route.codecs.compression.value


def extension(route: Route) -> str:
    """The object key's extension: the format's, plus the compression's suffix."""
    return route.format.extension + SUFFIXES.get(codec_of(route), "")


def compressing(sink: BinaryIO, codec: str, stamp: str | None = None) -> BinaryIO | None:
    """A writer that compresses into ``sink`` (closing it leaves ``sink`` open); None for
    ``none``. ``stamp``: the gzip header's FNAME (the other codecs have no place for it)."""
    if codec == "gzip":
        name = stamp.replace("/", "_") if stamp else ""  # (the header keeps a base name)
        return cast(BinaryIO, gzip.GzipFile(filename=name, mode="wb", fileobj=sink, mtime=0))
    if codec == "bzip2":
        return cast(BinaryIO, bz2.BZ2File(sink, mode="wb"))
    if codec == "zstd":
        from backports import zstd  # ~0.01 s: imported by zstd routes alone

        return cast(BinaryIO, zstd.ZstdFile(sink, mode="w"))
    return None


def decompress(key: str, data: bytes) -> bytes:
    """The bytes of an object as its format wrote them, by the key's compression suffix.

    Raises:
        ValueError: the data is not complete in the compression the key names.
    """
    try:
        if key.endswith(".gz"):
            return gzip.decompress(data)
        if key.endswith(".bz2"):
            return bz2.decompress(data)
        if key.endswith(".zst"):
            from backports import zstd  # ~0.01 s: imported for .zst objects alone

            return zstd.decompress(data)
    except (OSError, EOFError, ValueError) as exc:
        raise ValueError(f"not complete {key.rsplit('.', 1)[-1]} data ({exc})") from None
    except Exception as exc:  # zstd raises its own ZstdError
        raise ValueError(f"not complete {key.rsplit('.', 1)[-1]} data ({exc})") from None
    return data

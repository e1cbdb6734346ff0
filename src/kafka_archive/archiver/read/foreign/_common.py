"""Helpers the sink modules share: compression suffixes, lines, and the loose comparison of
values that went through a Kafka Connect converter (whose exact bytes the sink did not keep)."""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import io
import json
import zlib
from typing import Any

from kafka_archive.archiver.read.foreign.model import ForeignFormatError

COMPRESSION_SUFFIXES = (".gz", ".zst", ".snappy")


def split_compression(name: str) -> tuple[str, str]:
    """``name`` without its compression suffix, and the suffix ('' for none)."""
    for suffix in COMPRESSION_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)], suffix
    return name, ""


def decompressed(key: str, data: bytes) -> bytes:
    """The bytes of an object whose key ends in a compression suffix, uncompressed.

    Raises:
        ForeignFormatError: damaged, or a codec not read here (xerial's snappy streams).
    """
    _, suffix = split_compression(key)
    try:
        if suffix == ".gz":
            return gzip.decompress(data)
        if suffix == ".zst":
            from backports import zstd  # ~0.01 s: imported for .zst objects alone

            return bytes(zstd.decompress(data))
    except (OSError, EOFError, zlib.error, ValueError) as exc:
        raise ForeignFormatError(f"not complete {suffix[1:]} data ({exc})") from None
    if suffix == ".snappy":
        raise ForeignFormatError(
            "snappy-compressed objects (xerial's stream format) are not read by kafka-archive"
        )
    return data


def lines(data: bytes) -> list[bytes]:
    """The lines of a newline-separated object (a last line break is optional here: the
    sinks write one after every record, a cut-short object ends without it and its last
    line then fails to parse)."""
    if not data:
        return []
    parts = data.split(b"\n")
    return parts[:-1] if parts[-1] == b"" else parts


def json_lines(data: bytes) -> list[tuple[bytes, Any]]:
    out = []
    for number, line in enumerate(lines(data), start=1):
        try:
            out.append((line, json.loads(line)))
        except ValueError:
            raise ForeignFormatError(f"line {number} is not JSON") from None
    return out


def jsonable(value: Any) -> Any:
    """A decoded Avro/Parquet value in its JSON form (bytes as base64, times as ISO text)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def compact(value: Any) -> bytes:
    """``value`` as compact JSON bytes (how a restored JSON value is produced)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def kafka_json(value: bytes | None) -> Any:
    """A Kafka value as a JSON-reading sink sees it: its JSON (the payload of a
    ``{"schema", "payload"}`` envelope of Connect's JsonConverter), else its UTF-8 text,
    else its bytes as base64 (how Connect's JsonConverter writes bytes)."""
    if value is None:
        return None
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(value).decode("ascii")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if isinstance(parsed, dict) and set(parsed) == {"schema", "payload"}:
        return parsed["payload"]
    return parsed


def loose(data: bytes | None) -> Any:
    """Bytes compared across a converter: their JSON where they are JSON, else their text,
    else themselves."""
    return kafka_json(data)


def value_bytes(value: Any) -> bytes | None:
    """The bytes a JSON-stored value is restored as: text as its UTF-8 (a string
    converter's value), anything else as compact JSON; None stays a tombstone."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return compact(value)


def iso_millis(text: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 instant (``2024-05-06T07:08:09.123Z``)."""
    parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return round(parsed.timestamp() * 1000)


def avro_rows(data: bytes) -> list[Any]:
    import fastavro  # ~0.05 s: imported when an Avro object is read

    try:
        return list(fastavro.reader(io.BytesIO(data)))
    except Exception as exc:  # fastavro raises many types for damaged files
        raise ForeignFormatError(f"not a complete Avro file ({type(exc).__name__})") from None


def parquet_rows(data: bytes) -> list[dict[str, Any]]:
    # Heavy to import (pyarrow, ~0.5 s): loaded only when a Parquet object is read.
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
    except (pa.ArrowException, OSError) as exc:
        raise ForeignFormatError(f"not a complete Parquet file ({type(exc).__name__})") from None
    return list(table.to_pylist())

"""Aiven's S3 sink (Aiven-Open/cloud-storage-connectors-for-apache-kafka, ``commons`` and
``s3-sink-connector``).

Names: ``<aws.s3.prefix><file.name.template>``; the template defaults to
``{{topic}}-{{partition}}-{{start_offset}}`` (``FileNameFragment.DEFAULT_FILENAME_TEMPLATE``)
followed by ``.avro`` for Avro and the compression's extension (``FileNameFragment.getFilename``;
``CompressionType``: ``.gz``, ``.snappy``, ``.zst``). ``{{start_offset:padding=true}}`` pads
to 20 digits and ``{{partition:padding=true}}`` to 10 (``TopicPartitionRecordGrouper``,
``%020d``/``%010d``); ``{{timestamp:unit=…}}`` and ``{{key}}`` are other folders or parts of
the name, kept as the object's group.

Formats (``format.output.type``, CSV by default), with the fields of
``format.output.fields`` (``value`` by default) in that order:

- ``csv`` (``PlainOutputStreamWriter``): fields separated by ``,``, records by ``\\n``; the
  value base64 (``Base64ValuePlainWriter``; ``format.output.fields.value.encoding=none``: as
  it is), the key base64 (``KeyPlainWriter``, empty when null), the offset and the
  timestamp as numbers, headers as ``base64(name):base64(value);`` each
  (``HeadersPlainWriter``);
- ``jsonl`` and ``json`` (``JsonLinesOutputStreamWriter``, ``JsonOutputStreamWriter``: an
  array): an object per record with ``key``, ``value`` (Connect's JsonConverter without
  schemas), ``offset``, ``timestamp`` (ISO-8601, ``TimestampBuilder``) and ``headers``
  (``[{"key", "value"}]``, ``HeaderBuilder``);
- ``parquet`` (``ParquetSchemaBuilder``): a row per record, ``offset`` and ``timestamp``
  longs, ``headers`` a map.

What is kept is what ``format.output.fields`` names; without ``offset``, offsets are the
name's start offset plus the position.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.read.foreign import _common
from kafka_archive.archiver.read.foreign.model import (
    ForeignFormatError,
    ForeignObject,
    ForeignRecord,
    Kept,
    Options,
)

DEFAULT_TEMPLATE = "{{topic}}-{{partition}}-{{start_offset}}"
_VARIABLE = re.compile(r"\{\{\s*(?P<name>[a-z_]+)(?::(?P<params>[^}]*))?\s*\}\}")
_PATTERNS = {
    "topic": r"(?P<topic>.+)",
    "partition": r"(?P<partition>[0-9]+)",
    "start_offset": r"(?P<start_offset>[0-9]+)",
    "timestamp": r"[^/]+",
    "key": r".*?",
}
FORMATS = ("csv", "jsonl", "json", "parquet")


class AivenLayout:
    name = "aiven"

    def __init__(self, options: Options | None = None) -> None:
        options = options or Options()
        self.template = options.get("file.name.template", DEFAULT_TEMPLATE)
        self.format = options.get("format.output.type", "").lower()
        self.fields = tuple(
            f.strip() for f in options.get("format.output.fields", "value").split(",") if f.strip()
        )
        self.value_encoding = options.get("format.output.fields.value.encoding", "base64")
        self._name = self._compile(self.template)

    @staticmethod
    def _compile(template: str) -> re.Pattern[str]:
        pattern, at = "", 0
        for match in _VARIABLE.finditer(template):
            pattern += re.escape(template[at : match.start()]) + _PATTERNS.get(
                match["name"], r"[^/]*"
            )
            at = match.end()
        pattern += re.escape(template[at:])
        return re.compile(rf"^{pattern}(?P<ext>(?:\.avro)?(?:\.gz|\.snappy|\.zst)?)$")

    def parse(self, relative: str, size: int) -> ForeignObject | None:
        if "/.kafka-archive/" in f"/{relative}":
            return None
        match = self._name.match(relative)
        if match is None or match["ext"].startswith(".avro"):
            return None  # Avro objects are not read (yet)
        folders = relative.rpartition("/")[0]
        return ForeignObject(
            TopicPartition(match["topic"], int(match["partition"])),
            int(match["start_offset"]),
            relative,
            size,
            group=tuple(folders.split("/")) if folders else (),
        )

    def key_for(self, tp: TopicPartition, first_offset: int, ext: str = "") -> str:
        """The key the sink gives an object (the template's variables filled in)."""

        def fill(match: re.Match[str]) -> str:
            padded = "padding=true" in (match["params"] or "")
            if match["name"] == "topic":
                return tp.topic
            if match["name"] == "partition":
                return f"{tp.partition:010d}" if padded else str(tp.partition)
            if match["name"] == "start_offset":
                return f"{first_offset:020d}" if padded else str(first_offset)
            raise ValueError(f"no value for {{{{{match['name']}}}}}")

        return _VARIABLE.sub(fill, self.template) + ext

    def expected_key(self, tp: TopicPartition, first_offset: int, like: ForeignObject) -> str:
        match = self._name.match(like.key)
        return self.key_for(tp, first_offset, match["ext"] if match else "")

    def kept(self, obj: ForeignObject) -> Kept:
        names = set(self.fields)
        return Kept(
            offset="offset" in names,
            key="key" in names,
            headers="headers" in names,
            timestamp="timestamp" in names,
        )

    def _format_of(self, data: bytes) -> str:
        if self.format:
            return self.format
        if data.startswith(b"PAR1"):
            return "parquet"
        stripped = data.lstrip()
        if stripped.startswith(b"["):
            return "json"
        if stripped.startswith(b"{"):
            return "jsonl"
        return "csv"

    def decode(self, obj: ForeignObject, data: bytes) -> list[ForeignRecord]:
        data = _common.decompressed(obj.key, data)
        fmt = self._format_of(data)
        if fmt == "csv":
            return [self._csv_record(line, n) for n, line in enumerate(_common.lines(data), 1)]
        if fmt == "jsonl":
            return [_json_record(doc, n) for n, (_, doc) in enumerate(_common.json_lines(data), 1)]
        if fmt == "json":
            try:
                docs = json.loads(data) if data.strip() else []
            except ValueError:
                raise ForeignFormatError("not a complete JSON array") from None
            if not isinstance(docs, list):
                raise ForeignFormatError("a json object holds an array of records")
            return [_json_record(doc, n) for n, doc in enumerate(docs, 1)]
        if fmt == "parquet":
            return [_row_record(row) for row in _common.parquet_rows(data)]
        raise ForeignFormatError(f"format.output.type {fmt} objects are not read by kafka-archive")

    def _csv_record(self, line: bytes, number: int) -> ForeignRecord:
        cells = line.split(b",", len(self.fields) - 1)
        if len(cells) != len(self.fields):
            raise ForeignFormatError(
                f"line {number} has {len(cells)} field(s), format.output.fields names "
                f"{len(self.fields)}"
            )
        parts = dict(zip(self.fields, cells, strict=True))
        try:
            value: bytes | None = parts.get("value")
            if value is not None and self.value_encoding == "base64":
                value = base64.b64decode(value, validate=True)
            key = base64.b64decode(parts["key"], validate=True) if parts.get("key") else None
            headers = None
            if "headers" in parts:
                headers = tuple(
                    (base64.b64decode(k).decode("utf-8"), base64.b64decode(v))
                    for k, _, v in (h.partition(b":") for h in parts["headers"].split(b";") if h)
                )
            offset = int(parts["offset"]) if "offset" in parts else None
            stamp = parts.get("timestamp")
            timestamp = int(stamp) if stamp else None
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise ForeignFormatError(f"line {number} is not the CSV the sink writes") from None
        return ForeignRecord(value, value, offset, key, headers, timestamp)

    def comparable(self, obj: ForeignObject, value: bytes | None) -> Any:
        return _Loose(value)


class _Loose:
    """A Kafka value as compared with what an Aiven object kept: bytes where the object
    kept bytes (CSV), its JSON form where it kept JSON (jsonl, json, parquet)."""

    __slots__ = ("value",)

    def __init__(self, value: bytes | None) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (bytes, type(None))):
            return other == self.value or _common.kafka_json(other) == _common.kafka_json(
                self.value
            )
        return bool(other == _common.kafka_json(self.value))

    def __hash__(self) -> int:
        return hash(self.value)


def _json_record(doc: Any, number: int) -> ForeignRecord:
    if not isinstance(doc, dict):
        raise ForeignFormatError(f"record {number} is not a JSON object")
    value = doc.get("value")
    headers = doc.get("headers")
    stamp = doc.get("timestamp")
    try:
        timestamp = None if stamp is None else _common.iso_millis(str(stamp))
    except ValueError:
        raise ForeignFormatError(f"record {number}: timestamp {stamp!r} is not ISO-8601") from None
    return ForeignRecord(
        value=_common.value_bytes(value),
        comparable=value,
        offset=int(doc["offset"]) if doc.get("offset") is not None else None,
        key=_common.value_bytes(doc.get("key")),
        headers=None
        if not isinstance(headers, list)
        else tuple((str(h.get("key")), _common.value_bytes(h.get("value"))) for h in headers),
        timestamp=timestamp,
    )


def _row_record(row: dict[str, Any]) -> ForeignRecord:
    raw = row.get("value")
    value = raw if isinstance(raw, bytes) else _common.value_bytes(_common.jsonable(raw))
    key = row.get("key")
    headers = row.get("headers")
    if isinstance(headers, list):  # pyarrow reads a map as (key, value) pairs
        pairs = tuple(
            (str(k), v if isinstance(v, bytes) else _common.value_bytes(v)) for k, v in headers
        )
    elif isinstance(headers, dict):
        pairs = tuple(
            (str(k), v if isinstance(v, bytes) else _common.value_bytes(v))
            for k, v in headers.items()
        )
    else:
        pairs = None
    stamp = row.get("timestamp")
    return ForeignRecord(
        value=value,
        comparable=raw if isinstance(raw, bytes) else _common.jsonable(raw),
        offset=None if row.get("offset") is None else int(row["offset"]),
        key=key if isinstance(key, bytes) or key is None else _common.value_bytes(key),
        headers=pairs,
        timestamp=None if stamp is None else int(stamp),
    )

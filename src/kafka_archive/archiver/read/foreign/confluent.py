"""Confluent's S3 sink (confluentinc/kafka-connect-storage-cloud, ``kafka-connect-s3``).

Names, from ``TopicPartitionWriter.fileKeyToCommit`` and ``fileKey``::

    [<topics.dir>/]<topic>/<encodedPartition>/<topic>+<partition>+<startOffset>.<ext>

- ``topics.dir`` defaults to ``topics``; the directory delimiter is ``/`` and the file
  delimiter ``+`` (``directory.delim``, ``file.delim``);
- the start offset is zero-padded to ``filename.offset.zero.pad.width`` digits, 10 by
  default (``zeroPadOffsetFormat``; a wider offset is written unpadded, ``%010d``);
- ``encodedPartition`` is the partitioner's: ``partition=<p>`` (DefaultPartitioner),
  ``<field>=<value>/…`` (FieldPartitioner), the ``path.format`` folders of the
  TimeBasedPartitioner (``'year'=YYYY/…``): any folders, kept as the object's group;
- the extension is the format's (``AvroRecordWriterProvider`` ``.avro``,
  ``JsonRecordWriterProvider`` ``.json`` + the compression's ``.gz``,
  ``ByteArrayRecordWriterProvider`` ``format.bytearray.extension`` = ``.bin``,
  ``ParquetRecordWriterProvider`` ``<codec>.parquet``, ``.snappy.parquet`` by default);
  ``store.kafka.keys`` / ``store.kafka.headers`` write sibling ``.keys.<ext>`` /
  ``.headers.<ext>`` files (``Utils.getAdjustedFilename``), which are not value objects.

Formats: Avro with the value's schema in the file (one datum per record), JSON (one value
per line, ``JsonRecordWriterProvider``: Jackson or the JsonConverter without schemas),
bytes (each value followed by ``format.bytearray.separator``, the line separator ``\\n``),
Parquet (one row per record). None keeps the key, headers, timestamp or offset: offsets are
the name's start offset plus the position.
"""

from __future__ import annotations

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

_FORMATS = ("avro", "json", "bin", "parquet")


class ConfluentLayout:
    name = "confluent"

    def __init__(self, options: Options | None = None) -> None:
        options = options or Options()
        self.topics_dir = options.get("topics.dir", "topics").strip("/")
        self.file_delim = options.get("file.delim", "+")
        self.pad = int(options.get("filename.offset.zero.pad.width", "10"))
        self.separator = options.get("format.bytearray.separator", "\n").encode("utf-8")
        delim = re.escape(self.file_delim)
        self._name = re.compile(
            rf"^(?P<topic>.+){delim}(?P<partition>[0-9]+){delim}(?P<offset>[0-9]+)"
            r"(?P<ext>\.[A-Za-z0-9.]+)$"
        )

    def _format(self, ext: str) -> str | None:
        plain, _ = _common.split_compression(ext)
        parts = plain.split(".")
        if len(parts) >= 3 and parts[-2] in ("keys", "headers"):
            return None  # a keys or headers file of store.kafka.keys/headers
        last = parts[-1]
        return last if last in _FORMATS else None

    def parse(self, relative: str, size: int) -> ForeignObject | None:
        folders, _, base = relative.rpartition("/")
        match = self._name.match(base)
        if match is None or self._format(match["ext"]) is None:
            return None
        topic = match["topic"]
        segments = folders.split("/") if folders else []
        # The partitioned path is <topic>/<encodedPartition>: the folders after the topic's.
        if topic in segments:
            group = tuple(segments[segments.index(topic) + 1 :])
        else:
            return None
        return ForeignObject(
            TopicPartition(topic, int(match["partition"])),
            int(match["offset"]),
            relative,
            size,
            group=group,
        )

    def expected_key(self, tp: TopicPartition, first_offset: int, like: ForeignObject) -> str:
        folder = like.key.rpartition("/")[0]
        ext = self._name.match(like.key.rpartition("/")[2])
        suffix = ext["ext"] if ext else ".avro"
        d = self.file_delim
        return f"{folder}/{tp.topic}{d}{tp.partition}{d}{first_offset:0{self.pad}d}{suffix}"

    def key_for(self, tp: TopicPartition, first_offset: int, ext: str, group: str = "") -> str:
        """The key Confluent's sink gives an object (``group``: the encoded partition;
        the default partitioner's ``partition=<p>`` when empty)."""
        encoded = group or f"partition={tp.partition}"
        d = self.file_delim
        name = f"{tp.topic}{d}{tp.partition}{d}{first_offset:0{self.pad}d}{ext}"
        head = f"{self.topics_dir}/" if self.topics_dir else ""
        return f"{head}{tp.topic}/{encoded}/{name}"

    def kept(self, obj: ForeignObject) -> Kept:
        return Kept()

    def decode(self, obj: ForeignObject, data: bytes) -> list[ForeignRecord]:
        base = obj.key.rpartition("/")[2]
        match = self._name.match(base)
        fmt = self._format(match["ext"]) if match else None
        data = _common.decompressed(base, data)
        if fmt == "json":
            return [
                ForeignRecord(None if value is None else line, value)
                for line, value in _common.json_lines(data)
            ]
        if fmt == "bin":
            if not data:
                return []
            if not data.endswith(self.separator):
                raise ForeignFormatError("the last value has no separator (cut short)")
            values = data[: -len(self.separator)].split(self.separator)
            return [ForeignRecord(v, v) for v in values]
        rows = _common.avro_rows(data) if fmt == "avro" else _common.parquet_rows(data)
        out = []
        for row in rows:
            value = _common.jsonable(row)
            out.append(ForeignRecord(None if value is None else _common.value_bytes(value), value))
        return out

    def comparable(self, obj: ForeignObject, value: bytes | None) -> Any:
        base = obj.key.rpartition("/")[2]
        match = self._name.match(base)
        fmt = self._format(match["ext"]) if match else None
        if fmt == "bin":
            return value
        return _common.kafka_json(value)

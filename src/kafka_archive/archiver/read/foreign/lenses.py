"""Lenses' S3 sink (lensesio/stream-reactor, ``kafka-connect-cloud-common``).

Names, from ``sink/naming/CloudKeyNamer.value`` and ``sink/naming/FileNamer.scala``::

    <prefix>/<topic>/<partition>/<offset>_<earliestTs>_<latestTs>.<ext>    (OffsetFileNamer)
    <prefix>/<values…>/<topic>(<partition>_<offset>).<ext>       (TopicPartitionOffsetFileNamer)
    <prefix>/<topic>/<partition>/<offset>.<ext>                  (HierarchicalS3FileNamer, older)

- the default partition selection is topic then partition, named by ``OffsetFileNamer``; a
  PARTITIONBY (``partitionSelection.isCustom``) uses ``TopicPartitionOffsetFileNamer`` under
  the partition values' folders, each ``<name>=<value>`` with ``KeysAndValues``
  (``partitionValuePrefix``), else the value alone;
- ``<offset>`` is the last offset the object holds (the sink names an object when it
  commits it), left-padded with ``0`` to 12 by default (``PaddingService``:
  ``DefaultPadLength`` 12, ``DefaultPadChar`` '0', ``DefaultPadFields`` offset; KCQL
  properties ``padding.type``/``padding.char``/``padding.length.<field>``); the
  partition is padded only when ``padding.length.partition`` says so;
- the extension is the format's (``FormatSelection``: json, avro, parquet, text, csv, bytes);
- ``.indexes/`` (``IndexSettings``: ``connect.s3.indexes.name``) holds the sink's lock
  files, ``<connector>/.locks/<topic>/<partition>.lock`` (``IndexManagerV2``), not data.

Formats read: JSON, the envelope (``store.envelope=true``, ``SchemalessEnvelopeTransformer``:
``{"key", "value", "headers": {name: value}, "metadata": {"timestamp", "topic",
"partition", "offset"}}``, ``keyIsArray``/``valueIsArray`` when the bytes were written as
base64) or the value alone per line. The envelope keeps the offset, key, headers (as a
map: repeated names and their order are lost) and timestamp.
"""

from __future__ import annotations

import base64
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

_OFFSET_NAME = re.compile(
    r"^(?P<offset>[0-9]+)(?:_(?P<earliest>[0-9]+)_(?P<latest>[0-9]+))?(?P<suffix>[^.]*)"
    r"\.(?P<ext>json|avro|parquet|text|csv|bytes)$"
)
_TPO_NAME = re.compile(
    r"^(?P<topic>.+)\((?P<partition>[0-9]+)_(?P<offset>[0-9]+)\)(?P<suffix>[^.]*)"
    r"\.(?P<ext>json|avro|parquet|text|csv|bytes)$"
)
_ENVELOPE_KEYS = frozenset({"key", "value", "headers", "metadata", "keyIsArray", "valueIsArray"})


class LensesLayout:
    name = "lenses"
    content_decides = True  # the envelope or the values alone: told by an object's lines

    def __init__(self, options: Options | None = None) -> None:
        options = options or Options()
        self.indexes = options.get("connect.s3.indexes.name", ".indexes").strip("/")
        self.pad_char = options.get("padding.char", "0")
        self.pad_offset = int(options.get("padding.length.offset", "12"))
        self.pad_partition = int(options.get("padding.length.partition", "0"))
        self._plain: set[str] = set()  # objects read that hold values alone

    def parse(self, relative: str, size: int) -> ForeignObject | None:
        if relative.startswith(f"{self.indexes}/") or "/.kafka-archive/" in f"/{relative}":
            return None
        folders, _, base = relative.rpartition("/")
        segments = folders.split("/") if folders else []
        match = _TPO_NAME.match(base)
        if match is not None:
            tp = TopicPartition(match["topic"], int(match["partition"]))
            return ForeignObject(tp, -1, relative, size, int(match["offset"]), tuple(segments))
        if self.pad_char and not self.pad_char.isdigit():  # padding.char: not part of it
            base = base.lstrip(self.pad_char)
        match = _OFFSET_NAME.match(base)
        if match is None or len(segments) < 2 or not segments[-1].isdigit():
            return None
        tp = TopicPartition(segments[-2], int(segments[-1]))
        return ForeignObject(tp, -1, relative, size, int(match["offset"]), ())

    def expected_key(self, tp: TopicPartition, first_offset: int, like: ForeignObject) -> str:
        folder = like.key.rpartition("/")[0]
        return f"{folder}/{self.padded_offset(first_offset)}_… (an object ending at or after it)"

    def padded_offset(self, offset: int) -> str:
        return str(offset).rjust(self.pad_offset, self.pad_char)

    def key_for(
        self, tp: TopicPartition, last_offset: int, ext: str, earliest: int, latest: int
    ) -> str:
        """The key of the default layout (``OffsetFileNamer``) for an object ending at
        ``last_offset`` whose records' timestamps span ``earliest``..``latest``."""
        partition = str(tp.partition).rjust(self.pad_partition, self.pad_char)
        return f"{tp.topic}/{partition}/{self.padded_offset(last_offset)}_{earliest}_{latest}.{ext}"

    def kept(self, obj: ForeignObject) -> Kept:
        """The envelope keeps everything; values alone (an object read without it) nothing."""
        if obj.key in self._plain:
            return Kept()
        return Kept(offset=True, key=True, headers=True, timestamp=True)

    def decode(self, obj: ForeignObject, data: bytes) -> list[ForeignRecord]:
        ext = obj.key.rpartition(".")[2]
        if ext != "json":
            raise ForeignFormatError(
                f"Lenses {ext} objects are not read by kafka-archive yet (JSON is)"
            )
        out = []
        for number, (line, doc) in enumerate(_common.json_lines(data), start=1):
            if isinstance(doc, dict) and "metadata" in doc and set(doc) <= _ENVELOPE_KEYS:
                out.append(_from_envelope(doc, number))
            else:
                self._plain.add(obj.key)
                out.append(ForeignRecord(None if doc is None else line, doc))
        return out

    def comparable(self, obj: ForeignObject, value: bytes | None) -> Any:
        return _common.kafka_json(value)


def _bytes(value: Any, is_array: bool) -> bytes | None:
    if value is None:
        return None
    if is_array and isinstance(value, str):
        return base64.b64decode(value)
    return _common.value_bytes(value)


def _from_envelope(doc: dict[str, Any], number: int) -> ForeignRecord:
    meta = doc.get("metadata") or {}
    if not isinstance(meta, dict) or "offset" not in meta:
        raise ForeignFormatError(f"line {number}: an envelope without metadata.offset")
    value = _bytes(doc.get("value"), bool(doc.get("valueIsArray")))
    headers = doc.get("headers")
    timestamp = meta.get("timestamp")
    return ForeignRecord(
        value=value,
        comparable=_common.kafka_json(value),
        offset=int(meta["offset"]),
        key=_bytes(doc.get("key"), bool(doc.get("keyIsArray"))),
        headers=None
        if not isinstance(headers, dict)
        else tuple((str(k), _common.value_bytes(v)) for k, v in headers.items()),
        timestamp=None if timestamp is None else int(timestamp),
    )

"""Pinterest's Secor (pinterest/secor).

Names, from ``common/LogFilePath.java``::

    <prefix>/<topic>/<partition1>/…/<generation>_<kafkaPartition>_<firstMessageOffset><ext>

- the offset is the first message's, ``String.format("%020d", …)``; ``generation`` is
  ``secor.generation`` (1 by default); ``<ext>`` is ``secor.file.extension`` or the
  compression codec's (empty by default: ``secor.compression.codec=``);
- the partitions come from the message parser; with the default backup configuration's
  ``OffsetMessageParser`` one folder ``offset=<first offset of its range>``
  (``secor.offsets.per.partition``, 10,000,000); any folders are kept as the group;
- local ``.<name>.crc`` files are not data.

Format: ``secor.file.reader.writer.factory`` defaults to ``SequenceFileReaderWriterFactory``:
a Hadoop SequenceFile whose key is a ``LongWritable``, the offset, and whose value a
``BytesWritable``, the message. The offset is kept; key, headers and timestamp are not.
Compressed SequenceFiles (a ``secor.compression.codec``) are not read.
"""

from __future__ import annotations

import re
import struct
from typing import Any

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.read.foreign.model import (
    ForeignFormatError,
    ForeignObject,
    ForeignRecord,
    Kept,
    Options,
)

_NAME = re.compile(
    r"^(?P<generation>[0-9]+)_(?P<partition>[0-9]+)_(?P<offset>[0-9]{20})(?P<ext>\..*)?$"
)
_LONG = "org.apache.hadoop.io.LongWritable"
_BYTES = "org.apache.hadoop.io.BytesWritable"
SYNC_ESCAPE = -1


class SecorLayout:
    name = "secor"

    def __init__(self, options: Options | None = None) -> None:
        options = options or Options()
        self.generation = int(options.get("secor.generation", "1"))
        self.per_partition = int(options.get("secor.offsets.per.partition", "10000000"))

    def parse(self, relative: str, size: int) -> ForeignObject | None:
        segments = relative.split("/")
        if len(segments) < 2 or segments[-1].startswith("."):
            return None
        match = _NAME.match(segments[-1])
        if match is None:
            return None
        return ForeignObject(
            TopicPartition(segments[0], int(match["partition"])),
            int(match["offset"]),
            relative,
            size,
            group=tuple(segments[1:-1]),
        )

    def key_for(self, tp: TopicPartition, first_offset: int, folders: str | None = None) -> str:
        """The key Secor gives a file (``folders``: the parser's partitions; the offset
        parser's ``offset=<range start>`` by default)."""
        if folders is None:
            folders = f"offset={first_offset // self.per_partition * self.per_partition}"
        return f"{tp.topic}/{folders}/{self.generation}_{tp.partition}_{first_offset:020d}"

    def expected_key(self, tp: TopicPartition, first_offset: int, like: ForeignObject) -> str:
        return self.key_for(tp, first_offset)

    def kept(self, obj: ForeignObject) -> Kept:
        return Kept(offset=True)

    def decode(self, obj: ForeignObject, data: bytes) -> list[ForeignRecord]:
        return [ForeignRecord(value, value, offset) for offset, value in read_sequence_file(data)]

    def comparable(self, obj: ForeignObject, value: bytes | None) -> Any:
        return value


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise ForeignFormatError("the SequenceFile is cut short")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def vint(self) -> int:
        """Hadoop's WritableUtils.readVInt."""
        first = struct.unpack(">b", self.take(1))[0]
        if first >= -112:
            return int(first)
        negative = first < -120
        length = (-119 - first) if negative else (-111 - first)
        value = 0
        for byte in self.take(length - 1):
            value = (value << 8) | byte
        return ~value if negative else value

    def text(self) -> str:
        return self.take(self.vint()).decode("utf-8")


def read_sequence_file(data: bytes) -> list[tuple[int, bytes]]:
    """(key, value) of each record of an uncompressed SequenceFile of LongWritable keys and
    BytesWritable values (Hadoop's ``SequenceFile.Writer``, version 6)."""
    cursor = _Cursor(data)
    if cursor.take(3) != b"SEQ":
        raise ForeignFormatError("not a SequenceFile (no SEQ header)")
    version = cursor.take(1)[0]
    if version != 6:
        raise ForeignFormatError(f"SequenceFile version {version} is not read (6 is)")
    key_class, value_class = cursor.text(), cursor.text()
    if (key_class, value_class) != (_LONG, _BYTES):
        raise ForeignFormatError(f"a SequenceFile of {key_class}/{value_class}, not Secor's")
    compressed, block = cursor.take(1)[0], cursor.take(1)[0]
    if compressed or block:
        raise ForeignFormatError("compressed SequenceFiles are not read by kafka-archive")
    for _ in range(cursor.int32()):  # metadata pairs
        cursor.text()
        cursor.text()
    sync = cursor.take(16)
    out: list[tuple[int, bytes]] = []
    while cursor.at < len(data):
        length = cursor.int32()
        if length == SYNC_ESCAPE:
            if cursor.take(16) != sync:
                raise ForeignFormatError("a sync marker does not match the header's")
            continue
        key_length = cursor.int32()
        if key_length != 8 or length < 12:
            raise ForeignFormatError("a record is not a LongWritable key and BytesWritable value")
        (key,) = struct.unpack(">q", cursor.take(8))
        value_size = cursor.int32()
        if value_size != length - key_length - 4:
            raise ForeignFormatError("a BytesWritable's size does not match its record's")
        out.append((int(key), cursor.take(value_size)))
    return out

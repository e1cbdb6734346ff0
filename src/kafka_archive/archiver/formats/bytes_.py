"""STOREAS BYTES: raw values, each framed by its length so any byte sequence round-trips."""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterator, Sequence

from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.base import EncodedBatch
from kafka_archive.archiver.formats.lines import LineWriter

_LENGTH = struct.Struct(">q")
TOMBSTONE = -1
_TOMBSTONE_FRAME = _LENGTH.pack(TOMBSTONE)


class BytesWriter(LineWriter):
    """Writes each value as an 8-byte big-endian signed length, then the value's bytes.

    A tombstone (null value) is written as length -1 with no bytes, so it stays distinct
    from an empty value (length 0).
    """

    def encode(self, record: Record) -> bytes:
        value = record.value
        if value is None:
            return _TOMBSTONE_FRAME
        return _LENGTH.pack(len(value)) + value


def encode_values(values: Sequence[bytes | None]) -> EncodedBatch:
    """The frames of a batch of values back to back (what :class:`BytesWriter` writes):
    without a tombstone, the length frames are packed and joined with the values in C."""
    pack = _LENGTH.pack
    if None in values:
        return EncodedBatch.of(
            [_TOMBSTONE_FRAME if v is None else pack(len(v)) + v for v in values]
        )
    present: Sequence[bytes] = values  # type: ignore[assignment]  # no None, checked above
    frames = itertools.chain.from_iterable(zip(map(pack, map(len, present)), present, strict=True))
    return EncodedBatch.framed(present, _LENGTH.size, b"".join(list(frames)))


def read_values(data: bytes) -> Iterator[bytes | None]:
    """Split a BYTES object back into its values (None for a tombstone)."""
    pos = 0
    while pos < len(data):
        if pos + _LENGTH.size > len(data):
            raise ValueError(f"truncated length frame at byte {pos}")
        (length,) = _LENGTH.unpack_from(data, pos)
        pos += _LENGTH.size
        if length == TOMBSTONE:
            yield None
            continue
        if length < 0 or pos + length > len(data):
            raise ValueError(f"bad length {length} at byte {pos - _LENGTH.size}")
        yield data[pos : pos + length]
        pos += length

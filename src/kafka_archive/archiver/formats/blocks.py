"""Seekable block-GZIP objects (``PROPERTIES('store.compression'='gzip',
'store.gzip.block.bytes'=N)``), as in the block-GZIP write-up: the object is a series of
gzip members, each cut at a record boundary once it holds ``N`` uncompressed bytes — still
one valid gzip file for every reader — plus an index object ``<key>.index.json``::

    {"blocks": [{"first_offset": 0, "records": 812, "byte_offset": 0, "length": 20514}, …]}

so that ``cat`` reads one record with one index GET and one range GET of its block.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass
from typing import Any, BinaryIO

INDEX_SUFFIX = ".index.json"


@dataclass(frozen=True, slots=True)
class Block:
    first_offset: int
    records: int
    byte_offset: int
    length: int


def index_key(key: str) -> str:
    return key + INDEX_SUFFIX


def index_document(blocks: list[Block]) -> bytes:
    return json.dumps({"blocks": [asdict(b) for b in blocks]}, separators=(",", ":")).encode()


def parse_index(data: bytes) -> list[Block]:
    """Raises ValueError for a document that is not an index."""
    try:
        document: Any = json.loads(data)
        return [Block(**entry) for entry in document["blocks"]]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a block index ({type(exc).__name__})") from None


class BlockGzipSink:
    """A write-only file that compresses into ``sink`` as gzip members of bounded size.

    The chunking runtime calls :meth:`record_done` after each record, which is where a
    member may end. Closing it ends the last member; ``sink`` stays open. Members carry no
    name and a zero mtime, so a retried unit writes the same bytes.
    """

    def __init__(self, sink: BinaryIO, block_bytes: int) -> None:
        self._sink = sink
        self._block_bytes = block_bytes
        self._compressor: Any = None
        self._raw = 0
        self._first: int | None = None
        self._records = 0
        self._position = 0
        self._member_start = 0
        self.blocks: list[Block] = []

    def write(self, data: bytes) -> int:
        if self._compressor is None:
            self._compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # gzip wrapper
            self._member_start = self._position
        out = self._compressor.compress(data)
        self._emit(out)
        self._raw += len(data)
        return len(data)

    def _emit(self, out: bytes) -> None:
        if out:
            self._sink.write(out)
            self._position += len(out)

    def record_done(self, offset: int) -> None:
        if self._first is None:
            self._first = offset
        self._records += 1
        if self._raw >= self._block_bytes:
            self._end_member()

    def _end_member(self) -> None:
        if self._compressor is None:
            return
        self._emit(self._compressor.flush())
        if self._first is not None and self._records:
            self.blocks.append(
                Block(
                    self._first,
                    self._records,
                    self._member_start,
                    self._position - self._member_start,
                )
            )
        self._compressor = None
        self._raw = self._records = 0
        self._first = None

    def flush(self) -> None:
        self._sink.flush()

    def close(self) -> None:
        self._end_member()
        self._sink.flush()

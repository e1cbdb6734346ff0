"""The seam between the chunking runtime and the encoders of each STOREAS format: what a
writer is (:class:`FormatWriter`); the table of writers is :mod:`.writers`."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, BinaryIO, Protocol

from kafka_archive.archiver.core.errors import BadRecordError
from kafka_archive.archiver.core.record import Record
from kafka_archive.kcql.plan import Route

if TYPE_CHECKING:
    from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry

__all__ = [
    "BadRecordError",
    "BatchEncoder",
    "BatchWriter",
    "EncodedBatch",
    "FormatWriter",
    "WriterFactory",
]


class FormatWriter(Protocol):
    """Encodes records into one object's bytes, streaming into ``sink``.

    A writer is created for one object, receives records in offset order, and is closed
    once. ``write`` raises :class:`BadRecordError` without having written anything of that
    record. ``bytes_written`` counts what has reached ``sink`` so far (flush by size uses
    it). ``close`` writes any footer and flushes, but does not close ``sink``.
    """

    def accepts(self, record: Record) -> bool:
        """Whether ``record`` may join this object; False rolls the object first (a value
        whose schema differs). Formats without a schema accept every record."""
        ...

    def write(self, record: Record) -> None: ...

    def bytes_written(self) -> int: ...

    def close(self) -> None: ...


class BatchWriter(FormatWriter, Protocol):
    """A writer that also takes a batch encoded ahead by its format's ``encode_values``."""

    def write_encoded(self, data: bytes | memoryview) -> None: ...


class EncodedBatch:
    """A batch of records encoded back to back into one buffer: record ``k`` is
    ``data[ends[k]:ends[k + 1]]`` (``ends[0] == 0``), so the runtime cuts it into objects by
    slicing a memoryview, without a copy per record. ``count`` records."""

    __slots__ = ("_ends", "_extra", "_values", "data")

    def __init__(self, data: bytes, ends: list[int]) -> None:
        self.data = data
        self._ends: list[int] | None = ends
        self._values: Sequence[bytes] = ()
        self._extra = 0

    @property
    def ends(self) -> list[int]:
        """Where each record ends (computed on first use by a framed batch: a batch that
        goes whole into one object never needs them)."""
        if self._ends is None:
            sizes = map(operator.add, map(len, self._values), itertools.repeat(self._extra))
            self._ends = list(itertools.accumulate(sizes, initial=0))
        return self._ends

    @property
    def count(self) -> int:
        return len(self._values) if self._ends is None else len(self._ends) - 1

    @classmethod
    def of(cls, pieces: Sequence[bytes]) -> EncodedBatch:
        """The batch of one encoded piece per record."""
        return cls(b"".join(pieces), list(itertools.accumulate(map(len, pieces), initial=0)))

    @classmethod
    def framed(cls, values: Sequence[bytes], extra: int, data: bytes) -> EncodedBatch:
        """The batch ``data`` holding each of ``values`` with ``extra`` more bytes (a
        separator or a length frame): the ends are counted in C when first asked for, no
        Python step per value."""
        batch = cls(data, [])
        batch._ends, batch._values, batch._extra = None, values, extra
        return batch


BatchEncoder = Callable[[Sequence[bytes | None]], EncodedBatch]


class WriterFactory(Protocol):
    """``registry`` decodes values in the Confluent Avro wire format (None: no registry)."""

    def __call__(
        self, sink: BinaryIO, route: Route, registry: SchemaRegistry | None = None
    ) -> FormatWriter: ...

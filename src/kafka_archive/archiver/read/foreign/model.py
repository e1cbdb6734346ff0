"""What every foreign layout gives the read side: objects named by their keys, and records.

A foreign archive is one another sink wrote (Confluent's S3 sink, Lenses' stream-reactor,
Aiven's connector, Secor). Each sink module turns an object key into a
:class:`ForeignObject` (topic, partition, first offset, the last one when the name has it)
and an object's bytes into :class:`ForeignRecord` s. What a sink's format did not keep is
None and named in :attr:`Kept`: the read side says so instead of guessing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka_archive.archiver.core.model import TopicPartition

Headers = tuple[tuple[str, bytes | None], ...]


class ForeignFormatError(ValueError):
    """An object's bytes are not the format its sink writes (cut short, or another format)."""


@dataclass(frozen=True, slots=True)
class Kept:
    """Which parts of a Kafka record an object keeps (the value always, in some form)."""

    offset: bool = False
    key: bool = False
    headers: bool = False
    timestamp: bool = False

    def missing(self) -> tuple[str, ...]:
        """The parts not kept, by name (``offset`` excepted: it is derived from the name)."""
        return tuple(name for name in ("key", "headers", "timestamp") if not getattr(self, name))


@dataclass(frozen=True, slots=True, order=True)
class ForeignObject:
    """One data object of a foreign archive, as its key names it."""

    tp: TopicPartition
    first_offset: int
    key: str
    size: int = 0
    last_offset: int | None = None  # only where the name has it
    group: tuple[str, ...] = ()  # the folders between topic and file (partitioner output)


@dataclass(frozen=True, slots=True)
class ForeignRecord:
    """One record as a foreign object holds it.

    ``value`` is the value's bytes as they are restored (the stored line or cell, or the
    row's JSON where the format holds rows); ``comparable`` what a Kafka value is compared
    with (:meth:`ForeignLayout.comparable`); ``offset``, ``key``, ``headers``, ``timestamp``
    are None where the format does not keep them (see :class:`Kept`)."""

    value: bytes | None
    comparable: Any
    offset: int | None = None
    key: bytes | None = None
    headers: Headers | None = None
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class Options:
    """The sink's own configuration properties that decide names and formats (as the
    connector was configured: ``topics.dir``, ``file.name.template``, ...)."""

    values: Mapping[str, str] = field(default_factory=dict)

    def get(self, name: str, default: str) -> str:
        return self.values.get(name, default)


class ForeignLayout(Protocol):
    """One sink's naming and format rules (a module of this package)."""

    name: str

    def parse(self, relative: str, size: int) -> ForeignObject | None:
        """The object ``relative`` names (a key without the archive's prefix), or None
        when it is not one of the sink's data objects (index files, other layouts)."""
        ...

    def decode(self, obj: ForeignObject, data: bytes) -> list[ForeignRecord]:
        """The records of one object, in the order written.

        Raises:
            ForeignFormatError: the bytes are not a complete object of the sink's format.
        """
        ...

    def kept(self, obj: ForeignObject) -> Kept:
        """What the records of ``obj`` keep."""
        ...

    def comparable(self, obj: ForeignObject, value: bytes | None) -> Any:
        """The form a Kafka value takes in ``obj``, to compare with
        :attr:`ForeignRecord.comparable` (raises ValueError when the sink could not have
        stored it: verify then counts it as not archivable)."""
        ...

    def expected_key(self, tp: TopicPartition, first_offset: int, like: ForeignObject) -> str:
        """The key (relative) the sink would have given an object of ``tp`` starting at
        ``first_offset``, in ``like``'s folder: how verify names a missing object."""
        ...

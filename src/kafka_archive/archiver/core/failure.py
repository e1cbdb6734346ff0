"""Errors crossing back from Spark tasks: a task returns a :class:`TaskFailure` (a frozen,
picklable value), not an exception (an error of our taxonomy is not worth a Spark retry),
and the driver turns it into the error again (:meth:`TaskFailure.to_error`).

The kinds are an explicit registry (:data:`KINDS`): a kind names a class of
:mod:`.errors`, so what an executor of another version (or a corrupted value) sends can only
ever become one of those, and an unknown kind becomes a plain :class:`ArchiveError` with its
message. An error of a subclass defined elsewhere (a store's private refinement of
:class:`UploadError`, say) crosses as the nearest registered class it is one of.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafka_archive.archiver.core import errors
from kafka_archive.archiver.core.errors import ArchiveError
from kafka_archive.archiver.core.model import TopicPartition

KINDS: Mapping[str, type[ArchiveError]] = {
    cls.__name__: cls
    for cls in (
        ArchiveError,
        errors.ConfigError,
        errors.KafkaUnavailableError,
        errors.TopicNotFoundError,
        errors.S3UnavailableError,
        errors.BucketNotFoundError,
        errors.AccessDeniedError,
        errors.JobLockedError,
        errors.StateConflictError,
        errors.FormatVersionError,
        errors.BadRecordError,
        errors.KafkaReadError,
        errors.UploadError,
        errors.NotInArchiveError,
        errors.DamagedObjectError,
        errors.SparkStartError,
        errors.SpoolError,
        errors.SparkTaskError,
        errors.TransformError,
        errors.FencedError,
        errors.ConditionalWritesError,
        errors.RecordsLostError,
        errors.TopicRecreatedError,
        errors.CatalogError,
        errors.SchemaRegistryUnavailableError,
    )
}
"""Every kind a task failure may name, by the name of its class."""


def kind_of(error: type[ArchiveError] | ArchiveError) -> str:
    """The kind ``error`` (a class or an instance) crosses as: its own class's, or that of
    the nearest class of :data:`KINDS` it derives from."""
    cls = error if isinstance(error, type) else type(error)
    return next(c.__name__ for c in cls.__mro__ if KINDS.get(c.__name__) is c)


@dataclass(frozen=True, slots=True)
class TaskFailure:
    """An error of our taxonomy as a task returns it: its kind (a key of :data:`KINDS`),
    message and hint, and where it happened (partition, offset)."""

    kind: str
    message: str
    hint: str | None = None
    tp: TopicPartition | None = None
    offset: int | None = None

    @classmethod
    def of(cls, error: ArchiveError, *, tp: TopicPartition | None = None) -> TaskFailure:
        """``error`` as a value (``tp``: the partition to name when the error names none)."""
        return cls(kind_of(error), error.message, error.hint, error.tp or tp, error.offset)

    def is_a(self, kind: type[ArchiveError]) -> bool:
        return self.kind == kind_of(kind)

    def to_error(self) -> ArchiveError:
        """The error again, of its kind's class; a plain :class:`ArchiveError` (with the
        message) when the kind is not one of :data:`KINDS`."""
        cls = KINDS.get(self.kind, ArchiveError)
        return cls(self.message, tp=self.tp, offset=self.offset, hint=self.hint)


def first_error(
    failures: Sequence[TaskFailure], prefer: type[ArchiveError] | None = None
) -> ArchiveError | None:
    """The error of failed tasks: the first of kind ``prefer`` if any, else the first; None
    when nothing failed."""
    chosen = [f for f in failures if prefer is not None and f.is_a(prefer)]
    failed = (chosen or list(failures))[:1]
    return failed[0].to_error() if failed else None

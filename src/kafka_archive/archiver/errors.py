"""The runtime's error taxonomy: each family has an exit code, a retriable bit and a hint.

Messages name topics, partitions, offsets and object keys, never record payloads or secrets.
"""

from __future__ import annotations

from typing import ClassVar

from kafka_archive.archiver.model import RunResult, TopicPartition


class ArchiveError(Exception):
    """Base of every error the CLI turns into one line and an exit code."""

    exit_code: ClassVar[int] = 1
    retriable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        tp: TopicPartition | None = None,
        offset: int | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.tp = tp
        self.offset = offset
        self.hint = hint
        # What the run did complete before it failed (set by api.run), for the summary.
        self.result: RunResult | None = None

    def __str__(self) -> str:
        where = ""
        if self.tp is not None:
            where = f"{self.tp}" + (f" offset {self.offset}" if self.offset is not None else "")
            where += ": "
        return where + self.message + (f". {self.hint}" if self.hint else "")


class ConfigError(ArchiveError):
    """A setting is missing, unknown or malformed."""

    exit_code = 2


class KafkaUnavailableError(ArchiveError):
    """The brokers cannot be reached (or stopped answering)."""

    exit_code = 3
    retriable = True


class TopicNotFoundError(ArchiveError):
    exit_code = 4


class S3UnavailableError(ArchiveError):
    """The S3 endpoint cannot be reached, or the credentials are missing or wrong."""

    exit_code = 5
    retriable = True


class BucketNotFoundError(ArchiveError):
    exit_code = 6


class AccessDeniedError(ArchiveError):
    exit_code = 7


class JobLockedError(ArchiveError):
    """Another run of the same job holds the lock."""

    exit_code = 8


class StateConflictError(ArchiveError):
    """The partition state moved under us: another run committed it. Not retriable."""

    exit_code = 9


class BadRecordError(ArchiveError):
    """A record cannot be stored in the route's format, and the policy is to fail."""

    exit_code = 10


class KafkaReadError(ArchiveError):
    """Reading a partition failed mid-run (offset out of range, broker error, timeout)."""

    exit_code = 11
    retriable = True


class UploadError(ArchiveError):
    """An object could not be written to S3 after the retry budget."""

    exit_code = 12
    retriable = True


class NotInArchiveError(ArchiveError):
    """The records asked for are not in the archive (before its start, beyond its end)."""

    exit_code = 13


class DamagedObjectError(ArchiveError):
    """An archived object cannot be read back: cut short, or not in its format."""

    exit_code = 14


class SparkStartError(ArchiveError):
    """Spark could not start: no Java to run its JVM, or the JVM exited at start."""

    exit_code = 15


class RecordsLostError(ArchiveError):
    """Kafka deleted records before they were archived, and the run may not pass the gap."""

    exit_code = 16


class TopicRecreatedError(ArchiveError):
    """The archive's state is beyond the partition's end: the topic was deleted and
    re-created (or its log truncated). Archiving would overwrite the old topic's objects."""

    exit_code = 17

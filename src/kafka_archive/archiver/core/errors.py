"""The runtime's error taxonomy: each family has an exit code, a retriable bit and a hint.

Messages name topics, partitions, offsets and object keys, never record payloads or secrets.
A leaf of the archiver: it imports of the project only :mod:`.model` (an error names the
:class:`TopicPartition` it happened on; the model knows nothing of errors). What a failed run
did commit travels beside its error (``commands.outcome``), never on it; an error crosses
back from a Spark task as a :class:`.failure.TaskFailure`.
"""

from __future__ import annotations

import errno
import tempfile
from typing import Any, ClassVar

from kafka_archive.archiver.core.model import TopicPartition


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


class FormatVersionError(ArchiveError):
    """A partition state or intent marker is in a format version this version does not read
    (a newer kafka-archive wrote it): refused instead of misread."""

    exit_code = 24


class BadRecordError(ArchiveError, ValueError):
    """A record cannot be stored in the route's format (raised by the encoders, where the
    error policy decides; the run's error when the policy is to fail). The message never
    holds payload."""

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


class SpoolError(ArchiveError):
    """The local spool directory is missing, not writable or full (driver or executor)."""

    exit_code = 20


class SparkTaskError(ArchiveError):
    """A Spark task failed, after Spark's own retries, for a reason outside this taxonomy
    (its executor died, or an unexpected error); nothing it did not commit counts."""

    exit_code = 21
    retriable = True


_ELSEWHERE = "point spool_dir (KAFKA_ARCHIVE_SPOOL_DIR or the config file) elsewhere"
_SPOOL_FAULTS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("is full", f"Free space there, or {_ELSEWHERE} (a larger disk)"),
    errno.EDQUOT: ("is over its disk quota", f"Free space there, or {_ELSEWHERE}"),
    errno.ENOENT: (
        "does not exist",
        f"Create it (on the driver and every executor), or {_ELSEWHERE}",
    ),
    errno.ENOTDIR: ("is not a directory", f"Create the directory, or {_ELSEWHERE}"),
    errno.EACCES: ("is not writable", f"Give the user running Spark write access, or {_ELSEWHERE}"),
    errno.EPERM: ("is not writable", f"Give the user running Spark write access, or {_ELSEWHERE}"),
    errno.EROFS: ("is on a read-only file system", f"Remount it, or {_ELSEWHERE}"),
    errno.EMFILE: (
        "cannot take another open file (too many open files)",
        "Raise the open-files limit (ulimit -n) of the user running Spark",
    ),
    errno.EIO: ("had an I/O error", f"Check the disk, or {_ELSEWHERE}"),
}


def spool_error(
    exc: OSError, spool_dir: str | None, *, tp: TopicPartition | None = None
) -> SpoolError | None:
    """The spool fault ``exc`` is, or None when it is not one we can name."""
    fault = _SPOOL_FAULTS.get(exc.errno or 0)
    if fault is None:
        return None
    what, hint = fault
    where = spool_dir or tempfile.gettempdir()
    suffix = "; the next run archives from the last committed offset" if tp else ""
    code = errno.errorcode.get(exc.errno or 0, "?")
    return SpoolError(f"the spool directory {where} {what} ({code}){suffix}", tp=tp, hint=hint)


def kafka_client_error(exc: BaseException, *, tp: TopicPartition | None = None) -> ArchiveError:
    """A librdkafka error (a ``KafkaException``) as ours: a bad ``-X`` property is a
    configuration error, anything else Kafka being unavailable."""
    error: Any = exc.args[0] if exc.args else None
    text = str(error.str()) if hasattr(error, "str") else str(exc)
    name = str(error.name()) if hasattr(error, "name") else ""
    if name == "_INVALID_ARG":
        return ConfigError(
            f"librdkafka refused the Kafka client configuration: {text}",
            tp=tp,
            hint="Fix or remove the -X property (or the kafka: entry "
            "of the config file); see librdkafka's CONFIGURATION.md",
        )
    return KafkaUnavailableError(
        f"Kafka client error: {text}", tp=tp, hint="Check that the brokers are up and reachable"
    )


def from_foreign(
    exc: BaseException, *, spool_dir: str | None, tp: TopicPartition | None = None
) -> ArchiveError | None:
    """Our error for an exception a library raised (an OSError of the spool, a librdkafka
    error), or None when it is not one the user can act on."""
    if isinstance(exc, OSError):
        return spool_error(exc, spool_dir, tp=tp)
    if type(exc).__name__ == "KafkaException" and type(exc).__module__.startswith(
        ("confluent_kafka", "cimpl")
    ):
        return kafka_client_error(exc, tp=tp)
    return None


class TransformError(ArchiveError):
    """The route's ``transform`` broke its contract: it returned something other than records
    of its batch, or two calls on the same records returned different records."""

    exit_code = 22


class FencedError(ArchiveError):
    """This run can no longer prove that it holds the job's lease (another run took it over,
    or it could not renew it in time): it stopped writing and committed nothing further."""

    exit_code = 18


class ConditionalWritesError(ArchiveError):
    """The S3 endpoint ignores If-None-Match / If-Match on PUT, on which fencing depends."""

    exit_code = 19


class RecordsLostError(ArchiveError):
    """Kafka deleted records before they were archived, and the run may not pass the gap."""

    exit_code = 16


class TopicRecreatedError(ArchiveError):
    """The archive's state is beyond the partition's end: the topic was deleted and
    re-created (or its log truncated). Archiving would overwrite the old topic's objects."""

    exit_code = 17


class CatalogError(ArchiveError):
    """An Iceberg route's catalog cannot be reached, or refused a request."""

    exit_code = 23
    retriable = True


class SchemaRegistryUnavailableError(ArchiveError):
    """The Schema Registry cannot be reached, or answered with a server error (5xx): an
    outage, ridden out by ``--follow`` like Kafka's and S3's."""

    exit_code = 25
    retriable = True

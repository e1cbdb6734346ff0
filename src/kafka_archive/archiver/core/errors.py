"""The runtime's error taxonomy: each family has an exit code, a retriable bit, a hint and
what its exit code means (``meaning``, documented in docs/reference/exit-codes.md).

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
    # What the exit code means to a user: the exit-code reference (docs/reference/exit-codes.md,
    # written by `make docs`) is made of these.
    meaning: ClassVar[str] = "internal error (please report it, with `--debug` output)"

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
    meaning = "bad KCQL, bad option or config file, missing setting"


class KafkaUnavailableError(ArchiveError):
    """The brokers cannot be reached (or stopped answering)."""

    exit_code = 3
    meaning = "Kafka unreachable"
    retriable = True


class TopicNotFoundError(ArchiveError):
    exit_code = 4
    meaning = "topic does not exist"


class S3UnavailableError(ArchiveError):
    """The S3 endpoint cannot be reached, or the credentials are missing or wrong."""

    exit_code = 5
    meaning = "S3 endpoint unreachable, or credentials missing or rejected"
    retriable = True


class BucketNotFoundError(ArchiveError):
    exit_code = 6
    meaning = "bucket does not exist"


class AccessDeniedError(ArchiveError):
    exit_code = 7
    meaning = "access denied by S3"


class JobLockedError(ArchiveError):
    """Another run of the same job holds the lock."""

    exit_code = 8
    meaning = (
        "another run is writing the same target prefix (it holds the prefix's lock), "
        "whatever its job name"
    )


class StateConflictError(ArchiveError):
    """The partition state moved under us: another run committed it. Not retriable."""

    exit_code = 9
    meaning = "the partition state was changed by another run while this one wrote"


class FormatVersionError(ArchiveError):
    """A partition state or intent marker is in a format version this version does not read
    (a newer kafka-archive wrote it): refused instead of misread."""

    exit_code = 24
    meaning = (
        "a partition state, intent marker, target lock or topic id record is in a newer "
        "format than this version reads (a newer kafka-archive wrote it): run the same or "
        "a newer version (see [upgrades and "
        "downgrades](../protocol.md#the-exactly-once-guarantee))"
    )


class BadRecordError(ArchiveError, ValueError):
    """A record cannot be stored in the route's format (raised by the encoders, where the
    error policy decides; the run's error when the policy is to fail). The message never
    holds payload."""

    exit_code = 10
    meaning = "a record cannot be stored in the chosen format (names topic, partition, offset)"


class KafkaReadError(ArchiveError):
    """Reading a partition failed mid-run (offset out of range, broker error, timeout)."""

    exit_code = 11
    meaning = "reading a partition failed mid-run"
    retriable = True


class UploadError(ArchiveError):
    """An object could not be written to S3 after the retry budget."""

    exit_code = 12
    meaning = "an object could not be written to S3"
    retriable = True


class NotInArchiveError(ArchiveError):
    """The records asked for are not in the archive (before its start, beyond its end)."""

    exit_code = 13
    meaning = "`cat`: the requested records are not in the archive"


class DamagedObjectError(ArchiveError):
    """An archived object cannot be read back: cut short, or not in its format."""

    exit_code = 14
    meaning = (
        "`cat`, `restore`: an archived object cannot be read (cut short, or not in its format)"
    )


class SparkStartError(ArchiveError):
    """Spark could not start: no Java to run its JVM, or the JVM exited at start."""

    exit_code = 15
    meaning = (
        "Spark could not start: no Java (local runs need Java 17+, from `JAVA_HOME` or "
        "`PATH`), or its JVM exited at start"
    )


class SpoolError(ArchiveError):
    """The local spool directory is missing, not writable or full (driver or executor)."""

    exit_code = 20
    meaning = (
        "the spool directory is missing, not writable, read-only or full (ENOSPC), on the "
        "driver or an executor"
    )


class SparkTaskError(ArchiveError):
    """A Spark task failed, after Spark's own retries, for a reason outside this taxonomy
    (its executor died, or an unexpected error); nothing it did not commit counts."""

    exit_code = 21
    meaning = (
        "a Spark task failed (after Spark's retries) for a reason outside this table, "
        "e.g. its executor died; the line names the task's last Python error"
    )
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
    meaning = (
        "the route's `transform` broke its contract: it returned something other than "
        "records of its batch, or is not deterministic (names topic, partition, offset)"
    )


class FencedError(ArchiveError):
    """This run can no longer prove that it holds the job's lease (another run took it over,
    or it could not renew it in time): it stopped writing and committed nothing further."""

    exit_code = 18
    meaning = (
        "fenced: this run lost the target prefix's lease (another run took it over, or it "
        "could not renew it in time); it stopped writing and committed nothing further — "
        "the run holding the lease carries on, the next run cleans up"
    )


class ConditionalWritesError(ArchiveError):
    """The S3 endpoint ignores If-None-Match / If-Match on PUT, on which fencing depends."""

    exit_code = 19
    meaning = (
        "the S3 endpoint ignores conditional writes (`If-None-Match`/`If-Match`), on "
        "which exactly-once depends (see [the "
        "guarantee](../protocol.md#the-exactly-once-guarantee))"
    )


class RecordsLostError(ArchiveError):
    """Kafka deleted records before they were archived, and the run may not pass the gap."""

    exit_code = 16
    meaning = (
        "Kafka deleted records before they were archived (retention, "
        "`kafka-delete-records`): the gap is reported (summary, `--report`, metrics) and "
        "those partitions are left where they were; `--allow-gaps` continues past it"
    )


class TopicRecreatedError(ArchiveError):
    """The archive's state is beyond the partition's end: the topic was deleted and
    re-created (or its log truncated). Archiving would overwrite the old topic's objects."""

    exit_code = 17
    meaning = (
        "the topic was deleted and re-created since the route archived it (another topic "
        "id, printed as Kafka's tools print it, or the archive's state beyond the "
        "partition's end); archive the new topic into a new prefix (`status` and `verify` "
        "exit so after reporting every route, that topic's marked `RE-CREATED`)"
    )


class CatalogError(ArchiveError):
    """An Iceberg route's catalog cannot be reached, or refused a request."""

    exit_code = 23
    meaning = (
        "an Iceberg route's catalog cannot be reached or refused a request (see [Iceberg "
        "tables](../iceberg.md))"
    )
    retriable = True


class SchemaRegistryUnavailableError(ArchiveError):
    """The Schema Registry cannot be reached, or answered with a server error (5xx): an
    outage, ridden out by ``--follow`` like Kafka's and S3's."""

    exit_code = 25
    meaning = (
        "the Schema Registry (`--schema-registry-url`) cannot be reached or answered with "
        "a server error (5xx)"
    )
    retriable = True

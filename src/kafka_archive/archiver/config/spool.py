"""The local spool directory where objects are written before they are uploaded.

:func:`check` is the driver's preflight: a missing or unwritable spool fails before Kafka or
S3 is touched. Executors meet the same faults (and a full disk) while they write; the task
turns them into the same :class:`~kafka_archive.archiver.core.errors.SpoolError`.
"""

from __future__ import annotations

import os
import tempfile

from kafka_archive.archiver.core.errors import SpoolError, spool_error


def check(spool_dir: str | None) -> None:
    """Fail with a SpoolError unless a spool file can be created (and removed) there."""
    try:
        fd, name = tempfile.mkstemp(prefix="kafka-archive-probe-", dir=spool_dir)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        raise spool_error(exc, spool_dir) or SpoolError(
            f"cannot create a spool file in {spool_dir or tempfile.gettempdir()}: "
            f"{exc.strerror or exc}"
        ) from None

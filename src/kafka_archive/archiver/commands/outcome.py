"""What a batch (or a run, its one batch) did: the :class:`RunResult` of what its units
committed, and the error that failed it, side by side. A failed batch still committed what
its other units archived (each partition is its own exactly-once stream): the caller shows
both, the summary and the error, and neither is written onto the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafka_archive.archiver.core.errors import ArchiveError, FencedError, RecordsLostError
from kafka_archive.archiver.core.failure import TaskFailure, first_error
from kafka_archive.archiver.core.model import Gap, RunResult
from kafka_archive.archiver.state import lease


@dataclass(frozen=True, slots=True)
class Outcome:
    """``result``: what the batch's units committed; ``error``: what failed the batch (None:
    it succeeded)."""

    result: RunResult
    error: ArchiveError | None = None

    def unwrap(self) -> RunResult:
        """The result of a batch that succeeded; the error of one that failed, raised."""
        if self.error is not None:
            raise self.error
        return self.result


def batch_error(
    failures: Sequence[TaskFailure], *, lease_lost: bool, gaps: Sequence[Gap]
) -> ArchiveError | None:
    """The error that fails a batch once its units ended: a unit's (a fenced unit's first: a
    fenced run explains the others), else the job's lease lost during the batch, else the
    records Kafka deleted before they were archived that the run may not pass. None: the
    batch succeeded."""
    error = first_error(failures, prefer=FencedError)
    if error is not None:
        return error
    if lease_lost:
        return lease.fenced("another run took the job's lease over during this batch")
    unpassed = [g for g in gaps if not g.passed]
    if unpassed:
        return RecordsLostError(
            "Kafka deleted records before they were archived: "
            + ", ".join(f"{g.tp} offsets {g.first}..{g.last}" for g in unpassed),
            hint="Those partitions were left where they were (everything else was "
            "archived). To accept the loss and continue from the earliest retained "
            "offset, run again with --allow-gaps (config allow_gaps: true)",
        )
    return None

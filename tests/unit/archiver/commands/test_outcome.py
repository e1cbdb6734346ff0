"""A batch's outcome: which error fails it once its units ended (a unit's, a fenced unit's
first; else the lease lost; else records lost that the run may not pass), and the result of
what it committed beside the error, never on it."""

from __future__ import annotations

import pytest

from kafka_archive.archiver.commands.follow import FOLLOW_MAX_BACKOFF, backoff
from kafka_archive.archiver.commands.outcome import Outcome, batch_error
from kafka_archive.archiver.core import errors
from kafka_archive.archiver.core.failure import TaskFailure
from kafka_archive.archiver.core.model import Gap, RunResult, TopicPartition

TP = TopicPartition("orders", 0)
RESULT = RunResult(job="job", run_id="r1", units=(), skipped=(), seconds=1.0)


def _failure(cls: type[errors.ArchiveError], message: str) -> TaskFailure:
    return TaskFailure.of(cls(message, tp=TP))


def test_a_batch_without_failures_or_unpassed_gaps_succeeds() -> None:
    passed = Gap(0, TP, 5, 9, passed=True)
    assert batch_error([], lease_lost=False, gaps=[passed]) is None


def test_the_first_failure_fails_the_batch_a_fenced_one_first() -> None:
    read = _failure(errors.KafkaReadError, "read failed")
    upload = _failure(errors.UploadError, "upload failed")
    fenced = _failure(errors.FencedError, "fenced")
    first = batch_error([read, upload], lease_lost=True, gaps=[])
    assert type(first) is errors.KafkaReadError and first.message == "read failed"
    chosen = batch_error([read, fenced, upload], lease_lost=False, gaps=[])
    assert type(chosen) is errors.FencedError and chosen.tp == TP


def test_a_lost_lease_fails_a_batch_whose_units_all_ended_well() -> None:
    gap = Gap(0, TP, 5, 9, passed=False)
    error = batch_error([], lease_lost=True, gaps=[gap])
    assert type(error) is errors.FencedError
    assert "another run took the job's lease over during this batch" in error.message


def test_unpassed_gaps_fail_the_batch_naming_each() -> None:
    gaps = [Gap(0, TP, 5, 9, passed=False), Gap(0, TopicPartition("b", 1), 0, 0, passed=True)]
    error = batch_error([], lease_lost=False, gaps=gaps)
    assert type(error) is errors.RecordsLostError and error.exit_code == 16
    assert error.message.endswith("before they were archived: orders-0 offsets 5..9")
    assert error.hint is not None and "--allow-gaps" in error.hint


def test_an_outcome_keeps_the_result_beside_the_error() -> None:
    assert Outcome(RESULT).unwrap() is RESULT
    error = errors.UploadError("upload failed")
    failed = Outcome(RESULT, error)
    with pytest.raises(errors.UploadError) as raised:
        failed.unwrap()
    assert raised.value is error and failed.result is RESULT
    assert not hasattr(error, "result")


def test_the_follow_backoff_doubles_up_to_a_minute() -> None:
    assert [backoff(5.0, n) for n in (1, 2, 3, 4)] == [10.0, 20.0, 40.0, FOLLOW_MAX_BACKOFF]
    assert backoff(0.5, 1) == 1.0 and backoff(120.0, 1) == FOLLOW_MAX_BACKOFF

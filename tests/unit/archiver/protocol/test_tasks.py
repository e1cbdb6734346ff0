"""commit_protocol=log, the task's side (archiver.protocol.tasks): attempt numbers and which
attempts are dead."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.protocol.log import PartitionRef, WriterId
from kafka_archive.archiver.protocol.tasks import (
    BATCH_SHIFT,
    EarlierBatches,
    attempt_number,
    object_metadata,
)
from kafka_archive.archiver.protocol.writer import object_writer


@given(st.integers(1, 10**6), st.integers(1, 10**6), st.integers(0, 2**BATCH_SHIFT - 1))
def test_only_attempts_of_earlier_batches_are_dead(mine: int, theirs: int, task: int) -> None:
    attempt = theirs << BATCH_SHIFT | task
    assert (attempt in EarlierBatches(mine)) is (theirs < mine)


def test_outside_a_spark_task_the_attempt_is_the_batchs_first() -> None:
    assert attempt_number(3) == 3 << BATCH_SHIFT
    assert attempt_number(3) not in EarlierBatches(3)
    assert attempt_number(2) in EarlierBatches(3)


def test_the_metadata_reads_back_as_the_writer_the_attempt_and_the_partition() -> None:
    ref = PartitionRef("t", "t", 4)
    meta = object_metadata(WriterId("run", 7), 5 << BATCH_SHIFT | 9, ref)
    assert object_writer(meta) == (WriterId("run", 7), 5 << BATCH_SHIFT | 9, ref)

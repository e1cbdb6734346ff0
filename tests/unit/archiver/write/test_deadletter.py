"""The error policy's decision on a record the archive cannot store (deadletter.Refused)."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.write.deadletter import DEAD_LETTER, FAIL, SKIP, Refused

TP = TopicPartition("t", 3)


@given(
    policy=st.sampled_from([FAIL, SKIP, DEAD_LETTER]),
    offsets=st.lists(st.integers(0, 10**6), unique=True, max_size=6).map(sorted),
)
def test_each_policy_keeps_the_record_out_as_it_says(policy: str, offsets: list[int]) -> None:
    refused = Refused(policy, TP, logging.getLogger("test"))
    kept = [refused.take(Record("t", 3, o, None, None, b"v"), ValueError("bad")) for o in offsets]
    assert kept == [policy != FAIL] * len(offsets)
    assert refused.skipped == (len(offsets) if policy == SKIP else 0)
    letters = refused.letters
    if policy == DEAD_LETTER:
        assert letters.offsets == offsets
        assert [json.loads(line)["error"] for line in letters.lines] == ["bad"] * len(offsets)
        assert letters.first_offset == (offsets[0] if offsets else None)
    else:
        assert letters.lines == [] and letters.first_offset is None


def test_a_skipped_record_is_logged_by_offset_on_the_given_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refused = Refused(SKIP, TP, logging.getLogger("kafka_archive.archiver.write.task"))
    with caplog.at_level(logging.WARNING):
        assert refused.take(Record("t", 3, 42, None, None, b"secret"), ValueError("not JSON"))
    (line,) = caplog.records
    assert line.name == "kafka_archive.archiver.write.task"
    assert line.getMessage() == f"skipped {TP} offset 42: not JSON"
    assert "secret" not in line.getMessage()

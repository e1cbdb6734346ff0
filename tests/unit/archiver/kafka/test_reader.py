"""Gaps (records Kafka deleted before they were archived) in every output of a run, the
allow_gaps setting from each source, which client errors a read rides out, and the consumer
group mirror's commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from kafka_archive.archiver.commands.report import prometheus_text, report_json
from kafka_archive.archiver.config.load import load_settings
from kafka_archive.archiver.config.settings import KafkaSettings
from kafka_archive.archiver.core.errors import ConfigError, KafkaReadError
from kafka_archive.archiver.core.model import Gap, RunResult, TopicPartition, UnitResult
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.archiver.kafka.reader import (
    BATCH_BYTES,
    MAX_BATCH,
    MIN_BATCH,
    KafkaReader,
    batch_size,
    consumer_config,
    is_transient,
    reads_committed,
)
from kafka_archive.cli.output import render_summary

TP = TopicPartition("orders", 0)


def _result(*gaps: Gap) -> RunResult:
    unit = UnitResult(0, TopicPartition("orders", 1), 0, 10, 10, 100, (), 1.0)
    return RunResult("job-1", "run", (unit,), (), 2.0, gaps=gaps)


def test_a_gap_is_in_the_summary_the_report_and_the_metrics() -> None:
    result = _result(Gap(0, TP, 10, 14, passed=False))
    summary = render_summary(result)
    assert (
        "orders-0: GAP offsets 10..14 (5 records) deleted by Kafka before they were "
        "archived; partition left at offset 10"
    ) in summary
    assert report_json(result, "lost")["gaps"] == [
        {
            "topic": "orders",
            "partition": 0,
            "first_offset": 10,
            "last_offset": 14,
            "records": 5,
            "passed": False,
        }
    ]
    samples = {
        (s.name, s.labels.get("partition")): s.value
        for family in text_string_to_metric_families(prometheus_text(result, None, ok=False))
        for s in family.samples
    }
    assert samples[("kafka_archive_run_lost_records", "0")] == 5
    passed = render_summary(_result(Gap(0, TP, 10, 14, passed=True)))
    assert "continued at offset 15 (allow_gaps)" in passed


def test_no_gap_no_gap_lines() -> None:
    result = _result()
    assert "GAP" not in render_summary(result)
    assert report_json(result)["gaps"] == []
    assert "kafka_archive_run_lost_records{" not in prometheus_text(result, None, ok=True)


def test_allow_gaps_from_file_environment_and_flag(tmp_path: Path) -> None:
    assert load_settings(None, {}, {}).settings.allow_gaps is False
    path = tmp_path / "archive.yaml"
    path.write_text("allow_gaps: true\n")
    assert load_settings(path, {}, {}).settings.allow_gaps is True
    env = {"KAFKA_ARCHIVE_ALLOW_GAPS": "false"}
    assert load_settings(path, env, {}).settings.allow_gaps is False
    assert load_settings(None, env, {"allow_gaps": True}).settings.allow_gaps is True
    with pytest.raises(ConfigError, match=r"allow_gaps from environment .* true or false"):
        load_settings(None, {"KAFKA_ARCHIVE_ALLOW_GAPS": "maybe"}, {})


def test_reads_are_read_committed_unless_the_user_says_otherwise() -> None:
    default = consumer_config(KafkaSettings("b:9092"), "g")
    assert default["isolation.level"] == "read_committed" and reads_committed(default)
    user = KafkaSettings("b:9092", (("isolation.level", "read_uncommitted"),))
    assert not reads_committed(consumer_config(user, "g"))


@pytest.mark.parametrize(
    ("code", "transient"),
    [
        (KafkaError._TRANSPORT, True),
        (KafkaError._ALL_BROKERS_DOWN, True),
        (KafkaError.NOT_LEADER_FOR_PARTITION, True),
        (KafkaError.LEADER_NOT_AVAILABLE, True),
        (KafkaError._AUTO_OFFSET_RESET, False),
        (KafkaError.OFFSET_OUT_OF_RANGE, False),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, False),
    ],
)
def test_which_client_errors_are_ridden_out(code: int, transient: bool) -> None:
    assert is_transient(KafkaError(code)) is transient


class _Message:
    """What confluent-kafka's consume() returns, as far as the reader looks at it."""

    def __init__(
        self, offset: int, error: KafkaError | None = None, tp: TopicPartition = TP
    ) -> None:
        self._offset, self._error, self._tp = offset, error, tp

    def error(self) -> KafkaError | None:
        return self._error

    def topic(self) -> str:
        return self._tp.topic

    def partition(self) -> int:
        return self._tp.partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)


def test_a_read_notes_transient_errors_and_keeps_the_records_around_them() -> None:
    reader = KafkaReader(KafkaSettings("127.0.0.1:1"), TP, start=0, stop=10, group="g")
    try:
        batch = [_Message(0), _Message(-1, KafkaError(KafkaError._TRANSPORT)), _Message(1)]
        assert [m.offset() for m in reader._bounded(batch)] == [0, 1]
        assert reader._outage is not None and reader._position == 2
        with pytest.raises(KafkaReadError, match="broker error"):
            reader._bounded([_Message(2, KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))])
    finally:
        reader.close()


@given(
    offsets=st.lists(st.integers(0, 300), unique=True).map(sorted),
    start=st.integers(0, 150),
    length=st.integers(1, 200),
    cuts=st.lists(st.integers(1, 20), min_size=1),
)
def test_a_range_holds_exactly_the_records_inside_it_whatever_the_gaps(
    offsets: list[int], start: int, length: int, cuts: list[int]
) -> None:
    """Offsets with gaps (compaction, markers, aborted records), served in batches of any
    size and ending with the EOF event at the end offset: the reader keeps exactly the
    records in [start, stop) and ends at stop."""
    stop = start + length
    served = [o for o in offsets if o >= start]
    end = max([*offsets, start - 1]) + 1  # the high watermark (or the LSO) after the last one
    reader = KafkaReader(KafkaSettings("127.0.0.1:1"), TP, start=start, stop=stop, group="g")
    try:
        kept: list[int] = []
        i = 0
        for cut in cuts * (len(served) + 1):
            if i >= len(served) or reader._position >= stop:
                break
            kept += [
                m.offset() for m in reader._bounded([_Message(o) for o in served[i : i + cut]])
            ]
            i += cut
        if reader._position < stop:
            reader._bounded([_Message(end, KafkaError(KafkaError._PARTITION_EOF))])
        assert kept == [o for o in offsets if start <= o < stop]
        assert reader._position == min(max(end, start), stop)
    finally:
        reader.close()


def test_a_read_keeps_no_message_of_another_partition_or_before_its_position() -> None:
    """A pooled consumer read another assignment before: should librdkafka hand over what it
    fetched for that, neither those records nor their EOF event count for this range."""
    other = TopicPartition("orders", 1)
    reader = KafkaReader(KafkaSettings("127.0.0.1:1"), TP, start=5, stop=20, group="g")
    try:
        stale = [_Message(o, tp=other) for o in (7, 8)]
        assert [m.offset() for m in reader._bounded([*stale, _Message(5), _Message(6)])] == [5, 6]
        assert [m.offset() for m in reader._bounded([_Message(9, tp=other)])] == []
        reader._bounded([_Message(30, KafkaError(KafkaError._PARTITION_EOF), tp=other)])
        assert reader._position == 7
        # Offsets before the position (what an earlier range of this partition fetched).
        assert [m.offset() for m in reader._bounded([_Message(3), _Message(6), _Message(7)])] == [7]
        assert reader._position == 8
    finally:
        reader.close()


def test_records_before_an_eof_event_of_the_same_list_are_kept() -> None:
    """consume() hands records and the EOF event after them in one list; the event moves the
    position to the end before the records are looked at: they are still this range's."""
    reader = KafkaReader(KafkaSettings("127.0.0.1:1"), TP, start=0, stop=5, group="g")
    try:
        batch = [
            *(_Message(o) for o in range(5)),
            _Message(5, KafkaError(KafkaError._PARTITION_EOF)),
        ]
        assert [m.offset() for m in reader._bounded(batch)] == [0, 1, 2, 3, 4]
        assert reader._position == 5
    finally:
        reader.close()


class _CommitRecorder:
    """A consumer that notes each commit request (confluent-kafka's commit signature)."""

    def __init__(self) -> None:
        self.requests: list[list[tuple[str, int, int]]] = []

    def commit(self, *, offsets: list[Any], asynchronous: bool) -> None:
        assert asynchronous is False
        self.requests.append([(o.topic, o.partition, o.offset) for o in offsets])


def test_the_consumer_group_mirror_commits_at_most_a_thousand_partitions_a_request() -> None:
    # 10,000 partitions in one commit exceed the broker's max.message.bytes with a long
    # group name (measured on Apache Kafka 4.1: "Unknown broker error").
    admin = object.__new__(KafkaAdmin)
    recorder = _CommitRecorder()
    admin._consumer = recorder  # type: ignore[attr-defined]
    offsets = {TopicPartition(f"t{t}", p): t * 100 + p for t in range(25) for p in range(100)}
    admin.commit_group(offsets)
    assert [len(r) for r in recorder.requests] == [1000, 1000, 500]
    committed = {(t, p): o for request in recorder.requests for t, p, o in request}
    assert committed == {(tp.topic, tp.partition): o for tp, o in offsets.items()}


@given(records=st.integers(0, 50_000), value_bytes=st.integers(0, 10**9))
def test_a_batch_holds_about_a_mebibyte_of_values_within_bounds(
    records: int, value_bytes: int
) -> None:
    size = batch_size(records, value_bytes)
    assert MIN_BATCH <= size <= MAX_BATCH
    if records and MIN_BATCH < size < MAX_BATCH:
        average = max(1, value_bytes // records)
        assert size * average <= BATCH_BYTES < (size + 1) * average


def test_batch_sizes_of_the_bench_and_of_small_values() -> None:
    assert batch_size(10_000, 10_000 * 1_000) == 1_048
    assert batch_size(10_000, 10_000 * 50) == MAX_BATCH
    assert batch_size(100, 100 * 1_000_000) == MIN_BATCH
    assert batch_size(0, 0) == MAX_BATCH


class _QueueConsumer:
    """A consumer whose queue holds ``arriving`` after the first blocking poll."""

    def __init__(self, arriving: list[Any]) -> None:
        self.queued: list[Any] = []
        self.arriving = arriving
        self.polls: list[float] = []

    def consume(self, size: int, timeout: float) -> list[Any]:
        assert timeout == 0  # never waits for a batch it may not fill
        taken, self.queued = self.queued[:size], self.queued[size:]
        return taken

    def poll(self, timeout: float) -> Any:
        self.polls.append(timeout)
        self.queued, self.arriving = self.arriving, []
        return self.queued.pop(0) if self.queued else None


def test_a_read_takes_what_is_queued_and_waits_only_for_the_first_message() -> None:
    reader = KafkaReader(KafkaSettings("127.0.0.1:1"), TP, start=0, stop=10, group="g")
    real = reader._consumer
    try:
        fake = _QueueConsumer([_Message(0), _Message(1), _Message(2)])
        reader._consumer = fake
        assert [m.offset() for m in reader._next_messages(2)] == [0, 1]  # the first polled
        assert [m.offset() for m in reader._next_messages(2)] == [2]  # queued: no wait
        assert len(fake.polls) == 1
        assert reader._next_messages(2) == [] and len(fake.polls) == 2
    finally:
        reader._consumer = real
        reader.close()


class _MetadataConsumer:
    """Records the metadata requests a reader makes; ``fail`` raises like librdkafka."""

    def __init__(self, known: set[str] | None, fail: bool = False) -> None:
        if known is not None:
            self.known_topics = known
        self.fail = fail
        self.asked: list[tuple[str, float]] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        self.asked.append((topic, timeout))
        if self.fail:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    def close(self) -> None:
        pass


def test_a_pooled_consumer_asks_for_a_topics_metadata_once_a_fresh_one_always() -> None:
    reader = KafkaReader(KafkaSettings("127.0.0.1:1"), TP, start=0, stop=10, group="g")
    try:
        reader._consumer.close()
        pooled = _MetadataConsumer(known=set())
        reader._consumer = pooled
        for topic in ("a", "b", "a", "b", "a"):
            reader._learn_topic(topic)
        assert [topic for topic, _ in pooled.asked] == ["a", "b"]
        assert all(0 < timeout <= 5 for _, timeout in pooled.asked)

        fresh = _MetadataConsumer(known=None)
        reader._consumer = fresh
        reader._learn_topic("a")
        reader._learn_topic("a")
        assert [topic for topic, _ in fresh.asked] == ["a", "a"]

        # A failed request is not remembered (the read meets, and reports, what failed).
        failing = _MetadataConsumer(known=set(), fail=True)
        reader._consumer = failing
        reader._learn_topic("a")
        reader._learn_topic("a")
        assert [topic for topic, _ in failing.asked] == ["a", "a"]
        assert failing.known_topics == set()
    finally:
        reader._consumer = _MetadataConsumer(known=None)
        reader.close()


class _SilentConsumer:
    """A consumer stuck after a broker restart: no record, no error, however long."""

    def __init__(self) -> None:
        self.closed = False

    def consume(self, size: int, timeout: float) -> list[Any]:
        return []

    def poll(self, timeout: float) -> None:
        return None

    def list_topics(self, topic: str, timeout: float) -> None:
        pass

    def assign(self, partitions: list[Any]) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def test_a_consumer_silent_for_a_third_of_the_read_timeout_is_replaced_from_the_position(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kafka_archive.archiver.kafka import reader as module

    made: list[_QueueConsumer] = []

    class Record(_Message):
        def __len__(self) -> int:  # its value's length
            return 10

    class Fresh(_QueueConsumer):
        def __init__(self, config: dict[str, Any]) -> None:
            super().__init__([Record(3), Record(4)])
            self.assigned: list[Any] = []
            made.append(self)

        def list_topics(self, topic: str, timeout: float) -> None:
            pass

        def assign(self, partitions: list[Any]) -> None:
            self.assigned = partitions

        def close(self) -> None:
            pass

    monkeypatch.setattr(module, "Consumer", Fresh)
    monkeypatch.setattr(module, "_POLL_SECONDS", 0.01)
    reader = KafkaReader(
        KafkaSettings("127.0.0.1:1"), TP, start=3, stop=5, group="g", idle_timeout=0.6
    )
    made.clear()
    reader._consumer.close()
    stuck = _SilentConsumer()
    reader._consumer = stuck
    try:
        assert [o for batch in reader.batches() for o in batch.offsets()] == [3, 4]
        assert stuck.closed and len(made) == 1
        assert [(p.topic, p.partition, p.offset) for p in made[0].assigned] == [("orders", 0, 3)]
    finally:
        reader.close()

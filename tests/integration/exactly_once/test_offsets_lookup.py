"""The driver's offsets of many partitions (KafkaAdmin.offsets), on Apache Kafka: one answer
per kind of offset for all partitions, no Python future per partition (issue 37: three
``AdminClient.list_offsets`` of 10,000 partitions each made 10,000 futures, 26 s of a
profiled no-op run), and the same offsets: low, high, and the last stable offset where a
transaction is open (read with a plain consumer per partition, not our lookup)."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import produce_to
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_archive.archiver.config.settings import KafkaSettings
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.kafka.admin import KafkaAdmin

pytestmark = pytest.mark.integration


def _watermarks(broker: str, tp: TopicPartition, isolation: str) -> tuple[int, int]:
    consumer = Consumer(
        {"bootstrap.servers": broker, "group.id": "check", "isolation.level": isolation}
    )
    try:
        low, high = consumer.get_watermark_offsets(
            KafkaTopicPartition(tp.topic, tp.partition), timeout=30
        )
        return int(low), int(high)
    finally:
        consumer.close()


def test_offsets_of_many_partitions_make_no_future_per_partition(
    broker: str, topic: Callable[..., str]
) -> None:
    name = topic(partitions=60)
    produce_to(broker, name, 240, partitions=60)
    tps = [TopicPartition(name, p) for p in range(60)]
    producer = Producer({"bootstrap.servers": broker, "transactional.id": f"tx-{name}"})
    producer.init_transactions()
    producer.begin_transaction()
    for _ in range(3):  # left open: partition 0 ends at its last stable offset
        producer.produce(name, b"open", partition=0)
    producer.flush(30)
    try:
        _check(broker, tps)
    finally:
        producer.abort_transaction()


def _check(broker: str, tps: list[TopicPartition]) -> None:
    made: list[Any] = []
    real = concurrent.futures.Future.__init__

    def counted(self: Any) -> None:
        made.append(self)
        real(self)

    with KafkaAdmin(KafkaSettings(broker), "offsets-test") as admin:
        admin.offsets(tps[:1])  # (connected)
        concurrent.futures.Future.__init__ = counted  # type: ignore[method-assign]
        try:
            offsets = admin.offsets(tps)
        finally:
            concurrent.futures.Future.__init__ = real  # type: ignore[method-assign]
    assert len(made) == 0, f"{len(made)} futures for {len(tps)} partitions"  # before: 180
    for tp in tps:
        low, high = _watermarks(broker, tp, "read_uncommitted")
        assert (offsets[tp].low, offsets[tp].high) == (low, high)
        assert offsets[tp].end == (high - 3 if tp.partition == 0 else high)
    assert offsets[tps[0]].end == _watermarks(broker, tps[0], "read_committed")[1]

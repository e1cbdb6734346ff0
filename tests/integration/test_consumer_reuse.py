"""A Kafka consumer reused from one unit to the next (the process's pool) reads exactly the
offsets each unit asks for, whatever the previous one read; one that failed is not reused."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kafka_archive.archiver.errors import KafkaReadError
from kafka_archive.archiver.kafka.reader import ConsumerPool, KafkaReader, consumer_pool
from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.settings import KafkaSettings

pytestmark = pytest.mark.integration


def _read(
    pool: ConsumerPool, kafka: KafkaSettings, tp: TopicPartition, start: int, stop: int
) -> tuple[list[int], int]:
    with KafkaReader(kafka, tp, start=start, stop=stop, group="g", pool=pool) as reader:
        offsets = [o for batch in reader.batches() for o in batch.offsets()]
        return offsets, reader.next_offset


def test_a_reused_consumer_reads_exactly_each_units_range(
    broker: str, produce: Callable[..., None], topic: Callable[..., str]
) -> None:
    name = topic(partitions=2)
    produce(name, 40, partitions=2)  # 20 records in each partition, offsets 0..19
    kafka = KafkaSettings(broker)
    pool = consumer_pool()
    p0, p1 = TopicPartition(name, 0), TopicPartition(name, 1)
    try:
        assert _read(pool, kafka, p0, 0, 15) == (list(range(0, 15)), 15)
        (consumer,) = [entry[2] for entry in pool._idle]
        # Backwards on the same partition (what the first read fetched ahead is not served),
        # then another partition, then forwards again: each exactly its range.
        assert _read(pool, kafka, p0, 3, 8) == (list(range(3, 8)), 8)
        assert _read(pool, kafka, p1, 2, 6) == (list(range(2, 6)), 6)
        assert _read(pool, kafka, p0, 15, 20) == (list(range(15, 20)), 20)
        assert [entry[2] for entry in pool._idle] == [consumer]  # one consumer, reused
        # Other settings: another consumer.
        _read(pool, KafkaSettings(broker, (("client.id", "other"),)), p1, 0, 1)
        assert len(pool) == 2
        # A read that fails closes its consumer instead of giving it back.
        with (
            pytest.raises(KafkaReadError),
            KafkaReader(kafka, p0, start=0, stop=5, group="g", pool=pool) as reader,
        ):
            for _ in reader.batches():
                raise KafkaReadError("stop", tp=p0, offset=0)
        assert len(pool) == 1
    finally:
        pool.clear()

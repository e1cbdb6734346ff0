"""A Kafka consumer reused from one unit to the next (the process's pool) reads exactly the
offsets each unit asks for, whatever the previous one read; one that failed is not reused;
one idle in the pool puts nothing on stderr, one in use all that librdkafka logs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka_broker import KafkaBroker

from devstack import LOOPBACK, free_port
from kafka_archive.archiver.config.settings import KafkaSettings
from kafka_archive.archiver.core.errors import KafkaReadError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.kafka.reader import (
    ConsumerPool,
    KafkaReader,
    consumer_config,
    consumer_pool,
)

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


def _librdkafka_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "|rdkafka#consumer-" in line]


def _poll(consumer: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(0.1)


def test_an_idle_consumer_is_silent_and_one_in_use_reports_what_librdkafka_logs(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """With no broker to reach (nothing listens on the port), librdkafka logs each failed
    connection: on stderr while the consumer is in use, never while it is idle in the pool
    (nor what it logged then, once taken again); an idle consumer is closed in its time."""
    config = consumer_config(KafkaSettings(f"{LOOPBACK}:{free_port()}"), "g")
    pool = consumer_pool()
    try:
        consumer = pool.take(config)
        _poll(consumer, 1.0)
        in_use = _librdkafka_lines(capfd.readouterr().err)
        assert in_use and all("Connection refused" in line for line in in_use), in_use
        assert in_use[0].startswith("%3|")  # librdkafka's own format: level 3, ERR
        pool.give(config, consumer)
        time.sleep(1.5)  # idle: it reconnects and logs, muted
        assert pool.take(config) is consumer
        assert _librdkafka_lines(capfd.readouterr().err) == [], "idle and stale lines dropped"
        _poll(consumer, 1.0)
        assert _librdkafka_lines(capfd.readouterr().err), "in use again: reported"
        brief = consumer_pool(max_idle_seconds=0.3)
        brief.give(config, consumer)
        deadline = time.monotonic() + 30  # generous: the machine is shared
        while len(brief) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(brief) == 0
        with pytest.raises(RuntimeError, match="closed"):
            consumer.poll(0)
        assert _librdkafka_lines(capfd.readouterr().err) == []
    finally:
        pool.clear()


@pytest.mark.full
def test_idle_consumers_stay_silent_when_the_broker_goes_away_and_a_read_reports_it(
    kafka: KafkaBroker,
    broker: str,
    produce: Callable[..., None],
    topic: Callable[..., str],
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The session's broker stops after a read (as between two --follow batches): the pool's
    idle consumer, connected until then, puts nothing on stderr; a read while the broker is
    still down fails with our error, and librdkafka's lines of that read are shown."""
    name = topic()
    produce(name, 5, partitions=1)
    kafka_settings = KafkaSettings(broker)
    pool = consumer_pool()
    tp = TopicPartition(name, 0)
    try:
        assert _read(pool, kafka_settings, tp, 0, 5) == (list(range(5)), 5)
        capfd.readouterr()
        kafka.stop()
        time.sleep(3)  # idle consumers of a broker that is gone reconnected ~20 times a second
        assert _librdkafka_lines(capfd.readouterr().err) == []
        with (
            pytest.raises(KafkaReadError, match="no data for 3s") as failed,
            KafkaReader(
                kafka_settings, tp, start=5, stop=10, group="g", idle_timeout=3, pool=pool
            ) as reader,
        ):
            list(reader.batches())
        assert failed.value.tp == tp
        assert _librdkafka_lines(capfd.readouterr().err), "the failing read's lines are shown"
    finally:
        pool.clear()
        kafka.start()

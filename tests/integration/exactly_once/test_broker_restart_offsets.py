"""The driver's Kafka client across a broker restart, on Apache Kafka: a ``--follow``
session keeps one for all its batches. After the broker restarted, librdkafka's admin
client kept sending the partitions' leader epochs from before it, which the broker refuses
(FENCED_LEADER_EPOCH) for as long as the client lives: every later batch failed with
``cannot read the offsets …: Leader epoch is older than broker epoch`` and the session
archived nothing more until restarted. A lookup that fails now retries on a new client."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from archive_helpers import produce_to
from kafka_broker import KafkaBroker

from kafka_archive.archiver.config.settings import KafkaSettings
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.kafka.admin import KafkaAdmin

pytestmark = pytest.mark.integration


def test_offsets_are_read_again_after_a_broker_restart_by_the_same_driver_client(
    kafka: KafkaBroker, broker: str, topic: Callable[..., str]
) -> None:
    name = topic(partitions=2)
    produce_to(broker, name, 10)
    tps = [TopicPartition(name, p) for p in (0, 1)]
    with KafkaAdmin(KafkaSettings(broker), "restart-test") as admin:
        assert {admin.offsets(tps)[tp].high for tp in tps} == {5}
        try:
            kafka.stop()
        finally:
            kafka.start()
        produce_to(broker, name, 10, first=10)
        started = time.monotonic()
        offsets = admin.offsets(tps)
        assert {offsets[tp].high for tp in tps} == {10}
        assert time.monotonic() - started < 55, "not after the lookup's own minute of retries"

"""Driver-side Kafka calls: topics and partitions, the stop offset of a run, group commits."""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_archive.archiver.errors import KafkaUnavailableError, TopicNotFoundError
from kafka_archive.archiver.kafka.reader import consumer_config
from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.settings import KafkaSettings

_METADATA_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class Watermarks:
    low: int
    high: int


class KafkaAdmin:
    """One consumer handle for the driver's metadata, offset and commit requests."""

    def __init__(self, kafka: KafkaSettings, group: str) -> None:
        self._kafka = kafka
        self._consumer = Consumer(consumer_config(kafka, group))

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._consumer.close()

    def _metadata(self) -> Any:
        """The cluster's metadata for all topics (never by name: that may auto-create)."""
        try:
            return self._consumer.list_topics(timeout=_METADATA_TIMEOUT)
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"cannot reach Kafka at {self._kafka.bootstrap_servers}: {exc.args[0].str()}",
                hint="Check --bootstrap-servers and that the brokers are up",
            ) from None

    def topic_names(self) -> tuple[str, ...]:
        """Every topic on the cluster except internal ones (``__consumer_offsets``, …)."""
        return tuple(sorted(t for t in self._metadata().topics if not t.startswith("__")))

    def partitions(self, topics: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
        """Partition numbers of each topic; a missing topic is an error, never auto-created."""
        metadata = self._metadata()
        found: dict[str, tuple[int, ...]] = {}
        for topic in topics:
            meta = metadata.topics.get(topic)
            if meta is None or (meta.error is not None and meta.error.code() in (
                KafkaError.UNKNOWN_TOPIC_OR_PART,
            )):
                raise TopicNotFoundError(
                    f"topic {topic!r} does not exist on {self._kafka.bootstrap_servers}",
                    hint="Check the topic name in the FROM clause",
                )
            found[topic] = tuple(sorted(meta.partitions))
        return found

    def watermarks(self, tp: TopicPartition, start: int) -> Watermarks:
        """The low and high watermark of a partition, as a fetch from ``start`` reports them.

        The high watermark comes from a fetch response (librdkafka's cached value after a
        consume), not from a ListOffsets request: that is what the consumer will see, and
        some Kafka-protocol brokers answer ListOffsets with a stale value.
        """
        ktp = KafkaTopicPartition(tp.topic, tp.partition)
        try:
            low, listed_high = self._consumer.get_watermark_offsets(ktp, timeout=_METADATA_TIMEOUT)
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"cannot read offsets of {tp}: {exc.args[0].str()}",
                hint="Check that the brokers are up",
            ) from None
        if listed_high <= low:
            return Watermarks(low, listed_high)
        position = min(max(start, low), max(listed_high - 1, low))
        self._consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, position)])
        try:
            for _ in range(50):
                messages = self._consumer.consume(1, 0.2)
                if messages:
                    break
            _, fetched_high = self._consumer.get_watermark_offsets(ktp, cached=True)
        finally:
            self._consumer.unassign()
        high = max(listed_high, fetched_high if fetched_high is not None else -1)
        return Watermarks(low, high)

    def offset_for_time(self, tp: TopicPartition, timestamp_ms: int) -> int | None:
        """The first offset whose record time is at or after ``timestamp_ms`` (None: none)."""
        query = KafkaTopicPartition(tp.topic, tp.partition, timestamp_ms)
        try:
            (found,) = self._consumer.offsets_for_times([query], timeout=_METADATA_TIMEOUT)
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"cannot look up offsets by time for {tp}: {exc.args[0].str()}"
            ) from None
        offset = found.offset
        return None if offset is None or offset < 0 else int(offset)

    def group_offset(self, tp: TopicPartition, group: str) -> int | None:
        """The next offset ``group`` committed for ``tp`` (None: nothing committed)."""
        other = Consumer(
            self._kafka.client_config(defaults={}, fixed={"group.id": group,
                                                           "enable.auto.commit": False})
        )
        try:
            (found,) = other.committed(
                [KafkaTopicPartition(tp.topic, tp.partition)], timeout=_METADATA_TIMEOUT
            )
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"cannot read committed offsets of group {group!r}: {exc.args[0].str()}"
            ) from None
        finally:
            other.close()
        offset = found.offset
        return None if offset is None or offset < 0 else int(offset)

    def commit_group(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit next offsets to the consumer group so lag tools see progress."""
        if not offsets:
            return
        self._consumer.commit(
            offsets=[KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()],
            asynchronous=False,
        )

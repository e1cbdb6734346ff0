"""Read one partition's offset range ``[start, stop)`` with confluent-kafka (librdkafka)."""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_archive.archiver.errors import KafkaReadError
from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.records import Record
from kafka_archive.archiver.settings import KafkaSettings

# librdkafka's consume() waits for the full timeout when a batch is not filled, even after a
# partition EOF event, so poll in short slices and decide when to stop ourselves.
_POLL_SECONDS = 0.2
_BATCH = 10_000


def consumer_config(kafka: KafkaSettings, group: str) -> dict[str, Any]:
    """The librdkafka config for reading ranges with assign(): no group join, no auto commit."""
    return kafka.client_config(
        defaults={
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            # librdkafka's read-ahead per task: bounds memory (see README, Performance).
            "queued.max.messages.kbytes": 32 * 1024,
            "fetch.queue.backoff.ms": 10,
        },
        fixed={
            "group.id": group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            # An offset that is gone (retention) must be an error, never a silent jump.
            "auto.offset.reset": "error",
        },
    )


def to_record(message: Any) -> Record:
    ts_type, ts = message.timestamp()
    headers = message.headers()
    return Record(
        topic=message.topic(),
        partition=message.partition(),
        offset=message.offset(),
        timestamp=ts if ts_type != 0 else None,
        key=message.key(),
        value=message.value(),
        headers=tuple(headers) if headers else (),
    )


class Batch:
    """Consecutive records of one partition, as the client returned them.

    The hot path reads columns (``values``, ``offsets``, ``timestamps``) without building a
    :class:`Record` per message; iterating yields records (built once, on first use).
    """

    __slots__ = ("_messages", "_records")

    def __init__(self, messages: list[Any]) -> None:
        self._messages = messages
        self._records: list[Record] | None = None

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    @property
    def first_offset(self) -> int:
        return _offset_of(self._messages[0])

    def records(self) -> list[Record]:
        if self._records is None:
            self._records = [to_record(m) for m in self._messages]
        return self._records

    def values(self) -> list[bytes | None]:
        return [m.value() for m in self._messages]

    def offsets(self) -> list[int]:
        return [m.offset() for m in self._messages]

    def timestamps(self) -> list[int | None]:
        return [ts if kind != 0 else None for kind, ts in (m.timestamp() for m in self._messages)]


class KafkaReader:
    """Yields batches of records of one partition from ``start`` until ``stop`` (exclusive).

    The range ends when a record at ``stop - 1`` or beyond arrives, or when the partition
    EOF event reports a position at or beyond ``stop`` (offsets may have gaps: compaction,
    transaction markers), or before the first record whose timestamp is at or after
    ``until_ms``. ``next_offset`` then says where the next read starts. No data for
    ``idle_timeout`` seconds is an error.
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        tp: TopicPartition,
        *,
        start: int,
        stop: int,
        group: str,
        idle_timeout: float = 60.0,
        until_ms: int | None = None,
    ) -> None:
        self._tp = tp
        self._start = start
        self._stop = stop
        self._until_ms = until_ms
        self.next_offset = start
        self._position = start
        self._idle_timeout = idle_timeout
        self._consumer = Consumer(consumer_config(kafka, group))

    def __enter__(self) -> KafkaReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._consumer.close()

    def batches(self) -> Iterator[Batch]:
        if self._start >= self._stop:
            return
        tp = self._tp
        self._consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, self._start)])
        self._position = self._start
        last_progress = time.monotonic()
        while self._position < self._stop:
            try:
                messages = self._consumer.consume(_BATCH, _POLL_SECONDS)
            except KafkaException as exc:
                raise KafkaReadError(
                    f"consume failed: {exc}", tp=tp, offset=self._position
                ) from None
            good = self._bounded(messages)
            self.next_offset = self._position
            if good:
                last_progress = time.monotonic()
                yield Batch(good)
            elif (
                self._position < self._stop
                and time.monotonic() - last_progress > self._idle_timeout
            ):
                raise KafkaReadError(
                    f"no data for {self._idle_timeout:.0f}s while reading up to offset "
                    f"{self._stop}",
                    tp=tp,
                    offset=self._position,
                    hint="Check that the brokers are up and reachable; the next run resumes "
                    "from the last committed offset",
                )

    def _bounded(self, messages: list[Any]) -> list[Any]:
        """The records of ``messages`` inside the range; moves the position past them.

        Whole-list operations (one comprehension, bisections) rather than a Python step
        per message: this runs for every record archived.
        """
        good = [m for m in messages if m.error() is None]
        if len(good) != len(messages):
            for message in messages:
                error = message.error()
                if error is None:
                    continue
                if error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaReadError(
                        f"broker error: {error.str()}",
                        tp=self._tp,
                        offset=self._position,
                        hint=_hint_for(error),
                    )
                # EOF at the high watermark; a compacted gap may reach past stop.
                self._position = max(self._position, min(message.offset() or 0, self._stop))
        if not good:
            return good
        stop = self._stop
        if good[-1].offset() >= stop:
            good = good[: bisect.bisect_left(good, stop, key=_offset_of)]
            self._position = stop
            if not good:
                return good
        if self._until_ms is not None:
            until = self._until_ms
            for i, message in enumerate(good):
                kind, ts = message.timestamp()
                if kind != 0 and ts >= until:
                    self._position = self._stop = message.offset()
                    return good[:i]
        self._position = max(self._position, good[-1].offset() + 1)
        return good


def _offset_of(message: Any) -> int:
    offset: int = message.offset()
    return offset


def _hint_for(error: Any) -> str | None:
    if error.code() == KafkaError._AUTO_OFFSET_RESET:
        return (
            "The offset to resume from is no longer retained by Kafka (retention or "
            "compaction removed it); records before the earliest retained offset are lost"
        )
    return None

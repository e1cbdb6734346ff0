"""Read one partition's offset range ``[start, stop)`` with confluent-kafka (librdkafka)."""

from __future__ import annotations

import bisect
import logging
import operator
import os
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kafka_archive.archiver.config.settings import KafkaSettings
from kafka_archive.archiver.core.errors import KafkaReadError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.core.pooling import Pool
from kafka_archive.archiver.core.record import Record

# librdkafka's consume() waits for the full timeout when a batch is not filled, even after a
# partition EOF event, so poll in short slices and decide when to stop ourselves.
_POLL_SECONDS = 0.2
# At most this long for a topic's metadata before a read (KafkaReader._learn_topic).
_METADATA_SECONDS = 5.0
# Records per consume(): about BATCH_BYTES of values, within [MIN_BATCH, MAX_BATCH]. A batch
# that stays in the CPU's cache while it is read, encoded and written costs less: measured
# on 1 KB values, consume() alone took 2.1 CPU-s per GB in batches of 10,000 records, 1.85
# of 5,000, 1.5 of 2,000, 1.45 of 1,000 (bench/RESULTS.md); small values keep batches
# large enough that the per-batch Python steps stay small.
BATCH_BYTES = 1 << 20
MIN_BATCH = 100
MAX_BATCH = 10_000
# Pause between polls while the client reports a transient error (broker restart, …).
_BACKOFF_FIRST = 0.2
_BACKOFF_MAX = 5.0

log = logging.getLogger(__name__)


def consumer_config(kafka: KafkaSettings, group: str) -> dict[str, Any]:
    """The librdkafka config for reading ranges with assign(): no group join, no auto commit.

    Transactional records are read ``read_committed`` unless the user says otherwise
    (``-X isolation.level=read_uncommitted``): aborted records never reach the archive, and
    a run ends at the last stable offset.
    """
    return kafka.client_config(
        defaults={
            "isolation.level": "read_committed",
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            # librdkafka's read-ahead per task: bounds memory (see README, Performance).
            "queued.max.messages.kbytes": 32 * 1024,
            "fetch.queue.backoff.ms": 10,
            # A unit ends at the partition's end, where the broker holds the last fetch up
            # to this long: a pooled consumer's next unit waits for it (500 ms by default:
            # +0.16 s a tiny unit, measured, bench/RESULTS.md).
            "fetch.wait.max.ms": 100,
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


def reads_committed(config: dict[str, Any]) -> bool:
    """Whether a consumer of ``config`` sees only committed transactional records."""
    return str(config.get("isolation.level", "read_committed")) == "read_committed"


# Client errors that a broker restart, a leader moving or a short network outage cause:
# worth another try within a bound. librdkafka marks many of them retriable itself.
TRANSIENT_ERRORS = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._TIMED_OUT,
        KafkaError._RESOLVE,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


def is_transient(error: Any) -> bool:
    """Whether a :class:`confluent_kafka.KafkaError` may go away when tried again."""
    return bool(error.retriable()) or error.code() in TRANSIENT_ERRORS


def batch_size(records: int, value_bytes: int) -> int:
    """The records to ask for next, after a batch of ``records`` holding ``value_bytes``
    bytes of values: about :data:`BATCH_BYTES`, within [MIN_BATCH, MAX_BATCH]."""
    if records <= 0:
        return MAX_BATCH
    average = max(1, value_bytes // records)
    return max(MIN_BATCH, min(MAX_BATCH, BATCH_BYTES // average))


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

    def offset_at(self, index: int) -> int:
        return _offset_of(self._messages[index])

    def timestamp_at(self, index: int) -> int | None:
        kind, ts = self._messages[index].timestamp()
        return ts if kind != 0 else None

    def latest_timestamp(self) -> int:
        """No record of the batch has a later timestamp (-1 when none has one), in C: the
        client gives a record without one as -1, below any real one."""
        messages = self._messages
        if not messages:
            return -1
        timestamp = type(messages[0]).timestamp
        latest: int = max(map(_SECOND, map(timestamp, messages)))
        return latest


_SECOND = operator.itemgetter(1)

# Idle consumers kept per process (a Spark worker runs many units, often several at once).
MAX_IDLE_CONSUMERS = 16
# An idle consumer is closed after this long: its connections, and its reconnects to a
# broker that went away, end with it.
MAX_IDLE_SECONDS = 60.0
# Python's logging levels back to librdkafka's (syslog) levels, for ClientLog's lines.
_SYSLOG_LEVELS = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6}


class ClientLog:
    """librdkafka's log of one pooled consumer: on stderr while a reader uses the consumer,
    dropped while it is idle in the pool.

    An idle consumer stays connected; when the broker goes away (a restart between two
    ``--follow`` batches, the end of a test's broker) it reconnects and logs each failure,
    up to ~20 lines a second (measured), while no read of ours is affected. Given as the
    consumer's ``logger``, the lines wait in the consumer's queue and are served by its
    poll() and consume() calls: during a read, each within its poll slice or back-off, in
    librdkafka's own format (stamped when served; NOTICE shown as INFO); those queued while
    it was idle are served by :func:`_reuse` and dropped.
    """

    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = True

    def log(self, level: int, msg: str, *args: Any) -> None:
        if not self.active:
            return
        syslog = _SYSLOG_LEVELS.get(level, 7)
        if len(args) == 3:  # confluent-kafka passes (facility, client name, text)
            facility, name, text = args
            line = f"%{syslog}|{time.time():.3f}|{facility}|{name}| {text}\n"
        else:
            line = f"%{syslog}|{time.time():.3f}|{msg % args}\n"
        data = line.encode(errors="replace")
        try:
            while data:
                data = data[os.write(2, data) :]
        except OSError:  # our stderr closed: the line is lost
            pass


class PooledConsumer(Consumer):
    """A consumer of the pool, with its :class:`ClientLog`."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.client_log = ClientLog()
        # Topics whose metadata this consumer holds (:meth:`KafkaReader.batches`).
        self.known_topics: set[str] = set()
        super().__init__({**config, "logger": self.client_log})


def consumer_key(config: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """Consumers of equal librdkafka configs are interchangeable."""
    return tuple(sorted((str(k), repr(v)) for k, v in config.items()))


def _reset(consumer: PooledConsumer) -> bool:
    # Unassigned, librdkafka drops what it fetched for the old assignment; the next reader
    # assigns its own partition and offset. An exception: the consumer is closed.
    consumer.unassign()
    consumer.client_log.active = False
    return True


def _reuse(consumer: PooledConsumer) -> None:
    # What the consumer logged and the errors it met while idle are stale: served, dropped.
    for _ in range(1000):
        if consumer.poll(0) is None:
            break
    consumer.client_log.active = True


def _close(consumer: PooledConsumer) -> None:
    consumer.close()


ConsumerPool = Pool[dict[str, Any], PooledConsumer]


def consumer_pool(max_idle_seconds: float = MAX_IDLE_SECONDS) -> ConsumerPool:
    """Consumers of this process reused from one unit to the next, by librdkafka config.

    Making a consumer and its first fetch (metadata, connecting) cost ~0.2 s, most of a
    small unit's time. A consumer is used by one reader at a time; given back, it is
    unassigned and its log muted (:class:`ClientLog`); one that failed is closed, never
    given back (:class:`KafkaReader`). Idle ones are closed after ``max_idle_seconds``,
    at exit, and forgotten by a forked child
    (:mod:`kafka_archive.archiver.core.pooling`).
    """
    return Pool(
        PooledConsumer,
        consumer_key,
        reset=_reset,
        close=_close,
        reuse=_reuse,
        max_idle=MAX_IDLE_CONSUMERS,
        max_idle_seconds=max_idle_seconds,
    )


# The process's pool, used by the units of Spark tasks (archiver.task).
CONSUMERS = consumer_pool()


class KafkaReader:
    """Yields batches of records of one partition from ``start`` until ``stop`` (exclusive).

    The range ends when a record at ``stop - 1`` or beyond arrives, or when the partition
    EOF event reports a position at or beyond ``stop`` (offsets may have gaps: compaction,
    transaction markers), or before the first record whose timestamp is at or after
    ``until_ms``. ``next_offset`` then says where the next read starts. Transient client
    errors are ridden out with back-off; no data for ``idle_timeout`` seconds is an error.
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
        pool: ConsumerPool | None = None,
    ) -> None:
        self._tp = tp
        self._start = start
        self._stop = stop
        self._until_ms = until_ms
        self.next_offset = start
        self._position = start
        self._idle_timeout = idle_timeout
        # The last transient client error since the last record, if any.
        self._outage: str | None = None
        # Whether the consumer saw no error and may serve the next reader (pool).
        self._reusable = pool is not None
        self._pool = pool
        self._config = consumer_config(kafka, group)
        self._consumer: Any = (
            pool.take(self._config) if pool is not None else Consumer(self._config)
        )

    def __enter__(self) -> KafkaReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self._reusable = False
        self.close()

    def close(self) -> None:
        """Close the consumer, or give it back to the pool when it saw no error."""
        if self._pool is not None and self._reusable:
            self._reusable = False
            self._pool.give(self._config, self._consumer)
        else:
            self._consumer.close()

    def _learn_topic(self, topic: str) -> None:
        """Ask for ``topic``'s metadata before assigning a partition of it, unless this
        (pooled) consumer has it. Assigned a partition of a topic it has no metadata for,
        librdkafka fetched its first records ~0.55 s later than for a topic it knows
        (measured against Apache Kafka 4.1.1: 0.65-0.69 s against 0.10-0.11 s); the request
        costs ~0.1 s, once per consumer and topic. What fails here is met again, and
        reported, by the read."""
        known = getattr(self._consumer, "known_topics", None)
        if known is not None and topic in known:
            return
        try:
            self._consumer.list_topics(topic, timeout=min(_METADATA_SECONDS, self._idle_timeout))
        except KafkaException:
            return
        if known is not None:
            known.add(topic)

    def batches(self) -> Iterator[Batch]:
        if self._start >= self._stop:
            return
        tp = self._tp
        self._learn_topic(tp.topic)
        self._consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, self._start)])
        self._position = self._start
        last_progress = renewed = time.monotonic()
        self._outage = None
        backoff = _BACKOFF_FIRST
        size = MAX_BATCH
        while self._position < self._stop:
            try:
                messages = self._next_messages(size)
            except KafkaException as exc:
                if not is_transient(exc.args[0]):
                    raise KafkaReadError(
                        f"consume failed: {exc}", tp=tp, offset=self._position
                    ) from None
                self._outage = exc.args[0].str()
                self._reusable = False
                messages = []
            good = self._bounded(messages)
            self.next_offset = self._position
            if good:
                last_progress = time.monotonic()
                if self._outage is not None:
                    log.info(
                        "%s: reading again at offset %d after: %s",
                        tp,
                        good[0].offset(),
                        self._outage,
                    )
                self._outage = None
                backoff = _BACKOFF_FIRST
                size = batch_size(len(good), _value_bytes(good))
                yield Batch(good)
            elif self._position < self._stop:
                idle = time.monotonic() - last_progress
                if idle > self._idle_timeout:
                    cause = f" (last error: {self._outage})" if self._outage else ""
                    raise KafkaReadError(
                        f"no data for {self._idle_timeout:.0f}s while reading up to offset "
                        f"{self._stop}{cause}",
                        tp=tp,
                        offset=self._position,
                        hint="Check that the brokers are up and reachable; the next run "
                        "resumes from the last committed offset",
                    )
                if time.monotonic() - max(last_progress, renewed) > self._idle_timeout / 3:
                    self._renew(idle)
                    renewed = time.monotonic()
                if self._outage is not None:
                    # The client reconnects and fetches again by itself; give it time.
                    time.sleep(backoff)
                    backoff = min(backoff * 2, _BACKOFF_MAX)

    def _renew(self, idle: float) -> None:
        """Read on with a new consumer from the position. After a broker restart librdkafka's
        consumer may stay silent for good (no record, no error: confluentinc/librdkafka#5153;
        seen here: of a task's two consumers, one read again as the broker was back, the
        other nothing until replaced, then at once), which a new client mends; a consumer
        that was merely slow costs a reconnect."""
        log.info(
            "%s: no data for %.0f s at offset %d: reading on with a new Kafka consumer",
            self._tp,
            idle,
            self._position,
        )
        stuck, self._reusable = self._consumer, False
        self._consumer = PooledConsumer(self._config) if self._pool else Consumer(self._config)
        stuck.close()
        self._learn_topic(self._tp.topic)
        self._consumer.assign(
            [KafkaTopicPartition(self._tp.topic, self._tp.partition, self._position)]
        )

    def _next_messages(self, size: int) -> list[Any]:
        """Up to ``size`` messages (records and events): those queued now, else the first to
        arrive within :data:`_POLL_SECONDS` with those queued behind it. consume() with a
        timeout would wait all of it for a batch it cannot fill: a unit of a few records
        then took 0.2 s more (measured, bench/RESULTS.md)."""
        consumer = self._consumer
        messages: list[Any] = consumer.consume(size, 0)
        if messages:
            return messages
        first = consumer.poll(_POLL_SECONDS)
        if first is None:
            return messages
        messages = [first]
        if size > 1:
            messages += consumer.consume(size - 1, 0)
        return messages

    def _bounded(self, messages: list[Any]) -> list[Any]:
        """The records of ``messages`` inside the range; moves the position past them.

        Whole-list operations (one comprehension, bisections) rather than a Python step
        per message: this runs for every record archived. Transient client errors (a broker
        restarting, a leader moving) are noted and read past: librdkafka fetches again from
        its position once the partition's leader answers, within the idle timeout.
        """
        # The position before this list's EOF events move it: records of the same list
        # that come before such an event are still ours (see _own).
        before = self._position
        good = [m for m in messages if m.error() is None]
        if len(good) != len(messages):
            for message in messages:
                error = message.error()
                if error is None:
                    continue
                code = error.code()
                if code == KafkaError._PARTITION_EOF:
                    # EOF at the end (the LSO under read_committed): a gap of compaction,
                    # aborted records or transaction markers may reach past stop. Only this
                    # partition's (a pooled consumer's earlier assignment is not ours).
                    if (message.topic(), message.partition()) == (
                        self._tp.topic,
                        self._tp.partition,
                    ):
                        self._position = max(self._position, min(message.offset() or 0, self._stop))
                elif is_transient(error):
                    self._outage = error.str()
                    self._reusable = False
                else:
                    raise KafkaReadError(
                        f"broker error: {error.str()}",
                        tp=self._tp,
                        offset=self._position,
                        hint=_hint_for(error),
                    )
        if not good:
            return good
        good = self._own(good, before)
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

    def _own(self, good: list[Any], position: int) -> list[Any]:
        """``good`` without any message of another partition or before the position.

        A pooled consumer served another assignment before this one; librdkafka discards
        what it fetched for that (version barriers), and this check makes the archive not
        depend on it: two O(1) probes per batch, a filter only when one fails.
        """
        topic, partition = self._tp.topic, self._tp.partition
        first, last = good[0], good[-1]
        if (
            first.partition() != partition
            or last.partition() != partition
            or first.topic() != topic
            or last.topic() != topic
        ):
            good = [m for m in good if m.partition() == partition and m.topic() == topic]
            if not good:
                return good
        if good[0].offset() < position:
            good = good[bisect.bisect_left(good, position, key=_offset_of) :]
        return good


# Values whose lengths estimate a batch's bytes (batch_size): summing them all cost ~0.04
# CPU-s per million records, and the next batch's size needs no more than an estimate.
_SAMPLED_VALUES = 64


def _value_bytes(messages: list[Any]) -> int:
    """The bytes of the messages' values, estimated from up to :data:`_SAMPLED_VALUES` of
    them evenly spread (len(message): its value's length in confluent-kafka, summed in C)."""
    sample = messages[:: max(1, len(messages) // _SAMPLED_VALUES)]
    return sum(map(len, sample)) * len(messages) // max(1, len(sample))


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

"""Driver-side Kafka calls: topics and partitions, the stop offset of a run, group commits."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]

from kafka_archive.archiver.config.settings import KafkaSettings
from kafka_archive.archiver.core.errors import KafkaUnavailableError, TopicNotFoundError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.core.pooling import Pool
from kafka_archive.archiver.kafka.reader import (
    consumer_config,
    consumer_key,
    is_transient,
    reads_committed,
)

# librdkafka's own log lines of the driver's clients (a refused connection logs every 50 ms):
# the CLI shows them with --debug; what fails reaches the user as one error.
LIBRDKAFKA_LOG = logging.getLogger("kafka_archive.librdkafka")

_METADATA_TIMEOUT = 10.0
# The times an offset lookup asks for (ListOffsets): the earliest offset, and the latest.
_EARLIEST, _LATEST = -2, -1
# How long offset lookups ride out a broker that restarts or a leader that moves.
_OFFSETS_DEADLINE = 60.0
# How long the consumer group mirror of a run's commits is retried (it only serves lag tools).
_COMMIT_DEADLINE = 30.0
# Partitions per commit request of that mirror (see KafkaAdmin.commit_group).
_COMMIT_CHUNK = 1000

# The demo's embedded broker (tansu, ``make demo``) answers ListOffsets with a stale high
# watermark. Its callers (samples/demo.py, bench/run.py, the demo smoke test) set this
# variable, and only then does the driver learn each end offset from a fetch instead (one
# partition at a time: slow, and never on a real Kafka's path). See _fetched_end.
DEMO_BROKER_ENV = "KAFKA_ARCHIVE_DEMO_BROKER"
# The id a broker without topic ids reports (Uuid zero, base64).
_NO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Watermarks:
    """A partition's offsets: ``low`` (log start), ``high`` (high watermark) and ``end``,
    where a read stops: the last stable offset under ``read_committed`` (before the first
    record of a transaction still open), else the high watermark."""

    low: int
    high: int
    end: int


class KafkaAdmin:
    """The driver's metadata, offset and commit requests: a consumer handle (metadata,
    offsets by time, group commits) and an admin client (batched offset lookups)."""

    def __init__(self, kafka: KafkaSettings, group: str) -> None:
        self._kafka, self._group = kafka, group
        config = consumer_config(kafka, group)
        self._read_committed = reads_committed(config)
        self._consumer = Consumer({**config, "logger": LIBRDKAFKA_LOG})
        self._admin: AdminClient | None = None
        # Admin clients replaced after a failure, kept until __exit__ drops them (below).
        self._retired: list[AdminClient] = []
        # The offset lookups' consumers, by read_committed (:meth:`offsets`).
        self._lookups: dict[bool, Consumer] = {}

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._consumer.close()
        self._close_lookups()
        # The admin clients are destroyed here, in this thread. Left to the garbage collector
        # (this object in an exception's reference cycle: any error leaving a
        # contextlib-managed block makes one), a client is destroyed in whatever thread runs
        # the collection, also a librdkafka thread delivering another client's admin result,
        # and librdkafka aborts the process there ("calling rd_kafka_destroy() from
        # librdkafka owned thread is prohibited"): exit -6 instead of the error's code.
        self._admin = None
        self._retired.clear()

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
            if meta is None or (
                meta.error is not None and meta.error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,)
            ):
                raise TopicNotFoundError(
                    f"topic {topic!r} does not exist on {self._kafka.bootstrap_servers}",
                    hint="Check the topic name in the FROM clause (or in --topics / topics: "
                    "for FROM `*`)",
                )
            found[topic] = tuple(sorted(meta.partitions))
        return found

    def watermarks(self, tp: TopicPartition, start: int = 0) -> Watermarks:
        """The offsets of one partition (see :meth:`offsets` for many at once).

        ``start`` is ignored (kept for callers from when the end came from a fetch there).
        """
        return self.offsets([tp])[tp]

    def offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Watermarks]:
        """Low, high and end offsets of every partition in ``tps``, in batched requests.

        Three ListOffsets lookups (earliest; latest; and latest under ``read_committed``,
        the last stable offset), each one request per partition leader for all partitions
        at once: a consumer's ``offsets_for_times`` (-2, -1) under the isolation level of
        each, which answers with one list, where the admin client's ``list_offsets`` makes
        a Python future per partition (10,000 partitions: 30,000 futures, 26 s of a
        profiled no-op run). Retriable errors (a leader moving, a broker restarting) are
        retried with back-off for up to a minute, on new clients.
        """
        wanted = sorted(set(tps))
        if not wanted:
            return {}
        if os.environ.get(DEMO_BROKER_ENV) == "tansu":
            return {tp: self._fetched_end(tp) for tp in wanted}
        lookups: dict[str, tuple[int, bool]] = {"low": (_EARLIEST, False), "high": (_LATEST, False)}
        if self._read_committed:
            lookups["end"] = (_LATEST, True)
        found = self._retried(
            lambda: self._listed(wanted, lookups),
            f"cannot read the offsets of {len(wanted)} partition(s)",
            topics={tp.topic for tp in wanted},
        )
        end = found.get("end", found["high"])
        return {tp: Watermarks(found["low"][tp], found["high"][tp], end[tp]) for tp in wanted}

    def _listed(
        self, tps: list[TopicPartition], lookups: Mapping[str, tuple[int, bool]]
    ) -> dict[str, dict[TopicPartition, int]]:
        """Each lookup of ``lookups`` (name: the time it asks for, earliest or latest, and
        whether under read_committed) for every partition of ``tps``; a partition's error
        raised as the call's (after every lookup was answered)."""
        asked = [KafkaTopicPartition(tp.topic, tp.partition) for tp in tps]
        found: dict[str, dict[TopicPartition, int]] = {}
        failed: Any = None
        for name, (at, committed) in lookups.items():
            for answer in self._lookup_consumer(committed).offsets_for_times(
                [KafkaTopicPartition(k.topic, k.partition, at) for k in asked],
                timeout=_METADATA_TIMEOUT,
            ):
                if answer.error is not None:
                    failed = failed or answer.error
                found.setdefault(name, {})[TopicPartition(answer.topic, answer.partition)] = int(
                    answer.offset
                )
        if failed is not None:
            raise KafkaException(failed)
        return found

    def _lookup_consumer(self, committed: bool) -> Consumer:
        """The consumer of the offset lookups under read_committed or read_uncommitted
        (made on first use; replaced after a failure, as the admin client)."""
        consumer = self._lookups.get(committed)
        if consumer is None:
            config = consumer_config(self._kafka, self._group)
            config["isolation.level"] = "read_committed" if committed else "read_uncommitted"
            consumer = self._lookups[committed] = Consumer({**config, "logger": LIBRDKAFKA_LOG})
        return consumer

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        """Kafka's id of each topic (a topic deleted and re-created under its name has
        another): one DescribeTopics request, retried like :meth:`offsets`. A topic the
        cluster tells no id of (a broker before Kafka 2.8, the demo's, a topic this client
        may not describe) is left out."""
        wanted = sorted(set(topics))
        if not wanted or os.environ.get(DEMO_BROKER_ENV) == "tansu":
            return {}
        found: dict[str, str] = {}  # kept across attempts: a retry asks only for the rest

        def describe(admin: AdminClient) -> dict[str, str]:
            futures = admin.describe_topics(
                TopicCollection([t for t in wanted if t not in found]),
                request_timeout=_METADATA_TIMEOUT,
            )
            for name, future in futures.items():
                try:
                    topic_id = str(future.result().topic_id)
                except KafkaException as exc:
                    if is_transient(exc.args[0]):
                        raise
                    topic_id = ""  # not authorized to describe it, say: not checked
                found[name] = topic_id
            return {name: i for name, i in found.items() if i and i != _NO_TOPIC_ID}

        return self._retried(
            lambda: describe(self._admin_client()), f"cannot describe {len(wanted)} topic(s)"
        )

    def compacted(self, topics: Iterable[str]) -> set[str]:
        """Those of ``topics`` whose ``cleanup.policy`` compacts (``compact`` or
        ``compact,delete``): the log cleaner removes records from them after they were
        read. A topic whose configuration cannot be read is taken as not compacted."""
        wanted = sorted(set(topics))
        if not wanted or os.environ.get(DEMO_BROKER_ENV) == "tansu":
            return set()
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in wanted]
        found: set[str] = set()
        futures = self._admin_client().describe_configs(
            resources, request_timeout=_METADATA_TIMEOUT
        )
        for resource, future in futures.items():
            try:
                entry = future.result().get("cleanup.policy")
            except KafkaException:
                continue
            if entry is not None and "compact" in str(entry.value or ""):
                found.add(resource.name)
        return found

    def _close_lookups(self) -> None:
        lookups, self._lookups = self._lookups, {}
        for consumer in lookups.values():
            consumer.close()

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            config = self._kafka.client_config(defaults={}, fixed={"logger": LIBRDKAFKA_LOG})
            self._admin = AdminClient(config)
        return self._admin

    def _retried(self, attempt: Callable[[], _T], failure: str, topics: Iterable[str] = ()) -> _T:
        """``attempt`` (on the admin client or the lookup consumers), again (with backoff, up
        to the offsets' deadline, on new clients) while it fails with a transient error; then
        KafkaUnavailableError(``failure``). An unknown topic or partition is not waited out
        when one of ``topics`` is gone (deleted since it was found): TopicNotFoundError at
        once."""
        deadline = time.monotonic() + _OFFSETS_DEADLINE
        delay = 0.2
        while True:
            try:
                return attempt()
            except KafkaException as exc:
                error = exc.args[0]
            # Decided out of the except clause: an error raised in it would keep the failed
            # attempt's frames, and with them the client, alive in its context.
            if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and topics:
                gone = sorted(set(topics) - set(self.topic_names()))
                if gone:
                    raise TopicNotFoundError(
                        f"topic {gone[0]!r} does not exist on "
                        f"{self._kafka.bootstrap_servers} (any more)",
                        hint="It was deleted since the run found it",
                    )
            # The next attempt (or batch) on a new client: after a broker restart this one
            # keeps sending leader epochs from before it, refused (FENCED_LEADER_EPOCH) for
            # as long as it lives.
            if self._admin is not None:
                self._retired.append(self._admin)
            self._admin = None
            self._close_lookups()
            # "No leaders found" (_NOENT): a broker that just started has not elected them.
            transient = is_transient(error) or error.code() == KafkaError._NOENT
            if not transient or time.monotonic() + delay > deadline:
                raise KafkaUnavailableError(
                    f"{failure}: {error.str()}", hint="Check that the brokers are up"
                )
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _fetched_end(self, tp: TopicPartition) -> Watermarks:
        """Demo broker only (tansu): the high watermark a fetch reports, not ListOffsets'.

        Assigns the partition, consumes a record and reads librdkafka's cached watermark:
        0.2-10 s per partition. tansu has no transactions to wait for: end is high.
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
            return Watermarks(low, listed_high, listed_high)
        self._consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, low)])
        try:
            for _ in range(50):
                if self._consumer.consume(1, 0.2):
                    break
            _, fetched_high = self._consumer.get_watermark_offsets(ktp, cached=True)
        finally:
            self._consumer.unassign()
        high = max(listed_high, fetched_high if fetched_high is not None else -1)
        return Watermarks(low, high, high)

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
            self._kafka.client_config(
                defaults={}, fixed={"group.id": group, "enable.auto.commit": False}
            )
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
        """Commit next offsets to the consumer group so lag tools see progress.

        At most ``_COMMIT_CHUNK`` partitions a request: the broker writes one commit as one
        batch to ``__consumer_offsets``, and 10,000 partitions' records (~1 MB) exceed its
        ``max.message.bytes`` (measured: "Unknown broker error")."""
        listed = [KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()]
        for first in range(0, len(listed), _COMMIT_CHUNK):
            self._commit(listed[first : first + _COMMIT_CHUNK])

    def _commit(self, offsets: list[KafkaTopicPartition]) -> None:
        deadline = time.monotonic() + _COMMIT_DEADLINE
        delay = 0.5
        while True:
            try:
                self._consumer.commit(offsets=offsets, asynchronous=False)
                return
            except KafkaException as exc:
                # A coordinator still loading after a broker restart, a moved coordinator.
                if not is_transient(exc.args[0]) or time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


# Executors: the admin clients that confirm a topic's id before a unit marks or commits
# (:class:`.state.identity.TopicProof`), reused from unit to unit like the consumers. Their
# librdkafka log goes nowhere: what fails is retried, then reported as one error.
_QUIET = logging.getLogger("kafka_archive.librdkafka.topic_ids")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def _task_admin_config(kafka: KafkaSettings) -> dict[str, Any]:
    return kafka.client_config(defaults={}, fixed={"logger": _QUIET})


TASK_ADMINS: Pool[KafkaSettings, AdminClient] = Pool(
    lambda kafka: AdminClient(_task_admin_config(kafka)),
    lambda kafka: consumer_key(kafka.client_config(defaults={}, fixed={})),
    reset=lambda admin: True,
    max_idle=8,  # a task's unit threads (archiver.task.UNIT_THREADS) each take one
    max_idle_seconds=60.0,
)


def topic_id_now(kafka: KafkaSettings, topic: str, timeout: float) -> str | None:
    """Executor side: ``topic``'s Kafka id now (one DescribeTopics request on a pooled admin
    client); None when the topic does not exist, ``""`` when the cluster tells no id (as
    :meth:`KafkaAdmin.topic_ids` leaves such a topic out). Transient failures are tried again
    for up to ``timeout`` seconds, then KafkaUnavailableError."""
    deadline = time.monotonic() + timeout
    delay = 0.2
    while True:
        admin = TASK_ADMINS.take(kafka)
        try:
            future = admin.describe_topics(
                TopicCollection([topic]), request_timeout=min(_METADATA_TIMEOUT, timeout)
            )[topic]
            topic_id = str(future.result().topic_id)
        except KafkaException as exc:
            error = exc.args[0]
        else:
            TASK_ADMINS.give(kafka, admin)
            return "" if topic_id == _NO_TOPIC_ID else topic_id
        # Out of the except clause, as in KafkaAdmin._retried.
        if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            TASK_ADMINS.give(kafka, admin)
            return None
        if not is_transient(error):
            TASK_ADMINS.give(kafka, admin)
            return ""  # not authorized to describe it, say: not checked (as the driver)
        del admin  # not given back: a new client for the next attempt
        if time.monotonic() + delay > deadline:
            raise KafkaUnavailableError(
                f"cannot describe topic {topic!r}: {error.str()}",
                hint="Check that the brokers are up; the next run resumes from the last "
                "committed offset",
            )
        time.sleep(delay)
        delay = min(delay * 2, 5.0)

"""`kafka-archive restore`: archived records back into Kafka, exactly once and resumably."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import cli, run_args
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

pytestmark = pytest.mark.integration


def read_all(
    broker: str, topic: str, partitions: int, *, committed: bool = True
) -> dict[int, list[bytes | None]]:
    """Every record of ``topic`` by partition, as a read_committed consumer sees it (or a
    read_uncommitted one: ``committed=False``)."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": "test-reader",
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
    found: dict[int, list[bytes | None]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    for _ in range(200):
        for message in consumer.consume(1000, 0.2):
            if message.error() is not None:
                at_end.add(message.partition())
                continue
            found[message.partition()].append(message.value())
        if len(at_end) == partitions:
            break
    consumer.close()
    return found


@pytest.fixture
def archive(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> Callable[..., tuple[str, str, dict[int, list[bytes | None]]]]:
    """Archive values over partitions in ``fmt``; returns (topic, location, values by partition)."""

    def make(
        values: list[tuple[int, bytes | None]],
        partitions: int,
        fmt: str = "BYTES",
        flush: int = 100,
    ) -> tuple[str, str, dict[int, list[bytes | None]]]:
        name, bkt = topic(partitions=partitions), bucket()
        produce(name, ({"value": v, "partition": p} for p, v in values))
        kcql = (
            f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS {fmt} WITH_FLUSH_COUNT = {flush}"
        )
        code, _, err = cli(
            capsys,
            *run_args(kcql, broker, s3_endpoint),
        )
        assert code == 0, err
        by_partition: dict[int, list[bytes | None]] = {p: [] for p in range(partitions)}
        for partition, value in values:
            by_partition[partition].append(value)
        return name, f"{bkt}:arch", by_partition

    return make


def restore(
    capsys: pytest.CaptureFixture[str],
    broker: str,
    endpoint: str,
    name: str,
    location: str,
    to_topic: str,
    *args: str,
) -> tuple[int, str, str]:
    return cli(
        capsys,
        "restore",
        "--from",
        location,
        "--topic",
        name,
        "--to-topic",
        to_topic,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        endpoint,
        *args,
    )


def test_values_only_restore_puts_every_value_back_in_its_partition_in_order(
    archive: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    values = [(i % 2, json.dumps({"id": i}).encode()) for i in range(400)]
    values += [(0, b"\x00\xffbinary"), (1, None), (1, b"")]
    name, location, original = archive(values, partitions=2)
    target = topic(partitions=2)

    code, out, err = restore(capsys, broker, s3_endpoint, name, location, target, "--values-only")
    assert code == 0, err
    assert read_all(broker, target, 2) == original
    assert "total: 403 records" in out


def test_restore_without_envelope_asks_for_values_only_and_checks_partitions(
    archive: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, location, _ = archive([(p, b"v") for p in range(3)], partitions=3)
    small = topic(partitions=1)

    code, _, err = restore(capsys, broker, s3_endpoint, name, location, small)
    assert code == 2
    assert "stores values only" in err and "--values-only" in err

    code, _, err = restore(capsys, broker, s3_endpoint, name, location, small, "--values-only")
    assert code == 2
    assert "has 1 partition(s); the archive has partition(s) 1, 2" in err

    code, _, err = restore(
        capsys,
        broker,
        s3_endpoint,
        name,
        location,
        small,
        "--values-only",
        "--partition-map",
        "hash",
    )
    assert code == 0, err
    assert sorted(read_all(broker, small, 1)[0]) == [b"v", b"v", b"v"]

    code, _, err = restore(
        capsys, broker, s3_endpoint, name, location, "no-such-topic-x", "--values-only"
    )
    assert code == 4
    assert len(err.strip().splitlines()) == 1
    assert "create it first" in err and "--to-topic" in err and "FROM clause" not in err


def test_a_bounded_restore_resumes_where_it_stopped_without_duplicates(
    archive: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    values = [(0, str(i).encode()) for i in range(300)]
    name, location, original = archive(values, partitions=1, fmt="TEXT")
    target = topic(partitions=1)

    args = ("--values-only", "--max-records-per-partition", "120")
    code, out, err = restore(capsys, broker, s3_endpoint, name, location, target, *args)
    assert code == 0, err
    assert read_all(broker, target, 1)[0] == original[0][:120]

    code, out, err = restore(capsys, broker, s3_endpoint, name, location, target, "--values-only")
    assert code == 0, err
    assert "resumed at offset 120" in out
    assert read_all(broker, target, 1)[0] == original[0]

    code, out, err = restore(capsys, broker, s3_endpoint, name, location, target, "--values-only")
    assert code == 0, err
    assert "total: 0 records" in out
    assert read_all(broker, target, 1)[0] == original[0]


def test_offset_bounds_select_archived_offsets(
    archive: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    values = [(0, str(i).encode()) for i in range(250)]
    name, location, original = archive(values, partitions=1)
    target = topic(partitions=1)
    code, _, err = restore(
        capsys,
        broker,
        s3_endpoint,
        name,
        location,
        target,
        "--values-only",
        "--from-offset",
        "95",
        "--to-offset",
        "204",
    )
    assert code == 0, err
    assert read_all(broker, target, 1)[0] == original[0][95:205]


def test_records_of_a_crashed_restore_transaction_stay_invisible(
    archive: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    values = [(0, str(i).encode()) for i in range(50)]
    name, location, original = archive(values, partitions=1)
    target = topic(partitions=1)
    # A restore attempt that dies inside a transaction: records produced, never committed.
    transactional_id = f"kafka-archive.restore.{name}.0.to.{target}"
    crashed = Producer({"bootstrap.servers": broker, "transactional.id": transactional_id})
    # Generous timeouts: under heavy load the coordinator may answer late (a timed out
    # init_transactions leaves the producer in librdkafka's "Erroneous state").
    crashed.init_transactions(120)
    crashed.begin_transaction()
    for _, value in values[:10]:
        crashed.produce(target, value=value, partition=0)
    crashed.flush(120)
    # The records are in the log (a read_uncommitted consumer sees them), yet invisible to
    # a read_committed one while their transaction is open.
    assert read_all(broker, target, 1, committed=False)[0] == [v for _, v in values[:10]]
    assert read_all(broker, target, 1)[0] == []
    # The re-run fences that transactional id (its transaction is aborted) and restores all.
    code, _, err = restore(capsys, broker, s3_endpoint, name, location, target, "--values-only")
    assert code == 0, err
    assert read_all(broker, target, 1)[0] == original[0]
    # Aborted: the crashed attempt's records stay in the log but never become visible.
    assert read_all(broker, target, 1, committed=False)[0][:10] == [v for _, v in values[:10]]


def test_records_over_a_megabyte_are_restored_and_a_topic_too_small_for_them_is_named(
    broker: str,
    produce: Callable[..., None],
    admin: Any,
    s3_endpoint: str,
    spark: Any,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Values beyond librdkafka's default message.max.bytes (1 MB) that the source topic
    took are produced again (the target topic's limit decides, not the producer's default);
    a target whose max.message.bytes is too small is named, with what to change."""
    from confluent_kafka.admin import NewTopic

    def create(name: str, **config: str) -> str:
        admin.create_topics([NewTopic(name, 1, config=config)])[name].result(timeout=30)
        return name

    suffix = uuid.uuid4().hex[:8]
    big = {"max.message.bytes": str(4 << 20)}
    name, roomy = create(f"big-{suffix}", **big), create(f"roomy-{suffix}", **big)
    small = create(f"small-{suffix}")  # the broker's default max.message.bytes (~1 MB)
    values = [b"x" * 2_500_000, b"{}", os.urandom(1_200_000)]
    produce(name, ({"value": v} for v in values), message_max_bytes=4 << 20)
    bkt = bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS BYTES"
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err

    code, out, err = restore(
        capsys, broker, s3_endpoint, name, f"{bkt}:arch", roomy, "--values-only"
    )
    assert code == 0, err
    assert read_all(broker, roomy, 1) == {0: values}

    code, out, err = restore(
        capsys, broker, s3_endpoint, name, f"{bkt}:arch", small, "--values-only"
    )
    assert code == 11, out + err
    line = err.strip().splitlines()[-1]
    assert f"max.message.bytes of {small}" in line and "Traceback" not in err
    assert read_all(broker, small, 1) == {0: []}  # the failed batch's transaction aborted


@pytest.mark.full
def test_values_only_of_a_csv_archive_says_it_replays_rows(
    archive: Callable[..., Any],
    broker: str,
    s3_endpoint: str,
    topic: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A CSV archive holds rows, not the values produced: restored as rows, and said so (it
    went without a word)."""
    values = [(0, json.dumps({"id": i, "s": "x"}).encode()) for i in range(3)]
    name, location, _ = archive(values, partitions=1, fmt="CSV")
    target = topic(partitions=1)
    kcql = f"INSERT INTO {location} SELECT * FROM {name} STOREAS CSV"
    code, _, err = restore(
        capsys, broker, s3_endpoint, name, location, target, "--values-only", "--kcql", kcql
    )
    assert code == 0, err
    assert "CSV objects hold rows, not the values as produced" in err
    assert read_all(broker, target, 1)[0] == [b"0,x", b"1,x", b"2,x"]

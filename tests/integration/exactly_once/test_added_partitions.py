"""Partitions added to a topic after its route began (``kafka-topics --alter --partitions``),
on Apache Kafka: a follow session takes them in within a few poll intervals, and every run
starts them at offset 0 (their first record), whatever ``--start`` says; records Kafka
deleted from them before they were archived are a gap reported like any other (exit 16,
``--allow-gaps``), never skipped in silence. The archive is read back with boto3 + json."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, archived_ids, cli, process_group, run_args
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

pytestmark = pytest.mark.integration


def _add_partitions(admin: AdminClient, topic: str, total: int) -> None:
    futures = admin.create_partitions([NewPartitions(topic, total)])
    for future in futures.values():
        future.result(timeout=30)


def _delete_records(admin: AdminClient, topic: str, partition: int, before: int) -> None:
    futures = admin.delete_records([KafkaTopicPartition(topic, partition, before)])
    for future in futures.values():
        future.result(timeout=30)


def _to_new_partitions(ids: range) -> list[dict[str, Any]]:
    """Records ``{"id": i}``, even ids into partition 2, odd ones into partition 3."""
    return [{"value": json.dumps({"id": i}).encode(), "partition": 2 + i % 2} for i in ids]


def test_a_partition_added_since_the_first_run_starts_at_offset_0_and_a_lost_head_is_a_gap(
    broker: str,
    admin: AdminClient,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The first run (``--start latest``) pins partitions 0 and 1; partitions 2 and 3 are
    added, get 200 records each, and retention deletes offsets 0..49 of partition 2 before
    the next run. That run archives partition 3 from offset 0 and reports partition 2's
    lost head (exit 16) instead of starting it at its low watermark; with --allow-gaps the
    next one continues at 50 and records the gap in the partition's state."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 10)  # before the first run: left out by --start latest
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.count'=50)"
    args = [*run_args(kcql, broker, s3_endpoint), "--start", "latest"]
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    assert archived_ids(s3_client, bkt) == []

    _add_partitions(admin, name, 4)
    produce(name, _to_new_partitions(range(100, 500)))  # offsets 0..199 of 2 and of 3
    produce(name, 10, first=10)  # ids 10..19 into partitions 0 and 1
    _delete_records(admin, name, 2, 50)  # partition 2's offsets 0..49: never archived

    code, out, err = cli(capsys, *args)
    assert code == 16, (out, err)
    assert f"{name}-2: GAP offsets 0..49 (50 records) deleted by Kafka" in out, out
    assert "Traceback" not in err and "--allow-gaps" in err, err
    odd = list(range(101, 500, 2))  # partition 3, from its first record
    assert archived_ids(s3_client, bkt) == sorted([*range(10, 20), *odd])
    assert not _listed(s3_client, bkt, f"arch/{name}/2/"), "partition 2 stays where it was"

    code, out, err = cli(capsys, *args, "--allow-gaps")
    assert code == 0, (out, err)
    kept = list(range(200, 500, 2))  # partition 2 from offset 50 (id 200) on
    assert archived_ids(s3_client, bkt) == sorted([*range(10, 20), *odd, *kept])
    state = s3_client.get_object(Bucket=bkt, Key=f"arch/.kafka-archive/state/{name}/2.json")
    assert json.loads(state["Body"].read())["gaps"] == [[0, 49]]

    code, out, err = cli(capsys, *args)
    assert code == 0, (out, err)
    assert "GAP" not in out, out


def test_a_follow_session_takes_in_added_partitions_within_three_poll_intervals(
    broker: str,
    admin: AdminClient,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """A follow session of a topic with 2 partitions; the topic gets 2 more while it runs and
    400 records go into them. Every one is archived, once, within 3 poll intervals of the
    records' arrival (they were never archived before a restart)."""
    poll = 3.0
    name, bkt = topic(partitions=2), bucket()
    produce(name, 10)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.interval'=1)"
    args = [*run_args(kcql, broker, s3_endpoint), "--follow", "--poll-interval", str(poll)]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    with process_group([KAFKA_ARCHIVE, *args], env) as follow:
        _wait(lambda: archived_ids(s3_client, bkt) == list(range(10)), "the first records", 120)
        _add_partitions(admin, name, 4)
        produce(name, _to_new_partitions(range(100, 500)))
        arrived = time.monotonic()
        expected = [*range(10), *range(100, 500)]
        _wait(
            lambda: archived_ids(s3_client, bkt) == expected or follow.poll() is not None,
            "the added partitions' records",
            60,
        )
        taken_in = time.monotonic() - arrived
        print(f"the added partitions' records archived {taken_in:.1f} s after they arrived")
        follow.send_signal(signal.SIGTERM)
        _, err = follow.communicate(timeout=120)
    assert follow.returncode == 0, err
    assert archived_ids(s3_client, bkt) == expected, "each record exactly once"
    assert taken_in <= 3 * poll, f"taken in after {taken_in:.1f} s (poll interval {poll} s)"
    assert f"{name}: partition(s) 2, 3 added to the topic; they join the session" in err, err


def _listed(s3: Any, bucket: str, prefix: str) -> list[str]:
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])]


def _wait(predicate: Callable[[], bool], what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)

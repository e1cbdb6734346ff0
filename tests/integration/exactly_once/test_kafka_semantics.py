"""What an archive of a real Kafka must get right, on Apache Kafka itself.

Transactional topics (committed records only, up to the last stable offset; an open
transaction neither fails nor blocks a run), compacted topics (offset gaps, tombstones),
records deleted before they were archived (reported, exit 16 unless --allow-gaps), a topic
deleted and re-created (refused, exit 17) and a broker restart in the middle of a run.

Every archive is read back with boto3 + json (the JSON envelope keeps each record's offset)
and compared with what a plain ``read_committed`` consumer reads from Kafka.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import kafka_records
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_broker import KafkaBroker

from kafka_archive.archiver.config.settings import KafkaSettings
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.cli import main

pytestmark = pytest.mark.integration

Row = tuple[int, int, str | None, Any]
"""(partition, offset, key, value): one record, its value parsed as JSON (None: tombstone)."""

ENVELOPE = "STOREAS `JSON` PROPERTIES('store.envelope'=true)"


def archived(s3: Any, bucket: str, prefix: str = "arch/") -> list[Row]:
    """Every record in the data objects under ``prefix``, from the JSON envelope's lines."""
    rows: list[Row] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if "/.kafka-archive/" in item["Key"]:
                continue
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            for line in body.decode().splitlines():
                doc = json.loads(line)
                meta = doc["metadata"]
                rows.append((meta["partition"], meta["offset"], doc["key"], doc["value"]))
    return sorted(rows, key=lambda r: (r[0], r[1]))


def in_kafka(broker: str, topic: str, partitions: int = 1, committed: bool = True) -> list[Row]:
    """Every record a plain consumer reads (``read_committed`` unless told otherwise)."""
    return [
        (
            r.partition,
            r.offset,
            r.key.decode() if r.key is not None else None,
            json.loads(r.value) if r.value is not None else None,
        )
        for r in kafka_records(broker, topic, partitions, committed=committed)
    ]


def ids(rows: list[Row]) -> list[int]:
    return sorted(r[3]["id"] for r in rows if r[3] is not None)


def compact(document: Any) -> bytes:
    """Compact JSON, which the envelope stores as JSON (other bytes as text or base64)."""
    return json.dumps(document, separators=(",", ":")).encode()


def record(
    producer: Producer, topic: str, i: int, *, key: str | None = None, partition: int = 0
) -> None:
    producer.produce(
        topic, key=(key or f"k{i}").encode(), value=compact({"id": i}), partition=partition
    )


def transactional(broker: str, name: str) -> Producer:
    producer = Producer({"bootstrap.servers": broker, "transactional.id": name, "linger.ms": 5})
    producer.init_transactions(30)
    return producer


def run(
    capsys: pytest.CaptureFixture[str], broker: str, s3_endpoint: str, kcql: str, *extra: str
) -> tuple[int, str, str]:
    code = main(
        [
            "run",
            "--kcql",
            kcql,
            "--bootstrap-servers",
            broker,
            "--endpoint-url",
            s3_endpoint,
            *extra,
        ]
    )
    out, err = capsys.readouterr()
    return code, out, err


def test_a_transactional_topic_is_archived_with_committed_records_only(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    producer = transactional(broker, f"tx-{name}")
    plain = Producer({"bootstrap.servers": broker})
    for first, count, commit in ((0, 5, True), (100, 5, False), (7, 3, True), (200, 3, False)):
        if first == 7:  # non-transactional records between the transactions
            for i in (5, 6):
                record(plain, name, i)
            assert plain.flush(30) == 0
        producer.begin_transaction()
        for i in range(first, first + count):
            record(producer, name, i)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    # The log ends with an aborted transaction and its marker: offsets no consumer sees.
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} {ENVELOPE}"
    code, out, err = run(capsys, broker, s3_endpoint, kcql)
    assert code == 0, err
    rows = archived(s3_client, bkt)
    assert ids(rows) == list(range(10)), "committed and plain records, never aborted ones"
    assert rows == in_kafka(broker, name)
    assert len(in_kafka(broker, name, committed=False)) == 18  # the aborted ones are in the log
    # The run ended past the markers: nothing is left to read.
    code, out, err = run(capsys, broker, s3_endpoint, kcql)
    assert code == 0, err
    assert "nothing new" in out
    assert archived(s3_client, bkt) == rows


def test_an_open_transaction_neither_fails_nor_blocks_a_run(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    name, bkt = topic(partitions=2), bucket()
    committed = transactional(broker, f"tx-a-{name}")
    committed.begin_transaction()
    for i in range(10):
        record(committed, name, i, partition=i % 2)
    committed.flush(30)
    committed.commit_transaction(30)
    open_tx = transactional(broker, f"tx-b-{name}")
    open_tx.begin_transaction()
    for i in range(10, 14):  # left open on partition 0 only
        record(open_tx, name, i, partition=0)
    open_tx.flush(30)
    plain = Producer({"bootstrap.servers": broker})
    for i in range(14, 18):  # behind the open transaction's first offset: not yet stable
        record(plain, name, i, partition=i % 2)
    assert plain.flush(30) == 0
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} {ENVELOPE}"
    report = tmp_path / "report.json"
    started = time.monotonic()
    code, _, err = run(capsys, broker, s3_endpoint, kcql, "--report", str(report))
    elapsed = time.monotonic() - started
    assert code == 0, err
    # Not a wait for data that cannot come (the read timeout is 60 s): up to the LSO, done.
    assert elapsed < 55, elapsed
    assert ids(archived(s3_client, bkt)) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 17]
    partitions = {p["partition"]: p for p in json.loads(report.read_text())["partitions"]}
    # Offsets 0..4 records, 5 the commit marker, 6.. the open transaction: the LSO is 6.
    assert partitions[0]["next_offset"] == 6, "partition 0 stops at its last stable offset"

    open_tx.commit_transaction(30)
    code, _, err = run(capsys, broker, s3_endpoint, kcql)
    assert code == 0, err
    rows = archived(s3_client, bkt)
    assert ids(rows) == list(range(18)), "the next run continues, every record exactly once"
    assert rows == in_kafka(broker, name, partitions=2)


def _compacted_topic(admin: AdminClient) -> str:
    name = f"c-{time.time_ns() % 10**10}"
    config = {
        "cleanup.policy": "compact",
        "segment.ms": "100",
        "min.compaction.lag.ms": "0",
        "min.cleanable.dirty.ratio": "0.01",
        "max.compaction.lag.ms": "100",
    }
    admin.create_topics([NewTopic(name, num_partitions=1, config=config)])[name].result(30)
    return name


def _write_rolling(producer: Producer, topic: str, items: list[tuple[str, int | None]]) -> None:
    """One record per (key, id) (id None: a tombstone), each in a new segment (segment.ms)."""
    for key, i in items:
        value = None if i is None else compact({"id": i})
        producer.produce(topic, key=key.encode(), value=value, partition=0)
        assert producer.flush(30) == 0
        time.sleep(0.15)


def _wait_compacted(broker: str, topic: str, gone: set[int]) -> None:
    """Until the log cleaner has removed every offset in ``gone``."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        offsets = {r[1] for r in in_kafka(broker, topic)}
        if not offsets & gone:
            return
        time.sleep(1)
    raise AssertionError(f"offsets {sorted(gone)} of {topic} were not compacted away")


def test_a_compacted_topic_with_gaps_and_tombstones(
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = _compacted_topic(admin), bucket()
    producer = Producer({"bootstrap.servers": broker})
    # Offsets 0..5: a, b, a', c, tombstone of b, d (the last one rolls the segment before it).
    _write_rolling(
        producer, name, [("a", 0), ("b", 1), ("a", 2), ("c", 3), ("b", None), ("d", 4), ("e", 5)]
    )
    _wait_compacted(broker, name, gone={0, 1})
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} {ENVELOPE}"
    code, _, err = run(capsys, broker, s3_endpoint, kcql)
    assert code == 0, err
    rows = archived(s3_client, bkt)
    assert rows == in_kafka(broker, name)
    assert [r[1] for r in rows][:2] == [2, 3], "offsets 0 and 1 are a gap"
    assert (0, 4, "b", None) in rows, "the tombstone is archived, as a null value"

    # The next run starts at offset 7, which compaction removes before it runs.
    _write_rolling(producer, name, [("f", 6), ("f", 7), ("g", 8)])
    _wait_compacted(broker, name, gone={7})
    code, _, err = run(capsys, broker, s3_endpoint, kcql)
    assert code == 0, err
    after = archived(s3_client, bkt)
    assert after[: len(rows)] == rows
    assert [r[1] for r in after[len(rows) :]] == [8, 9], "from the record after the gap, once"
    assert [r[3] for r in after[len(rows) :]] == [{"id": 7}, {"id": 8}]


def _delete_records(admin: AdminClient, topic: str, partition: int, before: int) -> None:
    futures = admin.delete_records([KafkaTopicPartition(topic, partition, before)])
    for future in futures.values():
        future.result(timeout=30)


def test_records_deleted_before_they_were_archived_are_a_reported_gap(
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    name, bkt = topic(partitions=2), bucket()
    producer = Producer({"bootstrap.servers": broker})
    for i in range(20):  # offsets 0..9 on each partition
        record(producer, name, i, partition=i % 2)
    assert producer.flush(30) == 0
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} {ENVELOPE}"
    code, out, err = run(capsys, broker, s3_endpoint, kcql)
    assert code == 0, err
    for i in range(20, 40):  # offsets 10..19
        record(producer, name, i, partition=i % 2)
    assert producer.flush(30) == 0
    _delete_records(admin, name, 0, 15)  # offsets 10..14 of partition 0 never archived

    report, metrics = tmp_path / "report.json", tmp_path / "archive.prom"
    code, out, err = run(
        capsys, broker, s3_endpoint, kcql, "--report", str(report), "--metrics-file", str(metrics)
    )
    assert code == 16, err
    assert f"{name}-0: GAP offsets 10..14 (5 records) deleted by Kafka" in out
    assert "--allow-gaps" in err and len(err.strip().splitlines()) >= 1
    document = json.loads(report.read_text())
    assert document["ok"] is False
    assert document["gaps"] == [
        {
            "topic": name,
            "partition": 0,
            "first_offset": 10,
            "last_offset": 14,
            "records": 5,
            "passed": False,
        }
    ]
    assert (
        f'kafka_archive_run_lost_records{{job="{document["job"]}",topic="{name}",partition="0"}} 5'
    ) in metrics.read_text()
    # Partition 1 was archived; partition 0 stays where it was, its gap not passed.
    assert ids(archived(s3_client, bkt)) == list(range(20)) + list(range(21, 40, 2))
    # status says so too, and --max-lag alerts on it whatever the lag.
    status = ["status", *run_args_of(kcql, broker, s3_endpoint), "--max-lag", "1000"]
    assert main(status) == 1
    out, err = capsys.readouterr()
    gap = f"{name}-0: GAP offsets 10..14 (5 records) deleted by Kafka before they were archived"
    assert gap in out and gap in err, (out, err)

    code, out, err = run(capsys, broker, s3_endpoint, kcql, "--allow-gaps", "--report", str(report))
    assert code == 0, err
    assert "continued at offset 15 (allow_gaps)" in out
    assert json.loads(report.read_text())["gaps"][0]["passed"] is True
    expected = list(range(20)) + list(range(21, 40, 2)) + [30, 32, 34, 36, 38]
    assert ids(archived(s3_client, bkt)) == sorted(expected)

    code, out, err = run(capsys, broker, s3_endpoint, kcql)
    assert code == 0, err
    assert "GAP" not in out and "nothing new" in out
    # The run recorded the gap it passed in the partition's state (read here with boto3).
    state = s3_client.get_object(Bucket=bkt, Key=f"arch/.kafka-archive/state/{name}/0.json")
    assert json.loads(state["Body"].read())["gaps"] == [[10, 14]]
    # verify names it as the allowed gap, not a hole, and it is no problem.
    verify = ["verify", *run_args_of(kcql, broker, s3_endpoint)]
    allowed = "offsets 10..14: an allowed gap, deleted by Kafka before they were archived"
    for extra in ((), ("--offline",)):
        assert main([*verify, *extra]) == 0
        out, err = capsys.readouterr()
        assert allowed in out and "a hole" not in out, (out, err)
        assert out.splitlines()[-1].startswith("clean: 2 partition(s)"), out
    # A hole nobody passed still fails: partition 1's objects from offset 10 deleted (Kafka
    # still has those records).
    listed = s3_client.list_objects_v2(Bucket=bkt, Prefix=f"arch/{name}/1/")["Contents"]
    later = [o["Key"] for o in listed if int(o["Key"].rsplit("/", 1)[1].split(".")[0]) >= 10]
    assert later
    for key in later:
        s3_client.delete_object(Bucket=bkt, Key=key)
    assert main([*verify, "--output", "json"]) == 1
    out, _ = capsys.readouterr()
    verdicts = {v["partition"]: v for v in json.loads(out)["partitions"]}
    assert verdicts[0]["allowed_gaps"] == [{"first_offset": 10, "last_offset": 14}]
    assert verdicts[0]["discrepancies"] == [] and verdicts[1]["allowed_gaps"] == []
    missing = [d for d in verdicts[1]["discrepancies"] if d["problem"].startswith("record missing")]
    assert [(d["first_offset"], d["last_offset"]) for d in missing] == [(10, 19)], verdicts[1]


def run_args_of(kcql: str, broker: str, s3_endpoint: str) -> list[str]:
    return ["--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url", s3_endpoint]


def test_a_topic_deleted_and_re_created_is_refused(
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = f"r-{time.time_ns() % 10**10}", bucket()
    admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(30)
    producer = Producer({"bootstrap.servers": broker})
    for i in range(10):
        record(producer, name, i)
    assert producer.flush(30) == 0
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} {ENVELOPE}"
    code, _, err = run(capsys, broker, s3_endpoint, kcql)
    assert code == 0, err
    admin.delete_topics([name])[name].result(30)
    deadline = time.monotonic() + 60
    while True:  # deletion completes asynchronously
        try:
            admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(30)
            break
        except Exception:
            assert time.monotonic() < deadline, "the topic was not deleted"
            time.sleep(0.5)
    for i in range(100, 103):
        record(producer, name, i)
    assert producer.flush(30) == 0
    code, _, err = run(capsys, broker, s3_endpoint, kcql)
    assert code == 17, err
    lines = err.strip().splitlines()
    assert "re-created" in lines[-1] and "new prefix" in lines[-1]
    assert "Traceback" not in err
    assert ids(archived(s3_client, bkt)) == list(range(10)), "the old archive is untouched"


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_broker_restart_mid_run_is_ridden_out_exactly_once(
    how: str,
    kafka: KafkaBroker,
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=2), bucket()
    total = 10_000
    # Small record batches: a fetch returns at least one whole batch.
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 0, "batch.size": 400})
    for i in range(total):
        record(producer, name, i, partition=i % 2)
    assert producer.flush(30) == 0
    # Small objects and a small read-ahead, so that the run is still fetching when the
    # broker goes away.
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` "
        "PROPERTIES('store.envelope'=true, 'flush.count'=25)"
    )
    outcome: list[int] = []
    runner = threading.Thread(
        target=lambda: outcome.append(
            main(
                [
                    "run",
                    "--kcql",
                    kcql,
                    "--bootstrap-servers",
                    broker,
                    "--endpoint-url",
                    s3_endpoint,
                    "-X",
                    "fetch.max.bytes=4096",
                    "-X",
                    "message.max.bytes=2048",
                    "-X",
                    "max.partition.fetch.bytes=1024",
                    "-X",
                    "queued.max.messages.kbytes=1",
                    "-X",
                    "fetch.queue.backoff.ms=100",  # fetches 100 ms apart: the read takes a while
                ]
            )
        )
    )
    runner.start()
    try:
        deadline = time.monotonic() + 240
        while (
            s3_client.list_objects_v2(Bucket=bkt, Prefix=f"arch/{name}/").get("KeyCount", 0) < 8
        ):  # the run is reading and writing (8 objects of 25 records)
            assert runner.is_alive() and time.monotonic() < deadline, outcome
            time.sleep(0.2)
        # Frozen first, so that the broker stops serving at once (a clean shutdown takes
        # seconds, in which a fast run could read the whole topic).
        kafka.freeze()
        assert runner.is_alive(), "the run finished before the broker stopped"
        time.sleep(3)
        # The run is still at work while the broker is down. (Whether it still has records to
        # fetch depends on how far uploads lag reading: not asserted, it varies with load.)
        assert runner.is_alive(), "the run finished while the broker was frozen"
        assert len(archived(s3_client, bkt)) < total
        if how == "stop":
            kafka.freeze(False)
            kafka.stop()  # a clean shutdown
        else:
            kafka.kill()  # a crash: SIGKILL
        kafka.start()
    finally:
        kafka.freeze(False)
        kafka.start()  # whatever happened, the session keeps its broker
        runner.join(timeout=300)
    assert outcome == [0], capsys.readouterr().err
    rows = archived(s3_client, bkt)
    assert ids(rows) == list(range(total)), "every record exactly once"
    assert rows == in_kafka(broker, name, partitions=2)


def test_planning_looks_up_the_offsets_of_all_partitions_at_once(
    broker: str, topic: Callable[..., str]
) -> None:
    """Low, high and last stable offsets of 200 partitions in batched ListOffsets requests:
    what the per-partition requests say, in a fraction of the time a fetch per partition
    took (0.5 s each: 100 s for these 200)."""
    name = topic(partitions=200)
    plain = Producer({"bootstrap.servers": broker, "linger.ms": 5})
    for i in range(2000):
        record(plain, name, i, partition=i % 200)
    assert plain.flush(30) == 0
    _delete_records(AdminClient({"bootstrap.servers": broker}), name, 7, 4)
    open_tx = transactional(broker, f"tx-{name}")
    open_tx.begin_transaction()
    record(open_tx, name, 9999, partition=3)
    open_tx.flush(30)
    tps = [TopicPartition(name, p) for p in range(200)]
    with KafkaAdmin(KafkaSettings(broker), "plan-test") as admin:
        started = time.monotonic()
        offsets = admin.offsets(tps)
        elapsed = time.monotonic() - started
    # The reference: one ListOffsets per partition, at each isolation level.
    for isolation, attribute in (("read_uncommitted", "high"), ("read_committed", "end")):
        reference = Consumer(
            {
                "bootstrap.servers": broker,
                "group.id": "plan-reference",
                "isolation.level": isolation,
            }
        )
        for tp in tps:
            low, high = reference.get_watermark_offsets(KafkaTopicPartition(name, tp.partition), 10)
            assert (offsets[tp].low, getattr(offsets[tp], attribute)) == (low, high)
        reference.close()
    assert offsets[TopicPartition(name, 7)].low == 4
    open_partition = offsets[TopicPartition(name, 3)]
    assert (open_partition.end, open_partition.high) == (10, 11), "end: the LSO"
    assert all(offsets[tp].end == offsets[tp].high for tp in tps if tp.partition != 3)
    assert elapsed < 15, elapsed
    open_tx.abort_transaction(30)


def test_partitions_added_to_a_topic_are_archived_from_their_first_record(
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--start` says where a route's first run begins; a partition the topic gains later is
    new to a route that has begun, and all of its records are archived (with `--start
    latest` still on the command line, the records it got before the next run were lost)."""
    from confluent_kafka.admin import NewPartitions

    start = "latest"
    name, bkt = f"grown-{time.monotonic_ns()}", bucket()
    admin.create_topics([NewTopic(name, 1)])[name].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker})
    for i in range(3):
        producer.produce(name, compact({"id": i}), partition=0)
    producer.flush(30)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} {ENVELOPE}"
    code, _, err = run(capsys, broker, s3_endpoint, kcql, "--start", start)
    assert code == 0, err
    before = archived(s3_client, bkt)
    assert ids(before) == []

    admin.create_partitions([NewPartitions(name, 3)])[name].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker})  # knows the new partitions
    while len(producer.list_topics(name, timeout=10).topics[name].partitions) < 3:
        time.sleep(0.2)
    for i in range(3, 12):
        producer.produce(name, compact({"id": i}), partition=i % 3)
    producer.flush(30)
    code, _, err = run(capsys, broker, s3_endpoint, kcql, "--start", start)
    assert code == 0, err
    rows = archived(s3_client, bkt)
    assert ids(rows) == sorted(set(ids(before)) | set(range(3, 12)))
    assert [r for r in rows if r[0] > 0] == [r for r in in_kafka(broker, name, 3) if r[0] > 0]

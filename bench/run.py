"""The side-by-side benchmark behind ``make bench``: kafka-archive against the machine's
ceilings and the hand-rolled pipeline, on one local broker and S3 endpoint.

Shapes (``BENCH_SHAPE``):

- ``keyed`` (the default): a keyed topic of 4 partitions of uneven size (the largest 1.7x
  the smallest, as keyed topics are), ``--value-bytes`` JSON values, each record with a key
  and two headers;
- ``even``: the same values spread evenly over 4 partitions, without keys or headers;
- ``wide``: 50 topics x 20 partitions (1,000 partitions; ``BENCH_WIDE_TOPICS`` x
  ``BENCH_WIDE_PARTITIONS``), ``BENCH_WIDE_RECORDS`` records each: the time to plan (until
  Spark's JVM starts), to run, and a no-op run, with the peak RSS of the driver process and
  of Spark's JVM apart;
- ``follow``: continuous mode. ``run --follow`` runs while a producer writes
  ``BENCH_FOLLOW_RATE`` records/s (default 5,000) for ``BENCH_FOLLOW_SECONDS`` over
  ``BENCH_FOLLOW_ACTIVE`` of the topic's ``BENCH_FOLLOW_PARTITIONS`` partitions (default 4 of
  4; e.g. 4 of 1,000: a wide topic where few partitions receive records; a warm-up record
  goes to every partition first, so each has a state), and a poller reads the active
  partitions' state objects every 0.1 s (on 4 threads; its round, reported, is the
  latencies' resolution): a
  record is committed once its partition's state has moved past its offset (from then on
  ``cat`` and any reader of the state see it, and no run archives it again). Reported: the
  latency from produce (the record's timestamp) to committed, p50/p99/max, and the
  micro-batches' time beyond the work itself (from the run's per-batch ``time:`` lines),
  with the run's CPU-seconds, each batch's planning time, and the driver's RSS sampled every
  second (from the first batch after the warm-up to the end: growth over batches would show).
  Objects roll by ``flush.interval`` =
  ``BENCH_FOLLOW_FLUSH_INTERVAL`` s (default 1): a record waits for its object to close,
  then for the next batch.
- ``compact``: maintenance (issue 38). Per STOREAS (default JSON and PARQUET), a log-mode
  ``run`` makes what ``--follow`` with a small flush count leaves, 1,000 objects of 10
  records of ~1 KB in one partition (testbed/compaction_bench.py, the case
  tests/integration/maintenance/test_compact_bench.py measures on the engine alone); then
  ``compact`` merges them, as a whole process through a counting proxy (faultproxy.py,
  forwarding every request to the S3 endpoint): MB read per second, and S3 requests per
  object compacted by type, as AWS bills them.

Steps of ``keyed`` and ``even`` (one run, same machine, same services):

1. produce ``--mb`` MB;
2. consume ceiling: a bare confluent-kafka consumer reads every record, nothing else;
3. upload ceiling: boto3 uploads the same number of bytes in 64 MB objects;
4. hand-rolled peer: a bare consumer printing every value to stdout (what ``kcat -C -e``
   does) piped into ``aws s3 cp - s3://…``; void unless the uploaded size equals the bytes
   consumed; then the Kafka Connect peer (``bench/connect_peer.py``; ``BENCH_CONNECT=0``
   skips it), timed until its group's lag is zero and its last object is in S3 (whatever
   fails in it is its row's ``NOT RUN`` or ``VOID`` reason; the bench goes on);
5. kafka-archive ``run`` for each STOREAS, as a whole process (Spark start-up included),
   after one unmeasured warm-up run of a few records (``warm_up``: what a machine keeps
   between runs, the JVM's class archive above all, exists before the first measured run);
   ``ICEBERG`` (not run unless named in ``BENCH_FORMATS``) is a PARQUET route appending to
   an Iceberg table (``'table.format'='iceberg'``, SQL catalog on SQLite);
6. a no-op run (nothing new to archive): start-up cost;
7. the tiny-files case: ``--evolve-records`` JSON values of two schema versions (v2
   renames a field) interleaved record by record in one partition, archived as PARQUET
   with ``schema.compatibility`` NONE (an object per record) and BACKWARD (two objects).

Every measured process (the peer's pipeline, each kafka-archive run) is measured as a tree
(``bench/procstat.py``): wall time, peak RSS, and CPU-seconds (user + system) of its own
processes — the driver, the Spark JVM, the Python workers; never the broker or the S3
server — shown per GB archived. CPU-seconds move less with machine noise than wall time.

Prints a table and appends it, with date, commit and machine, to ``bench/RESULTS.md``.
Ratios, not absolute times, are what compare across machines.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import dataclasses
import datetime
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from statistics import median

import boto3
import connect_peer
import s3count
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from procstat import (  # bench/, the script's directory
    Usage,
    become_subreaper,
    measure,
    stop_measured,
)

from devstack import (
    LOOPBACK,
    MOTO_CREDENTIALS,
    TANSU_ENV,
    LocalStack,
    StackError,
    start_s3,
)

HERE = Path(__file__).resolve().parent
BROKERS = ("tansu", "kafka")
PARTITIONS = 4
# The keyed shape: partition p gets KEYED_WEIGHTS[p] of every sum(KEYED_WEIGHTS) records.
KEYED_WEIGHTS = (17, 14, 12, 10)
SHAPES = ("keyed", "even", "wide", "follow", "compact")
WIDE_TOPICS, WIDE_PARTITIONS = 50, 20
UPLOAD_PART = 64 * 1024 * 1024
FORMATS = ("JSON", "BYTES", "TEXT", "AVRO", "PARQUET")


@dataclass(frozen=True)
class Result:
    name: str
    seconds: float
    bytes: int
    records: int
    peak_rss: int | None = None
    note: str = ""
    cpu_seconds: float | None = None
    #: seconds until Spark's JVM started (CLI, preflight and plan), when it did
    plan_seconds: float | None = None

    @classmethod
    def of(cls, name: str, usage: Usage, size: int, records: int, note: str = "") -> Result:
        """A measured step; its note says where the CPU-seconds went, by process name."""
        top = sorted(usage.sampled_by_name.items(), key=lambda item: -item[1])[:3]
        split = ", ".join(f"{proc} {secs:.1f}" for proc, secs in top if secs >= 0.05)
        note = "; ".join(n for n in (note, f"CPU s: {split}" if split else "") if n)
        return cls(
            name,
            usage.seconds,
            size,
            records,
            usage.peak_rss,
            note,
            usage.cpu_seconds,
            usage.until_watch,
        )

    @property
    def cpu_per_gb(self) -> float | None:
        if self.cpu_seconds is None or not self.bytes:
            return None
        return self.cpu_seconds / (self.bytes / 1e9)

    @property
    def mb_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds else 0.0

    @property
    def rec_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def value_of(i: int, size: int) -> bytes:
    head = {"id": i, "customer": f"c{i % 9973}", "amount": i % 1000 / 10, "country": "DE"}
    text = json.dumps(head)
    pad = max(0, size - len(text) - 10)
    head["note"] = "x" * pad
    return json.dumps(head).encode()


def keyed_partition(i: int) -> int:
    """The partition of record ``i`` in the keyed shape (weighted, deterministic)."""
    slot = i % sum(KEYED_WEIGHTS)
    for partition, weight in enumerate(KEYED_WEIGHTS):
        if slot < weight:
            return partition
        slot -= weight
    raise AssertionError(slot)


def produce(
    broker: str, topic: str, total_bytes: int, value_bytes: int, keyed: bool
) -> tuple[int, int, list[int]]:
    """Records, value bytes, and value bytes per partition produced."""
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(timeout=30)
    producer = Producer(
        {
            "bootstrap.servers": broker,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": "none",
        }
    )
    sent = count = 0
    per_partition = [0] * PARTITIONS
    while sent < total_bytes:
        value = value_of(count, value_bytes)
        if keyed:
            partition = keyed_partition(count)
            # A key belongs to one partition (as with a hash partitioner), ~1,000 per partition.
            key: bytes | None = f"customer-{partition}-{count % 997}".encode()
            headers: list[tuple[str, bytes]] | None = [
                ("source", b"bench"),
                ("trace-id", f"{count:016x}".encode()),
            ]
        else:
            partition, key, headers = count % PARTITIONS, None, None
        while True:
            try:
                producer.produce(topic, value=value, key=key, headers=headers, partition=partition)
                break
            except BufferError:
                producer.poll(0.05)
        sent += len(value)
        per_partition[partition] += len(value)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300) != 0:
        raise SystemExit("producing the benchmark topic did not finish")
    return count, sent, per_partition


def produce_wide(
    broker: str,
    records_per_partition: int,
    value_bytes: int,
    topic_count: int = WIDE_TOPICS,
    partition_count: int = WIDE_PARTITIONS,
) -> tuple[int, int]:
    """``topic_count`` topics of ``partition_count`` partitions; records and bytes produced."""
    admin = AdminClient({"bootstrap.servers": broker})
    topics = [f"wide-{t:02d}" for t in range(topic_count)]
    # KRaft refuses one request creating ~10,000 partitions ("excessively large batch
    # operation"): a request per 2,000 partitions.
    step = max(1, 2000 // partition_count)
    for first in range(0, len(topics), step):
        for future in admin.create_topics(
            [NewTopic(t, num_partitions=partition_count) for t in topics[first : first + step]]
        ).values():
            future.result(timeout=300)
    # The broker serves a created topic only once it has made its partitions' logs: with
    # 10,000 partitions on this machine that took a minute after the requests returned.
    deadline = time.monotonic() + 600
    consumer = Consumer({"bootstrap.servers": broker, "group.id": "bench-wide"})
    while True:
        known = consumer.list_topics(timeout=60).topics
        if all(t in known and len(known[t].partitions) == partition_count for t in topics):
            break
        if time.monotonic() > deadline:
            raise SystemExit("the wide shape's topics did not appear within 10 minutes")
        time.sleep(2)
    consumer.close()
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 20})
    count = size = 0
    for topic in topics:
        for partition in range(partition_count):
            for _ in range(records_per_partition):
                value = value_of(count, value_bytes)
                while True:
                    try:
                        producer.produce(topic, value=value, partition=partition)
                        break
                    except BufferError:
                        producer.poll(0.05)
                count += 1
                size += len(value)
        producer.poll(0)
    if producer.flush(300) != 0:
        raise SystemExit("producing the wide shape's topics did not finish")
    return count, size


def evolve_value(i: int, size: int) -> bytes:
    """v1 ``{"id", "name", "note"}`` at even i, v2 ``{"id", "label", "note"}`` at odd i."""
    head: dict[str, object] = {"id": i, ("name" if i % 2 == 0 else "label"): f"c{i}"}
    head["note"] = "x" * max(0, size - len(json.dumps(head)) - 10)
    return json.dumps(head).encode()


def produce_evolving(broker: str, topic: str, records: int, value_bytes: int) -> int:
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 50})
    size = 0
    for i in range(records):
        value = evolve_value(i, value_bytes)
        producer.produce(topic, value=value, partition=0)
        size += len(value)
    if producer.flush(300) != 0:
        raise SystemExit("producing the schema evolution topic did not finish")
    return size


def object_count(s3: object, bucket: str, prefix: str) -> int:
    count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):  # type: ignore[attr-defined]
        count += sum("/.kafka-archive/" not in f"/{i['Key']}" for i in page.get("Contents", []))
    return count


def consume_all(broker: str, topic: str, out: io.BufferedWriter | None = None) -> tuple[int, int]:
    consumer = Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": f"bench-{time.time_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    done: set[int] = set()
    records = size = 0
    while len(done) < PARTITIONS:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is not None:
                done.add(message.partition())
                continue
            value = message.value() or b""
            records += 1
            size += len(value)
            if out is not None:
                out.write(value)
                out.write(b"\n")
    consumer.close()
    return records, size


def bucket_size(s3: object, bucket: str, prefix: str = "") -> int:
    total = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):  # type: ignore[attr-defined]
        total += sum(item["Size"] for item in page.get("Contents", []))
    return total


def empty_bucket(s3: object, bucket: str) -> None:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):  # type: ignore[attr-defined]
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys})  # type: ignore[attr-defined]


def machine() -> str:
    cores = os.cpu_count()
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    return f"{cores} cores, {mem_kb / 1024 / 1024:.0f} GB RAM"


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=HERE,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def archive_command(bindir: Path, kcql: str, broker: str, endpoint: str) -> list[str]:
    return [
        str(bindir / "kafka-archive"),
        "run",
        "--kcql",
        kcql,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        endpoint,
    ]


def warm_up(bindir: Path, topic: str, broker: str, endpoint: str, env: dict[str, str]) -> None:
    """One unmeasured run of a few records, so that every measured run finds what a machine
    keeps between runs: the JVM's class-data-sharing archive (made once per java, Spark and
    JVM options by the first run that starts Spark: ~9 s and ~5.6 CPU-s more, once) and
    Lark's parser tables (``kafka_archive/cache.py``)."""
    kcql = f"INSERT INTO bench:warm-up SELECT * FROM {topic} STOREAS `JSON`"
    command = archive_command(bindir, kcql, broker, endpoint)
    started = time.monotonic()
    done = subprocess.run(
        [*command, "--max-records-per-partition", "10"], env=env, capture_output=True
    )
    if done.returncode != 0:
        raise SystemExit(f"the warm-up run failed (exit {done.returncode}): {done.stderr!r}")
    print(f"  warm-up run (not measured): {time.monotonic() - started:.1f} s", flush=True)


def outcome(usage: Usage) -> str:
    return "" if usage.code == 0 else f"FAILED: exit {usage.code}"


@contextlib.contextmanager
def services(kind: str, work: Path) -> Iterator[tuple[str, str, dict[str, str]]]:
    """Broker and S3 endpoint: bootstrap servers, endpoint URL, and the environment a
    kafka-archive process needs for that broker."""
    if kind == "tansu":
        with LocalStack(work / "services") as stack:
            yield stack.bootstrap_servers, stack.endpoint_url, dict(TANSU_ENV)
        return
    # Apache Kafka, as the integration tests run it (its jars fetched once by Maven).
    sys.path.insert(0, str(HERE.parent / "tests" / "integration"))
    from kafka_broker import KafkaBroker

    s3 = start_s3(work / "services")
    try:
        with KafkaBroker(work / "kafka") as kafka:
            yield kafka.bootstrap_servers, f"http://{LOOPBACK}:{s3.port}", {}
    finally:
        s3.stop()


def bench_topic(
    args: argparse.Namespace,
    formats: list[str],
    broker: str,
    endpoint: str,
    env: dict[str, str],
    work: Path,
) -> tuple[list[Result], str]:
    """The keyed or even shape: ceilings, the peer, kafka-archive per STOREAS, no-op run."""
    bindir = Path(sys.executable).parent
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="bench")
    topic = "bench"
    keyed = args.shape == "keyed"
    print(
        f"producing {args.mb} MB of ~{args.value_bytes} B values over {PARTITIONS} "
        f"partitions ({args.shape}) ...",
        flush=True,
    )
    started = time.monotonic()
    records, size, per_partition = produce(
        broker, topic, args.mb * 1_000_000, args.value_bytes, keyed
    )
    split = " / ".join(f"{b / 1e6:.0f}" for b in per_partition)
    print(
        f"  {records} records, {size / 1e6:.1f} MB ({split} MB per partition) in "
        f"{time.monotonic() - started:.1f} s",
        flush=True,
    )
    results: list[Result] = []

    started = time.monotonic()
    got_records, got_bytes = consume_all(broker, topic)
    assert got_records == records, (got_records, records)
    results.append(Result("consume ceiling", time.monotonic() - started, got_bytes, got_records))
    print(f"  consume ceiling: {results[-1].mb_s:.1f} MB/s", flush=True)

    block = os.urandom(UPLOAD_PART)
    started = time.monotonic()
    left, n = size, 0
    while left > 0:
        part = block[: min(left, UPLOAD_PART)]
        s3.put_object(Bucket="bench", Key=f"ceiling/{n}", Body=part)
        left -= len(part)
        n += 1
    results.append(Result("upload ceiling", time.monotonic() - started, size, records))
    print(f"  upload ceiling: {results[-1].mb_s:.1f} MB/s", flush=True)
    empty_bucket(s3, "bench")

    peer_cmd = (
        f"{sys.executable} {HERE / 'peer_consume.py'} {broker} {topic} {PARTITIONS} | "
        f"{bindir / 'aws'} s3 cp - s3://bench/peer/{topic}.jsonl "
        f"--endpoint-url {endpoint} --only-show-errors"
    )
    usage = measure(["bash", "-o", "pipefail", "-c", peer_cmd], env)
    uploaded = bucket_size(s3, "bench", "peer/")
    expected = size + records  # values plus one newline each
    note = (
        ""
        if usage.code == 0 and uploaded == expected
        else (f"VOID: exit {usage.code}, uploaded {uploaded} != consumed {expected}")
    )
    results.append(Result.of("hand-rolled peer", usage, size, records, note))
    print(
        f"  hand-rolled peer: {results[-1].mb_s:.1f} MB/s, "
        f"{results[-1].cpu_per_gb or 0:.0f} CPU-s/GB {note}",
        flush=True,
    )
    empty_bucket(s3, "bench")
    if args.connect:
        results.append(
            run_connect_peer(args.broker, broker, endpoint, records, size, env, work, s3)
        )

    env["KAFKA_ARCHIVE_SPOOL_DIR"] = str(work)
    warm_up(bindir, topic, broker, endpoint, env)
    empty_bucket(s3, "bench")
    for fmt in formats:
        kcql = (
            f"INSERT INTO bench:{fmt.lower()} SELECT * FROM {topic} "
            f"STOREAS `{fmt}` WITH_FLUSH_COUNT = 1000000"
        )
        if fmt == "ICEBERG":  # PARQUET files appended to a table, in one commit per run
            kcql = (
                f"INSERT INTO bench:iceberg SELECT * FROM {topic} STOREAS `PARQUET` "
                "PROPERTIES('flush.count'=1000000, 'table.format'='iceberg', "
                f"'iceberg.table'='bench.{topic}')"
            )
            env["PYICEBERG_CATALOG__DEFAULT__URI"] = f"sqlite:///{work / 'iceberg.db'}"
        command = archive_command(bindir, kcql, broker, endpoint)
        usage = measure(command, env, stdout=subprocess.DEVNULL)
        results.append(Result.of(f"kafka-archive {fmt}", usage, size, records, outcome(usage)))
        print(
            f"  kafka-archive {fmt}: {results[-1].mb_s:.1f} MB/s, "
            f"{results[-1].cpu_per_gb or 0:.0f} CPU-s/GB, peak RSS {usage.peak_rss / 1e6:.0f} MB "
            f"{outcome(usage)}",
            flush=True,
        )
        if fmt == formats[-1]:
            usage = measure(command, env, stdout=subprocess.DEVNULL)
            results.append(Result.of("no-op run (nothing new)", usage, 0, 0, outcome(usage)))
        empty_bucket(s3, "bench")

    if args.evolve_records:
        evolving = "bench-evolve"
        evolve_size = produce_evolving(broker, evolving, args.evolve_records, args.value_bytes)
        for mode in ("NONE", "BACKWARD"):
            kcql = (
                f"INSERT INTO bench:evolve-{mode.lower()} SELECT * FROM {evolving} "
                "STOREAS `PARQUET` PROPERTIES('flush.count'=1000000, "
                f"'schema.compatibility'='{mode}')"
            )
            usage = measure(
                archive_command(bindir, kcql, broker, endpoint), env, stdout=subprocess.DEVNULL
            )
            objects = object_count(s3, "bench", f"evolve-{mode.lower()}/")
            note = f"{objects} objects" + ("" if usage.code == 0 else f"; {outcome(usage)}")
            results.append(
                Result.of(
                    f"PARQUET v1/v2 interleaved, {mode}",
                    usage,
                    evolve_size,
                    args.evolve_records,
                    note,
                )
            )
            print(f"  v1/v2 interleaved {mode}: {results[-1].mb_s:.2f} MB/s, {note}", flush=True)
    title = (
        f"{args.mb} MB, {args.shape} shape ({split} MB per partition), "
        f"~{args.value_bytes} B values, {records} records"
    )
    return results, title


CONNECT = "Kafka Connect S3 sink"


def run_connect_peer(
    kind: str,
    broker: str,
    endpoint: str,
    records: int,
    size: int,
    env: dict[str, str],
    work: Path,
    s3: object,
) -> Result:
    """The Kafka Connect peer (``bench/connect_peer.py``). Whatever fails in it (its jars,
    the worker, the broker while it runs, what it wrote), its row says so in one line
    (``NOT RUN``, or ``VOID`` with no throughput) and the bench goes on."""
    # tansu answers a JoinGroup after half the session timeout (45 s by default: 22 s of
    # waiting); 10 s keeps that to 5 s. Apache Kafka answers at once.
    session = 10_000 if kind == "tansu" else None
    try:
        done = connect_peer.run(
            broker, endpoint, "bench", PARTITIONS, records, size, env, work, s3, session
        )
    except connect_peer.ConnectUnavailable as exc:
        done = connect_peer.ConnectRun(None, f"NOT RUN: {exc}")
    except Exception as exc:  # a defect of the peer's code: its row, not the bench, fails
        done = connect_peer.ConnectRun(None, f"VOID: {connect_peer.one_line(exc)}")
    if done.usage is None:
        print(f"  {CONNECT}: {done.note}", flush=True)
        return Result(CONNECT, 0.0, 0, 0, note=done.note)
    # No plan: the "until java started" of Result.of is the worker's own start.
    result = dataclasses.replace(
        Result.of(CONNECT, done.usage, size, records, done.note), plan_seconds=None
    )
    if not done.valid:  # its time and CPU are shown, no throughput
        result = dataclasses.replace(result, bytes=0, records=0)
        print(f"  {CONNECT}: {result.seconds:.0f} s, {done.note}", flush=True)
        return result
    print(
        f"  {CONNECT}: {result.mb_s:.1f} MB/s, {result.cpu_per_gb or 0:.0f} CPU-s/GB, "
        f"peak RSS {done.usage.peak_rss / 1e6:.0f} MB; {done.note}",
        flush=True,
    )
    return result


def rss_note(usage: Usage) -> str:
    """Peak RSS of the driver (the kafka-archive process) and of Spark's JVM, apart."""
    by_name = usage.peak_rss_by_name
    jvm = by_name.get("java")
    return f"peak RSS driver {by_name.get('kafka-archive', 0) / 1e6:.0f} MB, " + (
        f"JVM {jvm / 1e6:.0f} MB" if jvm else "no JVM (Spark not started)"
    )


def bench_wide(
    args: argparse.Namespace,
    formats: list[str],
    broker: str,
    endpoint: str,
    env: dict[str, str],
    work: Path,
) -> tuple[list[Result], str]:
    """The wide shape: 1,000 partitions (by default) of few records; plan, run and no-op
    run times, and the peak RSS of the driver and of Spark's JVM apart."""
    bindir = Path(sys.executable).parent
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="bench")
    topic_count, partition_count = args.wide_topics, args.wide_partitions
    partitions = topic_count * partition_count
    print(
        f"producing {args.wide_records} records of ~{args.value_bytes} B into each of "
        f"{partitions} partitions ({topic_count} topics x {partition_count}) ...",
        flush=True,
    )
    started = time.monotonic()
    records, size = produce_wide(
        broker, args.wide_records, args.value_bytes, topic_count, partition_count
    )
    print(
        f"  {records} records, {size / 1e6:.1f} MB in {time.monotonic() - started:.1f} s",
        flush=True,
    )
    env["KAFKA_ARCHIVE_SPOOL_DIR"] = str(work)
    warm_up(bindir, "wide-00", broker, endpoint, env)
    results: list[Result] = []
    with s3count.counting(endpoint) as (counted, counter):
        for fmt in formats:
            for protocol in args.protocols:
                results += wide_runs(
                    bindir, fmt, protocol, topic_count, broker, counted, counter, env, s3
                )
                # The run's throughput (the no-op rerun archives nothing).
                results[-2] = dataclasses.replace(results[-2], bytes=size, records=records)
    title = (
        f"wide shape: {topic_count} topics x {partition_count} partitions, "
        f"{args.wide_records} records of ~{args.value_bytes} B each, {records} records"
    )
    return results, title


def wide_runs(
    bindir: Path,
    fmt: str,
    protocol: str,
    topic_count: int,
    broker: str,
    endpoint: str,
    counter: s3count.Counter_,
    env: dict[str, str],
    s3: object,
) -> list[Result]:
    """One protocol's run of the wide shape and its no-op rerun, each with its S3 requests
    by type (counted by the proxy at ``endpoint``; the run's own summary cross-checked) per
    object written. Bytes and records are the caller's to fill in."""
    prefix = f"wide-{fmt.lower()}-{protocol}"
    kcql = ";\n".join(
        f"INSERT INTO bench:{prefix} SELECT * FROM wide-{t:02d} "
        f"STOREAS `{fmt}` WITH_FLUSH_COUNT = 1000000"
        for t in range(topic_count)
    )
    command = archive_command(bindir, kcql, broker, endpoint)
    env = {**env, "KAFKA_ARCHIVE_COMMIT_PROTOCOL": protocol}
    out: list[Result] = []
    objects = 0
    for step in ("run", "no-op run"):
        counter.take()
        usage, stdout = measure_out(profiled(command, f"{prefix}-{step.replace(' ', '-')}"), env)
        counts = counter.take()
        if step == "run":
            objects = object_count(s3, "bench", f"{prefix}/")
        note = f"{protocol}: {requests_note(counts, stdout, objects if step == 'run' else 0)}"
        if step == "run":
            note += f"; {objects} objects"
        note += f"; {rss_note(usage)}" + ("" if usage.code == 0 else f"; {outcome(usage)}")
        name = f"kafka-archive {fmt} {protocol}" if step == "run" else f"no-op run {protocol}"
        out.append(Result.of(name, usage, 0, 0, note))
        print(
            f"  {name}: {usage.seconds:.1f} s (plan {usage.until_watch or 0:.1f} s), "
            f"peak RSS {usage.peak_rss / 1e6:.0f} MB, {note}",
            flush=True,
        )
    return out


def profiled(command: list[str], name: str) -> list[str]:
    """``command`` under cProfile when ``BENCH_PROFILE`` names a directory (the driver's
    profile to ``<dir>/<name>.prof``; Spark's workers are not profiled)."""
    where = os.environ.get("BENCH_PROFILE")
    if not where:
        return command
    return [sys.executable, "-m", "cProfile", "-o", f"{where}/{name}.prof", *command]


def measure_out(command: list[str], env: dict[str, str]) -> tuple[Usage, str]:
    """``measure`` with the process's stdout kept (its summary states its S3 requests)."""
    with tempfile.TemporaryFile() as out:
        usage = measure(command, env, stdout=out)
        out.seek(0)
        return usage, out.read().decode(errors="replace")


def requests_note(counts: s3count.Counts, stdout: str, objects: int) -> str:
    """The proxy's count per object by type, and the run's own summary's count beside it."""
    own = s3count.summary_counts(stdout)
    text = f"S3 {counts.per_object(objects)}" if objects else f"S3 {counts.text()} requests"
    if own is None:
        return f"{text} (the run printed no S3 line)"
    same = "same" if own.by_type == counts.by_type else f"run's own summary: {own.text()}"
    return f"{text}; proxy {counts.text()}, {same}"


# A run's per-batch line (cli.render.render_timings).
BATCH_LINE = re.compile(
    r"time: plan (?P<plan>[0-9.]+) s, Spark job (?P<spark>[0-9.]+) s \(tasks' work "
    r"(?P<work>[0-9.]+) s\), commit (?P<commit>[0-9.]+) s; overhead (?P<overhead>[0-9.]+) s"
)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank; 0 when there are none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


class CommitPoller:
    """Reads each partition's state object every ``interval`` s: when (wall clock) each
    partition's committed next offset moved, as any reader of the archive would see it."""

    def __init__(self, s3: object, bucket: str, keys: list[str], interval: float = 0.1) -> None:
        self.s3, self.bucket, self.keys, self.interval = s3, bucket, keys, interval
        #: per partition: (seen at, next offset) each time it grew
        self.seen: list[list[tuple[float, int]]] = [[] for _ in keys]
        #: the partitions read on each round (all until :meth:`watch` narrows them)
        self.watched = list(range(len(keys)))
        #: how long each round over the watched partitions took since the last watch():
        #: the resolution of the latencies measured
        self.rounds: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="commit-poller")

    def committed(self, partition: int) -> int:
        return self.seen[partition][-1][1] if self.seen[partition] else 0

    def _read(self, partition: int) -> tuple[int, float, int] | None:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=self.keys[partition])["Body"].read()  # type: ignore[attr-defined]
        except self.s3.exceptions.NoSuchKey:  # type: ignore[attr-defined]
            return None
        return partition, time.time(), int(json.loads(body)["next_offset"])

    def _run(self) -> None:
        # GETs on 4 threads: one at a time, a round over 100 states under load took seconds.
        from concurrent.futures import ThreadPoolExecutor  # here: the follow shape's alone

        with ThreadPoolExecutor(4) as pool:
            while not self._stop.is_set():
                began = time.monotonic()
                for read in pool.map(self._read, list(self.watched)):
                    if read is not None and read[2] > self.committed(read[0]):
                        self.seen[read[0]].append((read[1], read[2]))
                self.rounds.append(time.monotonic() - began)
                self._stop.wait(self.interval)

    def __enter__(self) -> CommitPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def watch(self, partitions: list[int]) -> None:
        """Read only these partitions' states from now on (a round over 1,000 state objects
        takes seconds: the latency of the few active ones would be measured coarsely)."""
        self.watched = list(partitions)
        self.rounds = []

    def wait_for(self, ends: list[int], timeout: float, alive: Callable[[], bool]) -> bool:
        """Until every partition committed up to ``ends``; False on timeout or exit."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and alive():
            if all(self.committed(p) >= end for p, end in enumerate(ends)):
                return True
            time.sleep(self.interval)
        return all(self.committed(p) >= end for p, end in enumerate(ends))

    def latency(self, partition: int, offset: int, produced_at: float) -> float | None:
        """Seconds from ``produced_at`` until the partition's commit covered ``offset``."""
        seen = self.seen[partition]
        i = bisect.bisect_right([o for _, o in seen], offset)
        return seen[i][0] - produced_at if i < len(seen) else None


class LogPoller(CommitPoller):
    """commit_protocol=log: reads the target's commit log every ``interval`` s (a listing
    after the last entry read, then each new entry; plain JSON, read here without the
    archiver's code): when each partition's committed end moved, and the objects named."""

    def __init__(self, s3: object, bucket: str, prefix: str, topic: str, partitions: int) -> None:
        super().__init__(s3, bucket, [""] * partitions)
        self.log = f"{prefix}/.kafka-archive/log/"
        self.topic = topic
        self.named: set[str] = set()
        self._after = self.log

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            listed = self.s3.list_objects_v2(  # type: ignore[attr-defined]
                Bucket=self.bucket, Prefix=self.log, StartAfter=self._after
            )
            for item in listed.get("Contents", []):
                key = item["Key"]
                if "/checkpoint/" in key:
                    continue
                body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()  # type: ignore[attr-defined]
                at = time.time()
                for commit in json.loads(body).get("commits", []):
                    self.named.update(o["key"] for o in commit["objects"])
                    partition = int(commit["partition"])
                    if commit["topic"] == self.topic and commit["end"] > self.committed(partition):
                        self.seen[partition].append((at, int(commit["end"])))
                self._after = key
            self.rounds.append(time.monotonic() - began)
            self._stop.wait(self.interval)


class RssSampler:
    """The resident set size of one process (the driver), sampled every ``interval`` s."""

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, int]] = []  # (monotonic, bytes)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                status = Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                return
            kb = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
            if kb:
                self.samples.append((time.monotonic(), int(kb.group(1)) * 1024))

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def since(self, start: float) -> list[int]:
        return [rss for at, rss in self.samples if at >= start]


def produce_at_rate(
    broker: str,
    topic: str,
    rate: int,
    seconds: float,
    value_bytes: int,
    first_id: int,
    partitions: int = PARTITIONS,
    lags: list[float] | None = None,
) -> list[tuple[int, int, float]]:
    """``rate`` records/s for ``seconds``, round-robin over partitions 0..``partitions``-1;
    (partition, offset, produce time) of each, the time being the record's timestamp (set at
    produce()); ``lags`` is given each record's time from produce() to its delivery report."""
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5})
    delivered: list[tuple[int, int, float]] = []

    def done(error: object, message: object) -> None:
        if error is None:
            _, stamp = message.timestamp()  # type: ignore[attr-defined]
            delivered.append((message.partition(), message.offset(), stamp / 1000))  # type: ignore[attr-defined]
            if lags is not None:
                lags.append(time.time() - stamp / 1000)

    started = time.monotonic()
    count = 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate)
        while count < due:
            value = value_of(first_id + count, value_bytes)
            producer.produce(topic, value=value, partition=count % partitions, on_delivery=done)
            count += 1
        producer.poll(0)
        time.sleep(0.005)
    if producer.flush(60) != 0:
        raise SystemExit("producing the follow topic did not finish")
    return delivered


def bench_follow(
    args: argparse.Namespace,
    formats: list[str],
    broker: str,
    endpoint: str,
    env: dict[str, str],
    work: Path,
) -> tuple[list[Result], str]:
    """Continuous mode: produce-to-committed latency and per-batch overhead of ``--follow``,
    per commit protocol."""
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="bench")
    fmt = formats[0]
    results: list[Result] = []
    with s3count.counting(endpoint) as (counted, counter):
        for protocol in args.protocols:
            result, title = follow_once(
                args, fmt, protocol, broker, counted, counter, env, work, s3
            )
            results.append(result)
    return results, title


def follow_once(
    args: argparse.Namespace,
    fmt: str,
    protocol: str,
    broker: str,
    endpoint: str,
    counter: s3count.Counter_,
    env: dict[str, str],
    work: Path,
    s3: object,
) -> tuple[Result, str]:
    """One protocol's ``run --follow`` on a topic and prefix of its own (``follow-<protocol>``):
    latency, batches, and the S3 requests per object written after the warm-up."""
    bindir = Path(sys.executable).parent
    topic = prefix = f"follow-{protocol}"
    total, active = args.follow_partitions, min(args.follow_active, args.follow_partitions)
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, num_partitions=total)])[topic].result(timeout=60)
    kcql = (
        f"INSERT INTO bench:{prefix} SELECT * FROM {topic} STOREAS `{fmt}` "
        f"PROPERTIES('flush.count'=1000000, 'flush.interval'={args.follow_flush_interval})"
    )
    command = [
        *archive_command(bindir, kcql, broker, endpoint),
        "--follow",
        "--poll-interval",
        str(args.poll_interval),
    ]
    env = {**env, "KAFKA_ARCHIVE_SPOOL_DIR": str(work), "KAFKA_ARCHIVE_COMMIT_PROTOCOL": protocol}
    keys = [f"{prefix}/.kafka-archive/state/{topic}/{p}.json" for p in range(total)]
    poller_of = (
        (lambda: LogPoller(s3, "bench", prefix, topic, total))
        if protocol == "log"
        else (lambda: CommitPoller(s3, "bench", keys))
    )
    running: list[subprocess.Popen[bytes]] = []
    measured: list[Usage] = []
    out_path, err_path = work / f"{prefix}.out", work / f"{prefix}.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        runner = threading.Thread(
            target=lambda: measured.append(
                measure(command, env, started_hook=running.append, stdout=out, stderr=err)
            ),
            name="follow-run",
        )
        runner.start()
        try:
            with poller_of() as poller, contextlib.ExitStack() as stack:
                alive = lambda: runner.is_alive()  # noqa: E731
                while not running and alive():
                    time.sleep(0.01)
                rss = stack.enter_context(RssSampler(running[0].pid)) if running else None
                # Warm up: Spark starts on the first batch with records; every partition gets
                # a record (and so a state); not timed.
                count = max(200, total)
                warmup = produce_at_rate(broker, topic, 3 * count, 0.5, args.value_bytes, 0, total)
                ends = [0] * total
                for partition, offset, _ in warmup:
                    ends[partition] = max(ends[partition], offset + 1)
                if not poller.wait_for(ends, 600, alive):
                    raise SystemExit(f"the warm-up was not archived: {err_path.read_text()}")
                poller.watch(list(range(active)))
                warm = time.monotonic()
                counter.take()
                objects_at_warm = object_count(s3, "bench", f"{prefix}/")
                print(f"  warm-up archived ({len(warmup)} records); producing ...", flush=True)
                lags: list[float] = []
                sent = produce_at_rate(
                    broker,
                    topic,
                    args.follow_rate,
                    args.follow_seconds,
                    args.value_bytes,
                    len(warmup),
                    active,
                    lags,
                )
                for partition, offset, _ in sent:
                    ends[partition] = max(ends[partition], offset + 1)
                timeout = args.follow_flush_interval + args.poll_interval + 300
                if not poller.wait_for(ends, timeout, alive):
                    raise SystemExit(f"not every record was archived: {err_path.read_text()}")
        finally:
            # SIGTERM to the driver alone, as a service manager stopping its main process
            # does: it finishes the batch and stops Spark. The process group (the JVM, the
            # workers) is killed only if it does not end by itself.
            stop_measured(running, runner)
    usage = measured[0]
    # S3 requests per object written after the warm-up (the session's start and the warm-up
    # batch left out; its stop included), counted by the proxy.
    counts = counter.take()
    objects = object_count(s3, "bench", f"{prefix}/") - objects_at_warm
    print(f"  {protocol}: S3 after the warm-up {counts.per_object(objects)}", flush=True)
    latencies = [poller.latency(p, o, at) for p, o, at in sent]
    known = [x for x in latencies if x is not None]
    # The first batch that archived is the warm-up's (the producer waited for its commit):
    # it started Spark's Python workers and is left out.
    batches = [m.groupdict() for m in BATCH_LINE.finditer(out_path.read_text())][1:]
    for number, line in enumerate(m.group(0) for m in BATCH_LINE.finditer(out_path.read_text())):
        print(f"    batch {number + 1}: {line}", flush=True)
    if os.environ.get("BENCH_KEEP_LOGS"):
        for path in (out_path, err_path):
            shutil.copy(path, Path(os.environ["BENCH_KEEP_LOGS"]) / path.name)
    overhead = [float(b["overhead"]) for b in batches]
    plans = [float(b["plan"]) for b in batches]
    # The driver's RSS after the warm-up: the first ten samples against the last ten.
    after = rss.since(warm) if rss is not None else []
    rss_text = (
        f"driver RSS {median(after[:10]) / 1e6:.0f} MB after the warm-up, "
        f"{median(after[-10:]) / 1e6:.0f} MB at the end (max {max(after) / 1e6:.0f} MB, "
        f"{len(after)} samples)"
        if after
        else "driver RSS not sampled"
    )
    took = [sum(float(b[k]) for k in ("plan", "spark", "commit")) for b in batches]
    # Every record once: the archive's data objects read back (JSON: one line a record).
    # In log mode the objects its entries name (an attempt's leftovers are vacuum's).
    named = poller.named if isinstance(poller, LogPoller) else None
    ids = archived_json_ids(s3, "bench", f"{prefix}/", named) if fmt == "JSON" else []
    once = (
        ""
        if fmt != "JSON"
        else (
            "every record once"
            if sorted(ids) == list(range(len(warmup) + len(sent)))
            else f"ARCHIVE WRONG: {len(ids)} records, {len(set(ids))} distinct"
        )
    )
    size = sum(len(value_of(i, args.value_bytes)) for i in range(len(warmup) + len(sent)))
    own = s3count.summary_counts(out_path.read_text(), every=True)
    note = (
        f"{protocol}: S3 after the warm-up {counts.per_object(objects)}, {objects} objects "
        f"(the whole session's summaries: {own.text() if own else 'no S3 line'}); "
        f"produce→committed p50 {percentile(known, 0.5):.1f} s, p99 {percentile(known, 0.99):.1f}"
        f" s, max {max(known, default=0):.1f} s (target p99 < {args.poll_interval:g} + 10 s); "
        f"{len(batches)} batches after the warm-up: {percentile(took, 0.5):.2f} s each (p50, "
        f"max {max(took, default=0):.2f} s), "
        f"plan p50 {percentile(plans, 0.5):.2f} s, p99 {percentile(plans, 0.99):.2f} s, "
        f"overhead p50 {percentile(overhead, 0.5):.2f} s, p99 {percentile(overhead, 0.99):.2f} s;"
        f" {rss_text}; CPU {usage.cpu_seconds / usage.seconds:.2f} cores; {once}; the poller's"
        f" round (the latencies' resolution) p50 {percentile(poller.rounds, 0.5):.2f} s, "
        f"max {max(poller.rounds, default=0):.2f} s; produce() to delivered p99 "
        f"{percentile(lags, 0.99):.2f} s"
        + ("" if usage.code in (0, -signal.SIGTERM, 143) else f"; {outcome(usage)}")
        + ("" if len(known) == len(sent) else f"; {len(sent) - len(known)} never seen committed")
    )
    results = [
        Result.of(
            f"kafka-archive --follow {fmt} {protocol}", usage, size, len(warmup) + len(sent), note
        )
    ]
    print(f"  {note}", flush=True)
    for name in ("plan", "spark", "work", "commit"):
        values = [float(b[name]) for b in batches]
        print(
            f"  per batch {name}: p50 {percentile(values, 0.5):.2f} s, "
            f"p99 {percentile(values, 0.99):.2f} s",
            flush=True,
        )
    title = (
        f"follow shape: {args.follow_rate} records/s of ~{args.value_bytes} B over {active} of "
        f"{total} partitions for {args.follow_seconds:g} s, "
        f"--poll-interval {args.poll_interval:g}, "
        f"flush.interval {args.follow_flush_interval}"
    )
    return results[0], title


def archived_json_ids(
    s3: object, bucket: str, prefix: str, named: set[str] | None = None
) -> list[int]:
    """The ids of every JSON record in the data objects under ``prefix`` (only those in
    ``named``, when given)."""
    ids: list[int] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):  # type: ignore[attr-defined]
        for item in page.get("Contents", []):
            if named is not None and item["Key"] not in named:
                continue
            if "/.kafka-archive/" not in f"/{item['Key']}":
                body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()  # type: ignore[attr-defined]
                ids.extend(json.loads(line)["id"] for line in body.splitlines())
    return ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=SHAPES, default=os.environ.get("BENCH_SHAPE", "keyed"))
    parser.add_argument(
        "--broker",
        choices=BROKERS,
        default=os.environ.get("BENCH_BROKER"),
        help="tansu (default; wide and follow: kafka): tansu answers offsets of many "
        "partitions slowly (a fetch per partition)",
    )
    parser.add_argument("--mb", type=int, default=int(os.environ.get("BENCH_MB", "256")))
    parser.add_argument(
        "--value-bytes", type=int, default=int(os.environ.get("BENCH_VALUE_BYTES", "1000"))
    )
    parser.add_argument(
        "--formats",
        default=os.environ.get("BENCH_FORMATS"),
        help=f"STOREAS to run (default: {','.join(FORMATS)}; wide: JSON), or ICEBERG",
    )
    parser.add_argument(
        "--wide-records",
        type=int,
        default=int(os.environ.get("BENCH_WIDE_RECORDS", "10")),
        help="records per partition of the wide shape",
    )
    parser.add_argument(
        "--wide-topics",
        type=int,
        default=int(os.environ.get("BENCH_WIDE_TOPICS", str(WIDE_TOPICS))),
        help="topics of the wide shape",
    )
    parser.add_argument(
        "--wide-partitions",
        type=int,
        default=int(os.environ.get("BENCH_WIDE_PARTITIONS", str(WIDE_PARTITIONS))),
        help="partitions per topic of the wide shape",
    )
    parser.add_argument(
        "--follow-rate",
        type=int,
        default=int(os.environ.get("BENCH_FOLLOW_RATE", "5000")),
        help="records/s of the follow shape",
    )
    parser.add_argument(
        "--follow-seconds",
        type=float,
        default=float(os.environ.get("BENCH_FOLLOW_SECONDS", "60")),
        help="how long the follow shape produces",
    )
    parser.add_argument(
        "--follow-partitions",
        type=int,
        default=int(os.environ.get("BENCH_FOLLOW_PARTITIONS", str(PARTITIONS))),
        help="partitions of the follow shape's topic",
    )
    parser.add_argument(
        "--follow-active",
        type=int,
        default=int(os.environ.get("BENCH_FOLLOW_ACTIVE", "0")) or None,
        help="partitions the follow shape's producer writes to (default: all)",
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=float(os.environ.get("BENCH_POLL_INTERVAL", "5")),
        help="--poll-interval of the follow shape's run",
    )
    parser.add_argument(
        "--follow-flush-interval",
        type=int,
        default=int(os.environ.get("BENCH_FOLLOW_FLUSH_INTERVAL", "1")),
        help="flush.interval (s) of the follow shape's KCQL",
    )
    parser.add_argument(
        "--evolve-records",
        type=int,
        default=int(os.environ.get("BENCH_EVOLVE_RECORDS", "2000")),
        help="records of the schema evolution case (0: skip it)",
    )
    parser.add_argument(
        "--connect",
        type=int,
        choices=(0, 1),
        default=int(os.environ.get("BENCH_CONNECT", "1")),
        help="keyed/even: run the Kafka Connect peer (1, default; Java and Maven) or not (0)",
    )
    parser.add_argument(
        "--protocols",
        default=os.environ.get("BENCH_PROTOCOL", "states,log"),
        help="wide and follow: the commit_protocol of each measured run, in this order "
        "(default states,log: both, in the same run, each with its S3 requests by type)",
    )
    parser.add_argument("--note", default=os.environ.get("BENCH_NOTE", ""))
    parser.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    args = parser.parse_args()
    if args.shape not in SHAPES:
        parser.error(f"BENCH_SHAPE must be one of {', '.join(SHAPES)}, not {args.shape!r}")
    args.broker = args.broker or (
        "kafka" if args.shape in ("wide", "follow", "compact") else "tansu"
    )
    if args.broker not in BROKERS:
        parser.error(f"BENCH_BROKER must be one of {', '.join(BROKERS)}, not {args.broker!r}")
    args.follow_active = args.follow_active or args.follow_partitions
    args.protocols = [p.strip().lower() for p in args.protocols.split(",") if p.strip()]
    if not args.protocols or not set(args.protocols) <= {"states", "log"}:
        parser.error(f"BENCH_PROTOCOL must name states and/or log, not {args.protocols!r}")
    default_formats = (
        "JSON"
        if args.shape in ("wide", "follow")
        else "JSON,PARQUET"
        if args.shape == "compact"
        else ",".join(FORMATS)
    )
    formats = [f.strip().upper() for f in (args.formats or default_formats).split(",") if f.strip()]

    become_subreaper()
    # A SIGTERM (a timeout, a CI limit) unwinds like ^C: the services and the measured
    # process tree are stopped, not left running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ.update(MOTO_CREDENTIALS)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    work = Path(tempfile.mkdtemp(prefix="kafka-archive-bench-"))
    try:
        with services(args.broker, work) as (broker, endpoint, broker_env):
            env.update(broker_env)
            shape = {"wide": bench_wide, "follow": bench_follow, "compact": bench_compact}.get(
                args.shape, bench_topic
            )
            results, title = shape(args, formats, broker, endpoint, env, work)
    except StackError as exc:  # a service did not start, or java/mvn are missing
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)

    table = render(results)
    print()
    print(table)
    if not args.no_record:
        size = (
            (
                "BENCH_WIDE_RECORDS",
                f"{args.wide_records} BENCH_WIDE_TOPICS={args.wide_topics} "
                f"BENCH_WIDE_PARTITIONS={args.wide_partitions}",
            )
            if args.shape == "wide"
            else (
                "BENCH_FOLLOW_RATE",
                f"{args.follow_rate} BENCH_FOLLOW_SECONDS={args.follow_seconds:g} "
                f"BENCH_FOLLOW_PARTITIONS={args.follow_partitions} "
                f"BENCH_FOLLOW_ACTIVE={args.follow_active} "
                f"BENCH_POLL_INTERVAL={args.poll_interval:g} "
                f"BENCH_FOLLOW_FLUSH_INTERVAL={args.follow_flush_interval}",
            )
            if args.shape == "follow"
            else None
            if args.shape == "compact"
            else ("BENCH_MB", args.mb)
        )
        pairs = (
            ("BENCH_SHAPE", args.shape),
            ("BENCH_BROKER", args.broker),
            size,  # (none of the compact shape's own)
            ("BENCH_VALUE_BYTES", args.value_bytes),
            ("BENCH_FORMATS", ",".join(formats)),
            *(
                [("BENCH_PROTOCOL", ",".join(args.protocols))]
                if args.shape in ("wide", "follow")
                else []
            ),
        )
        settings = " ".join(f"{pair[0]}={pair[1]}" for pair in pairs if pair is not None)
        header = (
            f"\n## {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC · commit "
            f"{commit()} · {machine()} · {args.broker} · {title}\n\n`make bench {settings}`"
            + (f" — {args.note}" if args.note else "")
            + "\n\n"
        )
        with open(HERE / "RESULTS.md", "a") as f:
            f.write(header + table + "\n")
    return 0


def bench_compact(
    args: argparse.Namespace,
    formats: list[str],
    broker: str,
    endpoint: str,
    env: dict[str, str],
    work: Path,
) -> tuple[list[Result], str]:
    """The compact shape (the module's doc): per format, 1,000 small objects made by a
    log-mode run, then ``compact`` measured through a counting proxy."""
    from faultproxy import FaultProxy  # tests/integration/ (services put it on the path)

    import compaction_bench as case  # testbed/

    bindir = Path(sys.executable).parent
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="bench")
    records = case.OBJECTS * case.PER_OBJECT
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic("compact", num_partitions=1)])["compact"].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 50})
    for i in range(records):
        producer.produce("compact", value=json.dumps(case.value(i)).encode(), partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    if producer.flush(300) != 0:
        raise SystemExit("producing the compact shape's topic did not finish")
    env = {**env, "KAFKA_ARCHIVE_COMMIT_PROTOCOL": "log", "KAFKA_ARCHIVE_SPOOL_DIR": str(work)}
    results: list[Result] = []
    for fmt in formats:
        kcql = case.statement("bench", "compact", fmt).replace("bench:arch", f"bench:{fmt}")
        done = subprocess.run(
            archive_command(bindir, kcql, broker, endpoint), env=env, capture_output=True
        )
        if done.returncode != 0:
            raise SystemExit(f"the {fmt} run failed (exit {done.returncode}): {done.stderr!r}")
        listed = [
            item
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix=fmt)
            for item in page.get("Contents", [])
            if "/.kafka-archive/" not in item["Key"]
        ]
        before = {item["Key"] for item in listed}
        size = sum(item["Size"] for item in listed)
        print(f"  {fmt}: {len(listed)} objects, {size / 1e6:.1f} MB archived", flush=True)
        with FaultProxy(endpoint, rate=0.0, seed=0) as proxy:
            command = [
                str(bindir / "kafka-archive"),
                "compact",
                "--kcql",
                kcql,
                "--endpoint-url",
                proxy.url,
            ]
            usage = measure(command, env, stdout=subprocess.DEVNULL)
            sent = case.by_type(proxy.requests)
        after = [
            item
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket="bench", Prefix=fmt)
            for item in page.get("Contents", [])
            if "/.kafka-archive/" not in item["Key"] and item["Key"] not in before
        ]
        figures = case.Figures(
            fmt, len(listed), size, sum(i["Size"] for i in after), usage.seconds, sent
        )
        note = (
            f"{len(listed)} -> {len(after)} objects; S3 requests per object compacted: "
            f"{figures.per_object()}"
        ) + ("" if usage.code == 0 else f"; {outcome(usage)}")
        results.append(
            Result.of(f"compact {fmt}, {len(listed)} objects", usage, size, records, note)
        )
        print(f"  {figures.line()}", flush=True)
    title = (
        f"compact shape: {case.OBJECTS} objects of {case.PER_OBJECT} records of ~1 KB, "
        "one partition, merged into one"
    )
    return results, title


def render(results: list[Result]) -> str:
    by_name = {r.name: r for r in results}
    consume, upload = by_name.get("consume ceiling"), by_name.get("upload ceiling")
    peer = by_name.get("hand-rolled peer")
    ceiling = min(consume.mb_s, upload.mb_s) if consume and upload else 0.0
    # A "× Connect" column when the Connect peer ran (keyed and even shapes).
    connect = by_name.get(CONNECT)
    connect = connect if connect is not None and connect.mb_s else None
    lines = [
        "| step | seconds | plan s | MB/s | records/s | × ceiling | × peer "
        + ("| × Connect " if connect else "")
        + "| CPU s | CPU s/GB | peak RSS MB | note |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: "
        + ("| ---: " if connect else "")
        + "| ---: | ---: | ---: | --- |",
    ]
    for r in results:
        rss = f"{r.peak_rss / 1e6:.0f}" if r.peak_rss else ""
        ratio = f"{r.mb_s / ceiling:.2f}" if r.bytes and ceiling else ""
        vs_peer = f"{r.mb_s / peer.mb_s:.2f}" if r.bytes and peer and peer.mb_s else ""
        plan = f"{r.plan_seconds:.1f}" if r.plan_seconds is not None else ""
        cpu = f"{r.cpu_seconds:.1f}" if r.cpu_seconds is not None else ""
        per_gb = f"{r.cpu_per_gb:.1f}" if r.cpu_per_gb is not None else ""
        mb_s = f"{r.mb_s:.1f}" if r.mb_s >= 1 or not r.bytes else f"{r.mb_s:.3f}"
        vs_connect = (f"| {r.mb_s / connect.mb_s:.2f} " if r.bytes else "| ") if connect else ""
        lines.append(
            f"| {r.name} | {r.seconds:.1f} | {plan} | {mb_s} | {r.rec_s:,.0f} "
            f"| {ratio} | {vs_peer} {vs_connect}| {cpu} | {per_gb} | {rss} | {r.note} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())

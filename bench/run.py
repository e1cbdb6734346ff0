"""The side-by-side benchmark behind ``make bench``: kafka-archive against the machine's
ceilings and the hand-rolled pipeline, on one local broker and S3 endpoint.

Steps (one run, same machine, same services):

1. produce ``--mb`` MB over 4 partitions of ``--value-bytes`` JSON values;
2. consume ceiling: a bare confluent-kafka consumer reads every record, nothing else;
3. upload ceiling: boto3 uploads the same number of bytes in 64 MB objects;
4. hand-rolled peer: a bare consumer printing every value to stdout (what ``kcat -C -e``
   does) piped into ``aws s3 cp - s3://…``; void unless the uploaded size equals the bytes
   consumed;
5. kafka-archive ``run`` for each STOREAS, as a whole process (Spark start-up included),
   with the peak RSS of its process tree (driver JVM, Python driver and workers);
6. a no-op run (nothing new to archive): start-up cost;
7. the tiny-files case: ``--evolve-records`` JSON values of two schema versions (v2
   renames a field) interleaved record by record in one partition, archived as PARQUET
   with ``schema.compatibility`` NONE (an object per record) and BACKWARD (two objects).

Prints a table and appends it, with date, commit and machine, to ``bench/RESULTS.md``.
Ratios, not absolute times, are what compare across machines.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import boto3
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from devstack import MOTO_CREDENTIALS, TANSU_ENV, LocalStack

HERE = Path(__file__).resolve().parent
PARTITIONS = 4
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


def produce(broker: str, topic: str, total_bytes: int, value_bytes: int) -> tuple[int, int]:
    admin = AdminClient({"bootstrap.servers": broker})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 50, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, "compression.type": "none"})
    sent = count = 0
    while sent < total_bytes:
        value = value_of(count, value_bytes)
        while True:
            try:
                producer.produce(topic, value=value, partition=count % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        sent += len(value)
        count += 1
        if count % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300) != 0:
        raise SystemExit("producing the benchmark topic did not finish")
    return count, sent


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
    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"bench-{time.time_ns()}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "fetch.max.bytes": 64 * 1024 * 1024,
                         "max.partition.fetch.bytes": 16 * 1024 * 1024})
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


class RssSampler:
    """Peak summed RSS of a process and all its descendants, sampled from /proc."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _tree(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
        out, todo = [], [self.pid]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(children.get(pid, []))
        return out

    def _run(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.wait(0.25):
            total = 0
            for pid in self._tree():
                try:
                    with open(f"/proc/{pid}/statm") as f:
                        total += int(f.read().split()[1]) * page
                except (OSError, IndexError, ValueError):
                    pass
            self.peak = max(self.peak, total)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def timed_process(command: list[str], env: dict[str, str], **kw: object) -> tuple[float, int, int]:
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, **kw)  # type: ignore[call-overload]
    sampler = RssSampler(process.pid)
    code = process.wait()
    return time.monotonic() - started, sampler.stop(), code


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
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=HERE, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=int(os.environ.get("BENCH_MB", "256")))
    parser.add_argument("--value-bytes", type=int,
                        default=int(os.environ.get("BENCH_VALUE_BYTES", "1000")))
    parser.add_argument("--formats", default=os.environ.get("BENCH_FORMATS", ",".join(FORMATS)))
    parser.add_argument("--evolve-records", type=int,
                        default=int(os.environ.get("BENCH_EVOLVE_RECORDS", "2000")),
                        help="records of the schema evolution case (0: skip it)")
    parser.add_argument("--note", default=os.environ.get("BENCH_NOTE", ""))
    parser.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    args = parser.parse_args()
    formats = [f.strip().upper() for f in args.formats.split(",") if f.strip()]

    os.environ.update(MOTO_CREDENTIALS)
    env = {**os.environ, **TANSU_ENV, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable}
    bindir = Path(sys.executable).parent
    work = Path(tempfile.mkdtemp(prefix="kafka-archive-bench-"))
    results: list[Result] = []
    try:
        with LocalStack(work / "services") as stack:
            broker, endpoint = stack.bootstrap_servers, stack.endpoint_url
            s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
            s3.create_bucket(Bucket="bench")
            topic = "bench"
            print(f"producing {args.mb} MB of ~{args.value_bytes} B values over {PARTITIONS} "
                  "partitions ...", flush=True)
            started = time.monotonic()
            records, size = produce(broker, topic, args.mb * 1_000_000, args.value_bytes)
            print(f"  {records} records, {size / 1e6:.1f} MB in "
                  f"{time.monotonic() - started:.1f} s", flush=True)

            started = time.monotonic()
            got_records, got_bytes = consume_all(broker, topic)
            consume = Result("consume ceiling", time.monotonic() - started, got_bytes,
                             got_records)
            assert got_records == records, (got_records, records)
            results.append(consume)
            print(f"  {consume.name}: {consume.mb_s:.1f} MB/s", flush=True)

            block = os.urandom(UPLOAD_PART)
            started = time.monotonic()
            left, n = size, 0
            while left > 0:
                part = block[: min(left, UPLOAD_PART)]
                s3.put_object(Bucket="bench", Key=f"ceiling/{n}", Body=part)
                left -= len(part)
                n += 1
            upload = Result("upload ceiling", time.monotonic() - started, size, records)
            results.append(upload)
            print(f"  {upload.name}: {upload.mb_s:.1f} MB/s", flush=True)
            empty_bucket(s3, "bench")

            peer_cmd = (
                f"{sys.executable} {HERE / 'peer_consume.py'} {broker} {topic} {PARTITIONS} | "
                f"{bindir / 'aws'} s3 cp - s3://bench/peer/{topic}.jsonl "
                f"--endpoint-url {endpoint} --only-show-errors"
            )
            seconds, rss, code = timed_process(["bash", "-o", "pipefail", "-c", peer_cmd], env)
            uploaded = bucket_size(s3, "bench", "peer/")
            expected = size + records  # values plus one newline each
            note = "" if code == 0 and uploaded == expected else (
                f"VOID: exit {code}, uploaded {uploaded} != consumed {expected}")
            peer = Result("hand-rolled peer", seconds, size, records, rss, note)
            results.append(peer)
            print(f"  {peer.name}: {peer.mb_s:.1f} MB/s {note}", flush=True)
            empty_bucket(s3, "bench")

            for fmt in formats:
                kcql = (f"INSERT INTO bench:{fmt.lower()} SELECT * FROM {topic} "
                        f"STOREAS `{fmt}` WITH_FLUSH_COUNT = 1000000")
                command = [str(bindir / "kafka-archive"), "run", "--kcql", kcql,
                           "--bootstrap-servers", broker, "--endpoint-url", endpoint]
                env["KAFKA_ARCHIVE_SPOOL_DIR"] = str(work)
                seconds, rss, code = timed_process(command, env, stdout=subprocess.DEVNULL)
                note = "" if code == 0 else f"FAILED: exit {code}"
                results.append(Result(f"kafka-archive {fmt}", seconds, size, records, rss, note))
                print(f"  kafka-archive {fmt}: {size / 1e6 / seconds:.1f} MB/s, "
                      f"peak RSS {rss / 1e6:.0f} MB {note}", flush=True)
                if fmt == formats[-1]:
                    seconds, rss, code = timed_process(command, env, stdout=subprocess.DEVNULL)
                    results.append(Result("no-op run (nothing new)", seconds, 0, 0, rss,
                                          "" if code == 0 else f"FAILED: exit {code}"))
                empty_bucket(s3, "bench")

            if args.evolve_records:
                evolving = "bench-evolve"
                evolve_size = produce_evolving(broker, evolving, args.evolve_records,
                                               args.value_bytes)
                for mode in ("NONE", "BACKWARD"):
                    kcql = (f"INSERT INTO bench:evolve-{mode.lower()} SELECT * FROM {evolving} "
                            "STOREAS `PARQUET` PROPERTIES('flush.count'=1000000, "
                            f"'schema.compatibility'='{mode}')")
                    command = [str(bindir / "kafka-archive"), "run", "--kcql", kcql,
                               "--bootstrap-servers", broker, "--endpoint-url", endpoint]
                    seconds, rss, code = timed_process(command, env, stdout=subprocess.DEVNULL)
                    objects = object_count(s3, "bench", f"evolve-{mode.lower()}/")
                    note = f"{objects} objects" + ("" if code == 0 else f"; FAILED: exit {code}")
                    results.append(Result(f"PARQUET v1/v2 interleaved, {mode}", seconds,
                                          evolve_size, args.evolve_records, rss, note))
                    print(f"  v1/v2 interleaved {mode}: {evolve_size / 1e6 / seconds:.2f} MB/s, "
                          f"{note}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    table = render(results, consume, upload, peer)
    print()
    print(table)
    if not args.no_record:
        header = (f"\n## {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC · commit "
                  f"{commit()} · {machine()} · {args.mb} MB, ~{args.value_bytes} B values, "
                  f"{records} records\n\n`make bench BENCH_MB={args.mb} "
                  f"BENCH_VALUE_BYTES={args.value_bytes}`"
                  + (f" — {args.note}" if args.note else "") + "\n\n")
        with open(HERE / "RESULTS.md", "a") as f:
            f.write(header + table + "\n")
    return 0


def render(results: list[Result], consume: Result, upload: Result, peer: Result) -> str:
    ceiling = min(consume.mb_s, upload.mb_s)
    lines = ["| step | seconds | MB/s | records/s | × ceiling | × peer | peak RSS MB | note |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in results:
        rss = f"{r.peak_rss / 1e6:.0f}" if r.peak_rss else ""
        ratio = f"{r.mb_s / ceiling:.2f}" if r.bytes and ceiling else ""
        vs_peer = f"{r.mb_s / peer.mb_s:.2f}" if r.bytes and peer.mb_s else ""
        lines.append(f"| {r.name} | {r.seconds:.1f} | {r.mb_s:.1f} | {r.rec_s:,.0f} | {ratio} "
                     f"| {vs_peer} | {rss} | {r.note} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())

"""Scale (marker ``full``): a job of 50 topics x 20 partitions (1,000 partitions, a few
records each) plans in < 10 s, runs as a whole process in < 60 s, and its no-op run stays
< 5 s; the driver's memory is measured at 1,000 partitions, and planning's at 10,000
(Kafka's offsets stubbed: a single test broker with 10,000 partitions would measure the
broker). Prints the figures (``pytest -s``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_archive import kcql
from kafka_archive.archiver.config.settings import KafkaSettings, S3Settings, Settings
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.kafka.admin import KafkaAdmin, Watermarks
from kafka_archive.archiver.plan import units as jobs
from kafka_archive.archiver.plan.preflight import Preflight
from kafka_archive.archiver.plan.views import partition_states
from kafka_archive.archiver.store.s3 import S3Store

pytestmark = [pytest.mark.integration, pytest.mark.full]

TOPICS, PARTITIONS, PER_PARTITION = 50, 20, 3


def kcql_for(bucket: str, topics: Iterable[str]) -> str:
    return ";\n".join(f"INSERT INTO {bucket}:archive SELECT * FROM {t}" for t in topics)


class _Peak:
    """Polls a process's peak resident set (VmHWM) until it exits."""

    def __init__(self, pid: int) -> None:
        self.pid, self.kib = pid, 0
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        status = Path(f"/proc/{self.pid}/status")
        while True:
            try:
                text = status.read_text()
            except OSError:
                return
            for line in text.splitlines():
                if line.startswith("VmHWM:"):
                    self.kib = max(self.kib, int(line.split()[1]))
            time.sleep(0.05)

    def join(self) -> None:
        self._thread.join(timeout=5)


def _cli(args: list[str]) -> tuple[float, int, str]:
    """Run ``kafka-archive`` as a whole process: (seconds, driver peak RSS in KiB, stderr)."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    started = time.monotonic()
    process = subprocess.Popen(
        [KAFKA_ARCHIVE, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    peak = _Peak(process.pid)
    _, err = process.communicate(timeout=600)
    seconds = time.monotonic() - started
    peak.join()
    assert process.returncode == 0, err.decode()[-2000:]
    return seconds, peak.kib, err.decode()


def test_a_thousand_partitions(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    admin: AdminClient,
    bucket: Callable[..., str],
) -> None:
    prefix = f"scale-{time.monotonic_ns() % 10**8}"
    topics = [f"{prefix}-{i:02d}" for i in range(TOPICS)]
    futures = admin.create_topics([NewTopic(t, num_partitions=PARTITIONS) for t in topics])
    for future in futures.values():
        future.result(timeout=120)
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 20})
    for t in topics:
        for p in range(PARTITIONS):
            for i in range(PER_PARTITION):
                producer.produce(
                    t, value=json.dumps({"t": t, "p": p, "i": i}).encode(), partition=p
                )
    assert producer.flush(60) == 0
    bkt = bucket()
    text = kcql_for(bkt, topics)
    plan = kcql.parse(text)
    settings = Settings(
        KafkaSettings(broker), S3Settings(endpoint_url=s3_endpoint, region="us-east-1")
    )

    # Planning alone, in process (no lease: nothing is written): every state and the
    # markers read, one batched offsets lookup.
    with KafkaAdmin(settings.kafka, "scale-plan") as kafka_admin:
        partitions = kafka_admin.partitions(tuple(topics))
        store = S3Store(settings.s3)
        started = time.monotonic()
        pre = Preflight("scale", store, plan, kafka_admin)
        work = jobs.plan_work(
            partition_states(pre, partitions=partitions, legacy=False),
            store=store,
            admin=kafka_admin,
            settings=settings,
            job="scale",
            run_id="plan",
            now_ms=int(time.time() * 1000),
        )
        plan_seconds = time.monotonic() - started
    assert len(work.units) == TOPICS * PARTITIONS

    args = [
        "run",
        "--kcql",
        text,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        s3_endpoint,
        "--master",
        "local[2]",
    ]
    run_seconds, run_kib, _ = _cli(args)
    noop_seconds, noop_kib, _ = _cli(args)
    keys = [
        item["Key"]
        for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bkt)
        for item in page.get("Contents", [])
        if "/.kafka-archive/" not in item["Key"]
    ]
    records = sum(
        len(s3_client.get_object(Bucket=bkt, Key=k)["Body"].read().splitlines()) for k in keys
    )
    print(
        f"\n1,000 partitions: plan {plan_seconds:.1f} s, run {run_seconds:.1f} s "
        f"(driver peak RSS {run_kib / 1024:.0f} MiB), no-op run {noop_seconds:.1f} s "
        f"(driver peak RSS {noop_kib / 1024:.0f} MiB), {len(keys)} objects"
    )
    assert records == TOPICS * PARTITIONS * PER_PARTITION and len(keys) == TOPICS * PARTITIONS
    assert plan_seconds < 10
    assert run_seconds < 60
    assert noop_seconds < 5


class _StubAdmin:
    """Kafka's side of planning for partitions that do not exist: every one holds 0..100."""

    def offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Watermarks]:
        return {tp: Watermarks(0, 100, 100) for tp in tps}

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        return {}  # a cluster that tells no ids: not checked

    def offset_for_time(self, tp: TopicPartition, timestamp_ms: int) -> int | None:
        raise AssertionError("a job starting at the earliest offset looks up no time")

    def group_offset(self, tp: TopicPartition, group: str) -> int | None:
        raise AssertionError("a job starting at the earliest offset looks up no group")


def test_planning_ten_thousand_partitions(s3_endpoint: str, bucket: Callable[..., str]) -> None:
    bkt = bucket()
    topics = [f"many-{i:03d}" for i in range(500)]
    plan = kcql.parse(kcql_for(bkt, topics))
    partitions = {t: tuple(range(20)) for t in topics}
    settings = Settings(
        KafkaSettings("unused:9092"), S3Settings(endpoint_url=s3_endpoint, region="us-east-1")
    )
    store, admin = S3Store(settings.s3), _StubAdmin()
    tracemalloc.start()
    started = time.monotonic()
    pre = Preflight("scale", store, plan, admin)  # type: ignore[arg-type]
    work = jobs.plan_work(
        partition_states(pre, partitions=partitions, legacy=False),
        store=store,
        admin=admin,  # type: ignore[arg-type]
        settings=settings,
        job="scale",
        run_id="plan",
        now_ms=int(time.time() * 1000),
    )
    seconds = time.monotonic() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"\n10,000 partitions: plan {seconds:.1f} s, planning's peak Python heap "
        f"{peak / 2**20:.0f} MiB"
    )
    assert len(work.units) == 10_000

"""What several integration tests share: records in (:func:`produce_to`, the ``produce`` fixture),
a topic read back with a plain consumer (:func:`kafka_records`), the archive read back with
plain boto3 + json (never our own readers), and the installed command for subprocess runs
(:func:`process_group`)."""

from __future__ import annotations

import contextlib
import email.utils
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_archive.cli import main

KAFKA_ARCHIVE = str(Path(sys.executable).with_name("kafka-archive"))
"""The ``kafka-archive`` command of the interpreter running the tests, for whole-process runs."""


@contextlib.contextmanager
def process_group(command: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """``command`` in its own process group (text pipes for stdout and stderr); whatever is
    left of the group (Spark's JVM, Python workers) is killed at the end."""
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGCONT)
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def process_env(**extra: str) -> dict[str, str]:
    """The environment of a whole-process run (:func:`run_command`): this process's, with
    Spark's driver on loopback and its Python workers on this interpreter, then ``extra``."""
    return {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        **extra,
    }


def run_command(
    kcql: str, broker: str, endpoint: str, *extra: str, master: str = "local[1]"
) -> list[str]:
    """The command line of a whole-process ``kafka-archive run`` of ``kcql`` (Spark's
    ``master``), then ``extra``: for tests that freeze, kill or signal the run."""
    return [KAFKA_ARCHIVE, *run_args(kcql, broker, endpoint), "--master", master, *extra]


def run_here(command: list[str], **env: str) -> int:
    """The whole run of ``command`` (a :func:`run_command`) to its end in this process, on the
    session's SparkContext (its ``--master`` left out: the test asks for the ``spark``
    fixture), with ``env`` set meanwhile: its exit code. For runs that only meet what a fault
    left (no JVM to start); a run a fault hits stays a whole process."""
    assert command[0] == KAFKA_ARCHIVE, command
    at = command.index("--master")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        return main(command[1:at] + command[at + 2 :])


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``kafka-archive *args`` in this process: the exit code, stdout and stderr."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def run_args(
    kcql: str, broker: str, endpoint: str, *extra: str, command: str | None = "run"
) -> list[str]:
    """The command line of ``kafka-archive run`` (or ``command``; None: the options alone, for
    several commands) of ``kcql`` against ``broker`` and the S3 ``endpoint``, then ``extra``."""
    options = ["--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url", endpoint]
    return [*([] if command is None else [command]), *options, *extra]


def produce_to(
    broker: str,
    topic: str,
    records: int | Iterable[Mapping[str, Any]],
    *,
    first: int = 0,
    partitions: int = 2,
    value: Callable[[int], Any] | None = None,
    key: Callable[[int], bytes | None] | None = None,
    headers: Callable[[int], list[tuple[str, bytes]]] | None = None,
    timestamp: int | None = None,
    **config: Any,
) -> None:
    """Records into ``topic``, then wait until all are acknowledged (tests use the ``produce``
    fixture, this bound to the session broker).

    ``records`` is either a count: record i for i in [first, first + count) goes into
    partition ``i % partitions`` with value ``value(i)`` (``{"id": i}`` by default; bytes or
    None as they are, anything else as JSON), ``key(i)`` and ``headers(i)`` when given, at
    ``timestamp + i`` ms when a timestamp is given; or each record's keyword arguments of
    ``Producer.produce`` (value, partition, key, headers, timestamp, on_delivery).
    ``config`` adds producer settings (``batch_size=...`` for ``batch.size``)."""
    if isinstance(records, int):
        records = (
            _numbered(i, partitions, value, key, headers, timestamp)
            for i in range(first, first + records)
        )
    # Idempotent: a batch retried under load must not land twice or behind a later one, which
    # would move records to other offsets than the test expects.
    settings = {"bootstrap.servers": broker, "linger.ms": 5, "enable.idempotence": True}
    settings.update({name.replace("_", "."): v for name, v in config.items()})
    producer = Producer(settings)
    for n, record in enumerate(records):
        while True:
            try:
                producer.produce(topic, **record)
                break
            except BufferError:  # the local queue is full: let it drain
                producer.poll(0.1)
        if n % 5000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def _numbered(
    i: int,
    partitions: int,
    value: Callable[[int], Any] | None,
    key: Callable[[int], bytes | None] | None,
    headers: Callable[[int], list[tuple[str, bytes]]] | None,
    timestamp: int | None,
) -> dict[str, Any]:
    """Record i of a counted :func:`produce_to`."""
    data = {"id": i} if value is None else value(i)
    record: dict[str, Any] = {
        "value": data if data is None or isinstance(data, bytes) else json.dumps(data).encode(),
        "partition": i % partitions,
    }
    if key is not None:
        record["key"] = key(i)
    if headers is not None:
        record["headers"] = headers(i)
    if timestamp is not None:
        record["timestamp"] = timestamp + i
    return record


class KafkaRecord(NamedTuple):
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def kafka_records(
    broker: str, topic: str, partitions: int, *, committed: bool = True
) -> list[KafkaRecord]:
    """Every record of the topic's first ``partitions`` partitions as a plain consumer reads
    it (``read_committed`` unless told otherwise), in (partition, offset) order."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker,
            "group.id": f"test-reader-{topic}",
            "enable.partition.eof": True,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
        }
    )
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
    found: list[KafkaRecord] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    while len(at_end) < partitions and time.monotonic() < deadline:
        for m in consumer.consume(1000, 0.2):
            if m.error() is not None:
                at_end.add(m.partition())
                continue
            found.append(
                KafkaRecord(
                    m.partition(),
                    m.offset(),
                    m.key(),
                    m.value(),
                    tuple(m.headers() or ()),
                    m.timestamp()[1],
                )
            )
    consumer.close()
    assert len(at_end) == partitions, "the reference consumer did not reach the end"
    return sorted(found, key=lambda r: (r.partition, r.offset))


def archived_ids(s3: Any, bucket: str, prefix: str = "arch/") -> list[int]:
    """The sorted ids of every JSON record in the data objects under ``prefix``."""
    ids: list[int] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if "/.kafka-archive/" not in item["Key"] and "/_dead-letter/" not in item["Key"]:
                body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                ids.extend(json.loads(line)["id"] for line in body.decode().splitlines())
    return sorted(ids)


def wait_lease_expired(s3: Any, bucket: str, prefix: str = "", timeout: float = 120) -> None:
    """Until every lease of the jobs under ``prefix`` has run out by the wall clock, as the
    next run judges it (``expires_at_ms`` of each ``lock.json``, read again each time: a
    renewal sent just before its run was frozen may land late); a frozen run cannot renew.
    Instead of sleeping the lease's TTL and a guess of margin."""
    deadline = time.monotonic() + timeout
    while True:
        ends: list[int] = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                if "/.kafka-archive/" in f"/{item['Key']}" and item["Key"].endswith("lock.json"):
                    body = json.loads(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
                    ends.append(int(body["expires_at_ms"]))
        assert ends, f"no lease under s3://{bucket}/{prefix}"
        left = max(ends) - time.time() * 1000
        if left < 0:
            return
        assert time.monotonic() < deadline, f"the lease did not run out in {timeout} s"
        time.sleep(min(0.2, left / 1000 + 0.01))


def wait_presence_expired(s3: Any, bucket: str, prefix: str = "arch", timeout: float = 120) -> None:
    """Until the commit_protocol=log presence under ``prefix`` (``presence.json``) has not
    been renewed for its holder's ``ttl_seconds`` by the store's clock (its Last-Modified
    against the Date of the response that read it), as the next run judges it; read again
    each time (a renewal sent before its session was frozen may land late)."""
    key = f"{prefix}/.kafka-archive/presence.json"
    deadline = time.monotonic() + timeout
    while True:
        got = s3.get_object(Bucket=bucket, Key=key)
        ttl = json.loads(got["Body"].read())["ttl_seconds"]
        served = email.utils.parsedate_to_datetime(got["ResponseMetadata"]["HTTPHeaders"]["date"])
        left = ttl - (served - got["LastModified"]).total_seconds()
        if left <= 0:
            return
        assert time.monotonic() < deadline, f"the presence did not expire in {timeout} s"
        time.sleep(min(0.5, left + 0.05))


def create_topic(admin: AdminClient, partitions: int = 1, prefix: str = "t-") -> str:
    """A fresh topic of the session broker: its name (``prefix`` and a random tail)."""
    name = f"{prefix}{uuid.uuid4().hex[:10]}"
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions)])
    futures[name].result(timeout=30)
    return name


def create_bucket(s3_client: Any) -> str:
    """A fresh bucket: its name."""
    name = f"b-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    return name


@dataclass(frozen=True)
class Bed:
    """The session's broker, moto and SparkContext for a module-scoped fixture: an archive
    that several tests only read is made once for them (fresh topics and buckets, as the
    ``topic``, ``bucket`` and ``produce`` fixtures make them)."""

    broker: str
    endpoint: str
    s3: Any
    admin: AdminClient

    def topic(self, partitions: int = 1, prefix: str = "t-") -> str:
        return create_topic(self.admin, partitions, prefix)

    def bucket(self) -> str:
        return create_bucket(self.s3)

    def produce(self, topic: str, records: Any, **options: Any) -> None:
        produce_to(self.broker, topic, records, **options)

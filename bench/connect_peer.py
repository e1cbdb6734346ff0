"""The Kafka Connect peer of ``make bench``: a standalone Connect worker running an S3 sink
connector, against the bench's broker and S3 endpoint, timed from its start until its
consumer group's lag is zero and every record is in S3.

No packaged S3 sink connector resolves from this machine's Maven Central (Aiven's, Lenses',
Confluent's, Camel's per-component ``camel-aws2-s3-kafka-connector``: ``bench/RESULTS.md``
lists what was tried). What resolves is Apache Camel's generic connector core
(``org.apache.camel.kafkaconnector:camel-kafka-connector`` 0.11.0, its ``CamelSinkConnector``
sends every record to a Camel endpoint URL) and Camel's S3 component of the version that
core is built on (``org.apache.camel:camel-aws2-s3`` 3.11.1): the plugin below is those two
and their dependencies, as Camel's own per-component connector packages them.

- Worker: ``org.apache.kafka.connect.cli.ConnectStandalone`` of ``connect-runtime`` 4.1.1
  (the broker's version), with the JVM options of Kafka's own start scripts; offsets in a
  file, flushed every second (the default is a minute: lag would read as non-zero long
  after the records are in S3).
- Connector: records as bytes (``ByteArrayConverter``), sent to ``aws2-s3://`` in the S3
  component's streaming upload mode: the task appends each value to a buffer and uploads it
  as one object of ``BATCH_RECORDS`` records (the component numbers the object's one part by
  its record count: at most 10,000); object names ``connect/bench-<uuid>.jsonl``. Values are
  written back to back, without a separator (the mode adds none): each is one JSON object, so
  the archive is still countable. The last, partial object is uploaded when the task stops:
  the bench stops the worker once the lag is zero. Not the mode's ``streamingUploadTimeout``
  (a fixed-rate timer on another thread that uploads and resets the buffer while the task
  writes into it: records are dropped), and one task (every task names its first object
  ``connect/bench.jsonl``, without a UUID: tasks overwrite each other's).
- Camel 3.11's S3 component has no path-style switch (``forcePathStyle`` came with Camel 4),
  and the AWS SDK puts a DNS-compatible bucket name in the host name, which a loopback
  endpoint cannot serve: the peer writes to the bucket ``bench.connect``, whose dot makes the
  SDK use path-style requests. Credentials come from the environment (the SDK's default
  provider chain), never from a command line or a file.
- What it does not guarantee: the task hands a record to the S3 producer, which buffers it;
  Connect commits the record's offset at the next flush whether or not the buffer has been
  uploaded. A crash loses the buffer's records (at most once). The bench only times it.

``BENCH_CONNECT_LOG=INFO`` makes the worker's log (in the bench's temporary directory) verbose.
The jars are fetched once by Maven into ``~/.cache/kafka-archive/connect-…``
(``$XDG_CACHE_HOME`` honoured) from the two pom templates below; nothing is written into the
work tree.
"""

from __future__ import annotations

import datetime
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from procstat import Usage, measure, stop_measured

import maven
from devstack import LOOPBACK, free_port

CONNECT_VERSION = "4.1.1"
CAMEL_CONNECTOR_VERSION = "0.11.0"
CAMEL_VERSION = "3.11.1"  # the camel.version of camel-kafka-connector 0.11.0's parent pom
BUCKET = "bench.connect"  # the dot: path-style requests (see the module's docstring)
PREFIX = "connect/"
NAME = "camel-s3-sink"
GROUP = f"connect-{NAME}"  # a sink connector's consumer group
BATCH_RECORDS = 10_000  # the S3 part number is the record count: at most 10,000
BATCH_BYTES = 64 * 1024 * 1024
# The options kafka-run-class.sh and connect-standalone.sh start a worker with.
_JVM_OPTIONS = (
    "-Xms256M",
    "-Xmx2G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)

_POM = """\
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kafka-archive</groupId>
  <artifactId>{artifact}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""

_WORKER_DEPENDENCIES = f"""\
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>connect-runtime</artifactId>
      <version>{CONNECT_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>2.24.3</version>
    </dependency>"""

# Kafka's and slf4j's classes come from the worker (Connect loads them from its own class
# path for every plugin): the plugin leaves them out, and the schema registry converter
# (apicurio) the bench does not use.
_PLUGIN_DEPENDENCIES = f"""\
    <dependency>
      <groupId>org.apache.camel.kafkaconnector</groupId>
      <artifactId>camel-kafka-connector</artifactId>
      <version>{CAMEL_CONNECTOR_VERSION}</version>
      <exclusions>
        <exclusion><groupId>org.apache.kafka</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>io.apicurio</groupId><artifactId>*</artifactId></exclusion>
        <exclusion><groupId>org.slf4j</groupId><artifactId>*</artifactId></exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>org.apache.camel</groupId>
      <artifactId>camel-aws2-s3</artifactId>
      <version>{CAMEL_VERSION}</version>
      <exclusions>
        <exclusion><groupId>org.slf4j</groupId><artifactId>*</artifactId></exclusion>
      </exclusions>
    </dependency>"""

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = ${env:BENCH_CONNECT_LOG:-WARN}
rootLogger.appenderRef.out.ref = out
logger.started.name = org.apache.kafka.connect.runtime.Connect
logger.started.level = INFO
logger.group.name = org.apache.kafka.clients.consumer.internals.ConsumerCoordinator
logger.group.level = INFO
"""
# Lines of the worker's log that mark its phases (see :func:`phases`).
_STARTED = "Kafka Connect started"
_JOINED = "Successfully joined group"
_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


class ConnectUnavailable(RuntimeError):
    """The Connect worker or its plugin could not be fetched, or Java/Maven are missing."""


@dataclass(frozen=True)
class ConnectRun:
    """A measured run: ``usage.seconds`` is the time from start until the lag was zero and
    every byte was in S3 (the worker's stop after that is not timed, its CPU is counted)."""

    usage: Usage
    note: str


def _fetch(artifact: str, dependencies: str, target: Path) -> Path:
    """``target`` filled with the jars of a pom of ``dependencies`` (once; Maven)."""
    if shutil.which("java") is None:
        raise ConnectUnavailable("needs Java 17+ and Maven (apt-get install maven)")
    try:
        return maven.fetch_jars(_POM.format(artifact=artifact, dependencies=dependencies), target)
    except maven.MavenMissing:
        raise ConnectUnavailable("needs Java 17+ and Maven (apt-get install maven)") from None
    except maven.MavenError as exc:
        raise ConnectUnavailable(f"Maven could not fetch {artifact}: {exc.first_error()}") from None


def ensure_jars() -> tuple[Path, Path]:
    """The worker's class path directory and the ``plugin.path`` holding the S3 sink."""
    root = maven.cache_root() / f"connect-{CONNECT_VERSION}-camel-{CAMEL_CONNECTOR_VERSION}"
    libs = _fetch("connect-worker", _WORKER_DEPENDENCIES, root / "libs")
    _fetch("connect-s3-sink", _PLUGIN_DEPENDENCIES, root / "plugins" / "camel-s3-sink")
    return libs, root / "plugins"


def sink_url(endpoint: str) -> str:
    options = {
        "useDefaultCredentialsProvider": "true",
        "region": "us-east-1",
        "overrideEndpoint": "true",
        "uriEndpointOverride": f"RAW({endpoint})",
        "streamingUploadMode": "true",
        "batchSize": str(BATCH_BYTES),
        "batchMessageNumber": str(BATCH_RECORDS),
        "namingStrategy": "random",
        "keyName": f"{PREFIX}bench.jsonl",
    }
    return f"aws2-s3://{BUCKET}?" + "&".join(f"{k}={v}" for k, v in options.items())


def _properties(path: Path, settings: Mapping[str, str]) -> Path:
    # Java properties: ':' and '=' in values need no escape after the first separator.
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def command(
    libs: Path,
    plugins: Path,
    broker: str,
    endpoint: str,
    topic: str,
    work: Path,
    session_timeout_ms: int | None = None,
) -> list[str]:
    """``java … ConnectStandalone worker.properties connector.properties``."""
    work.mkdir(parents=True, exist_ok=True)
    worker = _properties(
        work / "worker.properties",
        {
            "bootstrap.servers": broker,
            "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "offset.storage.file.filename": str(work / "connect.offsets"),
            "offset.flush.interval.ms": "1000",
            "plugin.path": str(plugins),
            "listeners": f"http://{LOOPBACK}:{free_port()}",
            # Fetch as the other consumers of the bench do (16 MB per partition).
            "consumer.max.partition.fetch.bytes": str(16 * 1024 * 1024),
            "consumer.fetch.max.bytes": str(64 * 1024 * 1024),
            **(
                {"consumer.session.timeout.ms": str(session_timeout_ms)}
                if session_timeout_ms
                else {}
            ),
        },
    )
    connector = _properties(
        work / "connector.properties",
        {
            "name": NAME,
            "connector.class": "org.apache.camel.kafkaconnector.CamelSinkConnector",
            "tasks.max": "1",
            "topics": topic,
            "camel.sink.url": sink_url(endpoint),
        },
    )
    log4j = work / "log4j2.properties"
    log4j.write_text(_LOG4J2)
    return [
        "java",
        *_JVM_OPTIONS,
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        str(libs / "*"),
        "org.apache.kafka.connect.cli.ConnectStandalone",
        str(worker),
        str(connector),
    ]


def _lag(admin: AdminClient, topic: str, ends: Mapping[int, int]) -> int | None:
    """Records the sink's consumer group has not committed yet (None: no commit yet)."""
    request = ConsumerGroupTopicPartitions(GROUP, [TopicPartition(topic, p) for p in sorted(ends)])
    try:
        answer = admin.list_consumer_group_offsets([request])[GROUP].result(timeout=10)
    except KafkaException:  # the group has no commit yet, or a transient error
        return None
    committed = {tp.partition: tp.offset for tp in answer.topic_partitions}
    if any(committed.get(p, -1) < 0 for p in ends):
        return None
    return sum(max(0, end - committed[p]) for p, end in ends.items())


def _s3_bytes(s3: object, bucket: str, prefix: str) -> int:
    total = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):  # type: ignore[attr-defined]
        total += sum(item["Size"] for item in page.get("Contents", []))
    return total


_ID = re.compile(rb'\{"id": (\d+),')


def record_ids(body: bytes) -> list[int]:
    """The ids of the bench's JSON values written back to back (each starts ``{"id": N,``)."""
    return [int(m) for m in _ID.findall(body)]


def archived_ids(s3: object, bucket: str = BUCKET, prefix: str = PREFIX) -> tuple[int, list[int]]:
    """Objects, and every record's id in them (values back to back: each starts with
    ``{"id": N,``)."""
    ids: list[int] = []
    objects = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):  # type: ignore[attr-defined]
        for item in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()  # type: ignore[attr-defined]
            ids.extend(record_ids(body))
            objects += 1
    return objects, ids


def end_offsets(broker: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": broker, "group.id": "bench-connect-ends"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def phases(log: str, started: datetime.datetime) -> str:
    """When the worker had started and when its task had joined the group, in seconds from
    ``started`` (the wall clock at the worker's start), from its log."""

    def at(marker: str) -> str:
        for line in log.splitlines():
            stamp = _STAMP.match(line)
            if stamp and marker in line:
                when = datetime.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f")
                return f"{(when - started).total_seconds():.1f} s"
        return "?"

    return f"worker started at {at(_STARTED)}, task in its group at {at(_JOINED)}"


def run(
    broker: str,
    endpoint: str,
    topic: str,
    partitions: int,
    records: int,
    size: int,
    env: Mapping[str, str],
    work: Path,
    s3: object,
    session_timeout_ms: int | None = None,
    timeout: float | None = None,
) -> ConnectRun:
    """Start the worker, wait until its group's lag is zero, stop it (its S3 producer
    uploads what it still buffers) and check that every record is in S3 once; raises
    :class:`ConnectUnavailable` when the jars cannot be had."""
    libs, plugins = ensure_jars()
    s3.create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
    ends = end_offsets(broker, topic, partitions)
    admin = AdminClient({"bootstrap.servers": broker})
    directory = work / "connect"
    argv = command(libs, plugins, broker, endpoint, topic, directory, session_timeout_ms)
    log_path = directory / "worker.log"
    if timeout is None:
        timeout = 120 + size / 1e6  # 1 s per MB: far beyond any sink this bench has seen
    running: list[subprocess.Popen[bytes]] = []
    measured: list[Usage] = []
    lag: int | None = None
    lag_zero_at = 0.0
    with open(log_path, "wb") as log:
        runner = threading.Thread(
            target=lambda: measured.append(
                measure(
                    argv,
                    env,
                    started_hook=running.append,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            ),
            name="connect-peer",
        )
        wall = datetime.datetime.now()
        started = time.monotonic()
        runner.start()
        try:
            while time.monotonic() - started < timeout and runner.is_alive():
                lag = _lag(admin, topic, ends)
                if lag == 0:
                    lag_zero_at = time.monotonic() - started
                    break
                time.sleep(0.25)
        finally:
            # SIGTERM to the worker: it commits, stops its task, whose S3 producer uploads
            # the records it still buffers; SIGKILL to its process group if it does not end.
            stop_measured(running, runner)
    usage = measured[0]
    text = log_path.read_text(errors="replace")
    uploaded = _s3_bytes(s3, BUCKET, PREFIX)
    if lag != 0 or uploaded != size:
        tail = "; ".join(text.splitlines()[-3:])
        return ConnectRun(
            usage,
            f"VOID: {'lag not zero' if lag != 0 else 'stopped'} after {usage.seconds:.0f} s "
            f"(lag {lag}, {uploaded} of {size} bytes in S3); worker log: {tail[-300:]}",
        )
    objects, ids = archived_ids(s3)
    complete = len(ids) == records and len(set(ids)) == records
    check = (
        f"{objects} objects, every record once"
        if complete
        else f"VOID: {len(ids)} records in S3 ({len(set(ids))} distinct) of {records}"
    )
    return ConnectRun(
        usage,
        f"{check}; {phases(text, wall)}, lag zero at {lag_zero_at:.1f} s, "
        f"stopped with the last object uploaded at {usage.seconds:.1f} s",
    )

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
  after the records are in S3); plugins found by their ServiceLoader manifests
  (``plugin.discovery=service_load``, with a manifest jar added to the plugin, as Kafka's
  ``connect-plugin-path sync-manifests`` does), not by a scan of every class (~3.5 CPU-s).
- Connector: keys, values and headers as bytes (``ByteArrayConverter``: the sink writes
  values only), sent to ``aws2-s3://bench.connect`` with the S3 component's options set on
  the component (``camel.component.aws2-s3.*``), not in the URL: the connector sends each
  record with a dynamic ``toD`` that parses its URL once per record (with the options in
  the URL, that parsing was ~40% of the task thread). The component's streaming upload
  mode: the task appends each value to a buffer and uploads it
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
- Failures: whatever fails (the jars, the broker or S3 endpoint before the start, the
  worker's start or an early exit, the broker failing every lag poll for a minute, a lag not
  zero within ``timeout``, S3 not holding every record once) is the row's one-line ``NOT
  RUN`` or ``VOID`` reason, and the bench goes on; the worker's process group is stopped in
  every case.

``BENCH_CONNECT_LOG=INFO`` makes the worker's log (in the bench's temporary directory) verbose;
``BENCH_CONNECT_JVM_OPTIONS`` adds JVM options (e.g. a flight recording:
``-XX:StartFlightRecording=filename=/tmp/connect.jfr,settings=profile``).
The jars are fetched once by Maven into ``~/.cache/kafka-archive/connect-…``
(``$XDG_CACHE_HOME`` honoured) from the two pom templates below; nothing is written into the
work tree.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
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
    """A run: ``usage.seconds`` is the time from start until the lag was zero and every byte
    was in S3 (the worker's stop after that is not timed, its CPU is counted); ``usage`` is
    None when the worker did not start. A ``note`` starting ``VOID`` or ``NOT RUN`` says
    why the run measured nothing."""

    usage: Usage | None
    note: str

    @property
    def valid(self) -> bool:
        return self.usage is not None and not self.note.startswith(("VOID", "NOT RUN"))


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
    plugin = _fetch("connect-s3-sink", _PLUGIN_DEPENDENCIES, root / "plugins" / "camel-s3-sink")
    manifest = plugin / "kafka-archive-service-manifest.jar"
    if not manifest.is_file():
        _write_manifest_jar(manifest)
    return libs, root / "plugins"


_SINK_SERVICE = "META-INF/services/org.apache.kafka.connect.sink.SinkConnector"


def _write_manifest_jar(path: Path) -> None:
    """A jar holding only the ServiceLoader manifest of the Camel sink connector, which its
    0.11.0 jar lacks: what Kafka's ``connect-plugin-path sync-manifests`` adds, so that the
    worker finds its plugins without scanning every class (``plugin.discovery=service_load``,
    the mode Kafka's own warning points to)."""
    staging = path.with_suffix(".tmp")
    with zipfile.ZipFile(staging, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        jar.writestr(_SINK_SERVICE, "org.apache.camel.kafkaconnector.CamelSinkConnector\n")
    staging.rename(path)


def sink_properties(endpoint: str) -> dict[str, str]:
    """The connector's Camel settings. The connector sends each record with a dynamic
    ``toD(camel.sink.url)``, which parses and normalizes the URL once per record: the options
    are set on the component (``camel.component.aws2-s3.*``), the URL is the bucket alone."""
    options = {
        "useDefaultCredentialsProvider": "true",
        "region": "us-east-1",
        "overrideEndpoint": "true",
        "uriEndpointOverride": endpoint,
        "streamingUploadMode": "true",
        "batchSize": str(BATCH_BYTES),
        "batchMessageNumber": str(BATCH_RECORDS),
        "namingStrategy": "random",
        "keyName": f"{PREFIX}bench.jsonl",
    }
    return {
        "camel.sink.url": f"aws2-s3://{BUCKET}",
        **{f"camel.component.aws2-s3.{k}": v for k, v in options.items()},
    }


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
            # Headers as bytes too: the sink writes values only (the default converter parses
            # every header value: 12% of the task thread's samples in the keyed shape, 6% now).
            "header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            # No class scan at start: the plugin has its ServiceLoader manifest (see
            # _write_manifest_jar).
            "plugin.discovery": "service_load",
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
            **sink_properties(endpoint),
        },
    )
    log4j = work / "log4j2.properties"
    log4j.write_text(_LOG4J2)
    return [
        "java",
        *_JVM_OPTIONS,
        *os.environ.get("BENCH_CONNECT_JVM_OPTIONS", "").split(),
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        str(libs / "*"),
        "org.apache.kafka.connect.cli.ConnectStandalone",
        str(worker),
        str(connector),
    ]


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()).replace("|", "/")
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


class PeerFailed(RuntimeError):
    """A step of the peer failed (its row is void; the bench goes on)."""


# Answers to the group's offsets that mean "no commit yet" (the group or its coordinator does
# not exist yet), not a failure.
_NOT_YET = {
    KafkaError.GROUP_ID_NOT_FOUND,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
}


class LagPoller:
    """The records the sink's consumer group has not committed yet, asked of the broker."""

    def __init__(self, broker: str, topic: str, ends: Mapping[int, int], timeout: float = 10):
        self._topic, self._ends, self._timeout = topic, dict(ends), timeout
        self._client_error = ""
        # The client's own log is off: a broker that went away is in the row's note once,
        # not on stderr every second.
        self._admin = AdminClient(
            {"bootstrap.servers": broker, "log_level": 0, "error_cb": self._on_error}
        )

    def _on_error(self, error: KafkaError) -> None:
        self._client_error = error.str()

    def lag(self) -> int | None:
        """The lag (None: no commit yet); :class:`PeerFailed` when the broker fails."""
        partitions = [TopicPartition(self._topic, p) for p in sorted(self._ends)]
        request = ConsumerGroupTopicPartitions(GROUP, partitions)
        try:
            future = self._admin.list_consumer_group_offsets([request])[GROUP]
            answer = future.result(timeout=self._timeout)
        except TimeoutError:
            why = f" ({self._client_error})" if self._client_error else ""
            raise PeerFailed(f"no answer from the broker within {self._timeout:g} s{why}") from None
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() in _NOT_YET:
                return None
            raise PeerFailed(one_line(exc)) from None
        committed = {tp.partition: tp.offset for tp in answer.topic_partitions}
        if any(committed.get(p, -1) < 0 for p in self._ends):
            return None
        return sum(max(0, end - committed[p]) for p, end in self._ends.items())


def wait_for_lag_zero(
    alive: Callable[[], bool],
    lag_of: Callable[[], int | None],
    timeout: float,
    error_window: float,
    interval: float = 0.25,
) -> tuple[float | None, str]:
    """Seconds until ``lag_of()`` was 0, or None and why not: the worker is no longer
    ``alive``, ``timeout`` has passed, or every poll failed for ``error_window`` seconds."""
    started = time.monotonic()
    failing_since: float | None = None
    lag: int | None = None
    while True:
        now = time.monotonic() - started
        if not alive():
            return None, f"the worker exited before its lag was zero (lag {lag})"
        if now >= timeout:
            return None, f"lag not zero after {timeout:.0f} s (lag {lag})"
        try:
            lag = lag_of()
            failing_since = None
        except PeerFailed as exc:
            failing_since = now if failing_since is None else failing_since
            if now - failing_since >= error_window:
                return None, f"lag polling failed for {now - failing_since:.0f} s: {exc}"
        if lag == 0:
            return time.monotonic() - started, ""
        time.sleep(interval)


class Worker:
    """``argv`` run and measured (``procstat.measure``) on a thread, in its own process
    group, until :meth:`stop`."""

    def __init__(self, argv: list[str], env: Mapping[str, str], log: BinaryIO) -> None:
        self.usage: Usage | None = None
        self.error: BaseException | None = None
        self._process: list[subprocess.Popen[bytes]] = []
        self._started = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(argv, env, log), name="connect-peer", daemon=True
        )
        self._thread.start()

    def _run(self, argv: list[str], env: Mapping[str, str], log: BinaryIO) -> None:
        try:
            self.usage = measure(
                argv,
                env,
                started_hook=self._on_start,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        except BaseException as exc:  # e.g. the program cannot be started
            self.error = exc
        finally:
            self._started.set()

    def _on_start(self, process: subprocess.Popen[bytes]) -> None:
        self._process.append(process)
        self._started.set()

    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, grace: float) -> None:
        """SIGTERM (the worker commits, stops its task, whose S3 producer uploads what it
        still buffers); SIGKILL to its process group after ``grace`` seconds, and to what
        is left of the group once the worker has ended."""
        self._started.wait()
        stop_measured(self._process, self._thread, grace)
        # While a process of the group lives, its id is not reused: the kill hits ours only.
        if self._process and _group_members(self._process[0].pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process[0].pid, signal.SIGKILL)


def _group_members(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` (from /proc)."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
                members.append(int(entry))
    return members


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


_BROKER_TIMEOUT = 30.0
# Seconds a SIGTERM'd worker has to end before its process group is killed: to upload its
# last object after a good run, and to close after a failed one.
STOP_GRACE, FAILED_STOP_GRACE = 120.0, 30.0


def end_offsets(broker: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer(
        {"bootstrap.servers": broker, "group.id": "bench-connect-ends", "log_level": 0}
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=_BROKER_TIMEOUT)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def log_hint(log: str) -> str:
    """The worker log's last ERROR line (else its last line), shortened, for a row's note."""
    lines = [" ".join(line.split()) for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if " ERROR " in f" {line} "]
    hint = (errors or lines or ["empty"])[-1].replace("|", "/")
    return hint if len(hint) <= 200 else hint[:197] + "..."


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
    error_window: float = 60,
) -> ConnectRun:
    """Start the worker, wait until its group's lag is zero, stop it (its S3 producer
    uploads what it still buffers) and check that every record is in S3 once.

    Raises :class:`ConnectUnavailable` when the jars cannot be had or the run cannot be
    prepared (not run); any later failure (the worker does not start or exits, the lag is
    not zero within ``timeout`` s, the broker fails every poll for ``error_window`` s, S3
    does not hold every record once) is a ``VOID`` or ``NOT RUN`` note, and the worker's
    process group is stopped in every case."""
    try:
        libs, plugins = ensure_jars()
    except OSError as exc:  # e.g. the cache is not writable
        raise ConnectUnavailable(f"could not set up its jars: {one_line(exc)}") from None
    try:
        s3.create_bucket(Bucket=BUCKET)  # type: ignore[attr-defined]
        ends = end_offsets(broker, topic, partitions)
        poller = LagPoller(broker, topic, ends)
    except Exception as exc:  # the broker or S3 endpoint fails: the bench goes on
        raise ConnectUnavailable(f"could not prepare its run: {one_line(exc)}") from None
    directory = work / "connect"
    argv = command(libs, plugins, broker, endpoint, topic, directory, session_timeout_ms)
    log_path = directory / "worker.log"
    if timeout is None:
        timeout = 120 + size / 1e6  # 1 s per MB: far beyond any sink this bench has seen
    return _watch(argv, env, log_path, poller.lag, timeout, error_window, s3, records, size)


def _watch(
    argv: list[str],
    env: Mapping[str, str],
    log_path: Path,
    lag_of: Callable[[], int | None],
    timeout: float,
    error_window: float,
    s3: object,
    records: int,
    size: int,
) -> ConnectRun:
    """Run the worker ``argv`` until ``lag_of()`` is zero, stop it, check S3."""
    lag_zero_at: float | None = None
    why = "interrupted"
    with open(log_path, "wb") as log:
        wall = datetime.datetime.now()
        worker = Worker(argv, env, log)
        try:
            lag_zero_at, why = wait_for_lag_zero(worker.alive, lag_of, timeout, error_window)
        finally:
            # A worker that failed has nothing left to upload: a shorter grace.
            worker.stop(STOP_GRACE if lag_zero_at is not None else FAILED_STOP_GRACE)
    usage = worker.usage
    if usage is None:
        return ConnectRun(None, f"NOT RUN: the worker did not start: {one_line(worker.error)}")
    text = log_path.read_text(errors="replace")
    tail = log_hint(text)
    if lag_zero_at is None:
        return ConnectRun(
            usage,
            f"VOID: {why}; stopped after {usage.seconds:.0f} s (exit {usage.code}); "
            f"worker log: {tail}",
        )
    try:
        uploaded = _s3_bytes(s3, BUCKET, PREFIX)
        objects, ids = archived_ids(s3) if uploaded == size else (0, [])
    except Exception as exc:  # the S3 endpoint fails: the row cannot be checked
        return ConnectRun(usage, f"VOID: could not read its objects back: {one_line(exc)}")
    if uploaded != size:
        return ConnectRun(
            usage,
            f"VOID: {uploaded} of {size} bytes in S3 after it stopped (exit {usage.code}); "
            f"worker log: {tail}",
        )
    if len(ids) != records or len(set(ids)) != records:
        return ConnectRun(
            usage, f"VOID: {len(ids)} records in S3 ({len(set(ids))} distinct) of {records}"
        )
    return ConnectRun(
        usage,
        f"{objects} objects, every record once; {phases(text, wall)}, lag zero at "
        f"{lag_zero_at:.1f} s, stopped with the last object uploaded at {usage.seconds:.1f} s",
    )

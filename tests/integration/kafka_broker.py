"""Apache Kafka's own broker for the integration tests: single node, KRaft, on loopback.

The broker's jars come from Maven Central through ``testbed/kafka/pom.xml`` (one pinned
``org.apache.kafka:kafka_2.13``): ``mvn dependency:copy-dependencies`` copies them once into
``~/.cache/kafka-archive/kafka-<version>/libs`` (``$XDG_CACHE_HOME`` is honoured), outside
the work tree, and later sessions reuse them. A broker is then ``kafka.tools.StorageTool
format`` on a fresh data directory and ``kafka.Kafka server.properties`` run by ``java``
directly (no shell scripts), broker and controller in one process, each listener on a free
loopback port. :meth:`KafkaBroker.stop` and :meth:`KafkaBroker.start` again restart it on the
same ports and the same log, as a real broker restart does.

Run ``python tests/integration/kafka_broker.py`` to fetch the jars ahead of a test run.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from types import TracebackType

from devstack import LOOPBACK, Service, StackError, free_port, start_service
from maven import MavenError, MavenMissing, cache_root, fetch_jars

POM = Path(__file__).resolve().parents[2] / "testbed" / "kafka" / "pom.xml"

# Broker settings for one node on a 2-core machine: replication factor 1 for the internal
# topics, few of their partitions (they are created on first use: fewer is faster), no
# rebalance delay, and the log cleaner and retention tasks running within a second or two
# so that compaction and retention tests need not wait minutes. Nothing expires by age: tests
# produce records with timestamps years in the past (tests of gaps delete records instead).
_SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "log.retention.ms": "-1",
    "log.initial.task.delay.ms": "1000",
    "log.cleaner.backoff.ms": "500",
    "log.retention.check.interval.ms": "1000",
    "log.flush.offset.checkpoint.interval.ms": "1000",
}

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
"""

# A small heap and the serial collector: the tests produce little data, and the machine's
# two cores are shared with Spark and the tests themselves.
_JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-Djava.awt.headless=true")


class ToolMissingError(StackError):
    """``java`` or ``mvn`` is not installed."""


def kafka_version(pom: Path = POM) -> str:
    """The Kafka version the pom pins (its ``kafka.version`` property)."""
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom.read_text())
    if found is None:
        raise StackError(f"{pom} does not set <kafka.version>")
    return found.group(1).strip()


def _require(tool: str, install: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ToolMissingError(
            f"the integration tests run Apache Kafka and need `{tool}`: {install}"
        )
    return path


def ensure_libs(pom: Path = POM) -> Path:
    """The directory of the broker's jars, fetched with Maven unless already cached."""
    _require("java", "apt-get install openjdk-17-jre-headless")
    libs = cache_root() / f"kafka-{kafka_version(pom)}" / "libs"
    try:
        return fetch_jars(pom.read_text(), libs)
    except MavenMissing:
        _require("mvn", "apt-get install maven")
        raise
    except MavenError as exc:
        raise StackError(
            f"mvn could not fetch Apache Kafka's jars ({pom}):\n{exc.tail()}"
        ) from None


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaBroker:
    """One Apache Kafka node (broker and controller) whose data lives under ``workdir``."""

    def __init__(self, workdir: Path, libs: Path | None = None) -> None:
        self._workdir = workdir
        self._libs = libs if libs is not None else ensure_libs()
        self.port = free_port()
        self.controller_port = free_port()
        self.service: Service | None = None
        self._starts = 0
        self._config = workdir / "server.properties"
        self._log4j = workdir / "log4j2.properties"
        self._write_config()
        self._format()

    @property
    def bootstrap_servers(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def version(self) -> str:
        return kafka_version()

    def _write_config(self) -> None:
        self._workdir.mkdir(parents=True, exist_ok=True)
        settings = {
            **_SETTINGS,
            "controller.quorum.voters": f"1@{LOOPBACK}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{LOOPBACK}:{self.port},"
            f"CONTROLLER://{LOOPBACK}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{self.port}",
            "log.dirs": str(self._workdir / "data"),
        }
        self._config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        self._log4j.write_text(_LOG4J2)

    def _java(self, main_class: str, *args: str) -> list[str]:
        return [
            "java",
            *_JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={self._log4j}",
            "-cp",
            str(self._libs / "*"),
            main_class,
            *args,
        ]

    def _format(self) -> None:
        argv = self._java(
            "kafka.tools.StorageTool",
            "format",
            # One '=' word: an id may start with '-' (URL-safe base64), which the tool's
            # argument parser would take for an option (1 run in 64 failed to start).
            f"--cluster-id={_cluster_id()}",
            "--config",
            str(self._config),
        )
        result = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
        )
        if result.returncode != 0:
            raise StackError(f"kafka StorageTool format failed:\n{result.stdout}{result.stderr}")

    def start(self, timeout: float = 120.0) -> KafkaBroker:
        """Start the node (again, after :meth:`stop`: same ports, same data)."""
        if self.service is not None and self.service.process.poll() is None:
            return self
        self._starts += 1
        log_name = f"kafka-{self.port}-{self._starts}"
        log_path = self._workdir / f"{log_name}.log"
        self.service = start_service(
            "kafka",
            self._java("kafka.Kafka", str(self._config)),
            self.port,
            lambda: _started(log_path),
            self._workdir,
            timeout=timeout,
            log_name=log_name,
        )
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """A clean shutdown (SIGTERM to the process group; SIGKILL after ``timeout``)."""
        if self.service is not None:
            self.service.stop(timeout=timeout)

    def freeze(self, frozen: bool = True) -> None:
        """SIGSTOP (or SIGCONT) to the process group: the broker stops answering at once."""
        if self.service is not None and self.service.process.poll() is None:
            os.killpg(self.service.process.pid, signal.SIGSTOP if frozen else signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: the broker dies as in a crash (its log on disk survives); returns once
        it is gone, so that :meth:`start` starts it again."""
        if self.service is not None:
            self.service.kill()
            self.service.process.wait(timeout=30)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _started(log_path: Path) -> bool:
    try:
        return "Kafka Server started" in log_path.read_text(errors="replace")
    except OSError:
        return False


if __name__ == "__main__":
    try:
        print(ensure_libs())
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)

"""`kafka-archive submit` on a real Spark standalone cluster: one master and two workers on
loopback, started and stopped by pid. The job archives a 4-partition topic exactly once, and
Spark's event log shows its tasks ran on both workers' executors."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

pytestmark = pytest.mark.integration

SPARK_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def wait_for(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise TimeoutError(f"{what} not ready after {seconds} s")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, stack: Any) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("spark-cluster")
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_WORKER_DIR": str(logs / "work"),
        "SPARK_LOG_DIR": str(logs),
    }
    port, ui = free_port(), free_port()
    processes: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        out = open(logs / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        processes.append(
            subprocess.Popen(
                [spark_class(), *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def alive_workers() -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as response:
                state = json.load(response)
        except OSError:
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    try:
        start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        )
        url = f"spark://127.0.0.1:{port}"
        for n in (1, 2):
            start(
                f"worker{n}",
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--cores",
                "1",
                "--memory",
                "1g",
                "--host",
                "127.0.0.1",
                "--webui-port",
                str(free_port()),
            )
        wait_for(lambda: alive_workers() == 2, 120, "two Spark workers")
        yield url
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def test_submit_runs_the_job_on_both_workers_exactly_once(
    cluster: str,
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    tmp_path: Path,
) -> None:
    name, bkt = topic(partitions=4), bucket()
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5})
    for i in range(4000):
        producer.produce(name, value=json.dumps({"id": i}).encode(), partition=i % 4)
    assert producer.flush(30) == 0
    events = tmp_path / "events"
    events.mkdir()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 500"
    command = [
        str(SPARK_BIN / "kafka-archive"),
        "submit",
        "--master",
        cluster,
        "--conf",
        "spark.cores.max=2",
        "--executor-cores",
        "1",
        "--executor-memory",
        "512m",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        "--conf",
        "spark.scheduler.minRegisteredResourcesRatio=1.0",
        "--conf",
        "spark.scheduler.maxRegisteredResourcesWaitingTime=120s",
        "--conf",
        "spark.eventLog.enabled=true",
        "--conf",
        f"spark.eventLog.dir={events}",
        "--conf",
        "spark.eventLog.compress=false",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--kcql",
        kcql,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        s3_endpoint,
    ]
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "total: 4000 records" in done.stdout

    ids: list[int] = []
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bkt, Prefix="arch/"):
        for item in page.get("Contents", []):
            if "/.kafka-archive/" in item["Key"]:
                continue
            body = s3_client.get_object(Bucket=bkt, Key=item["Key"])["Body"].read()
            ids.extend(json.loads(line)["id"] for line in body.decode().splitlines())
    assert sorted(ids) == list(range(4000)), "every record exactly once"

    executors = set()
    for log in (p for p in events.rglob("*") if p.is_file()):  # event log v1 or v2 layout
        for line in log.read_text().splitlines():
            if not line.startswith("{"):
                continue  # the v2 layout also holds an empty app-status marker file
            event = json.loads(line)
            if event.get("Event") == "SparkListenerTaskEnd":
                executors.add(event["Task Info"]["Executor ID"])
    assert len(executors) >= 2, f"tasks ran on executors {executors}"

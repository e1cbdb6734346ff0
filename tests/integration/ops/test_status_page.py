"""The status page of `run --follow --metrics-port` (`/`), looked at in a real headless
browser: Debian's Chromium renders it (`--dump-dom`, `--screenshot`); what it shows is
compared with the archive read by plain boto3 and with Kafka's offsets from a plain consumer,
never with our own readers."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, archived_ids, process_group, run_args
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from faultproxy import FaultProxy

from html_cells import Cells, cells

pytestmark = pytest.mark.integration

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def page_data(port: int) -> dict[str, Any] | None:
    """``/status.json``, or None while the server does not answer (only to wait on)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=5) as r:
            document: dict[str, Any] = json.loads(r.read())
            return document
    except (OSError, urllib.error.URLError, ValueError):
        return None


def chromium(tmp_path: Path, *args: str) -> str:
    """Debian's Chromium, headless, run with ``args``; its stdout."""
    binary = shutil.which("chromium")
    assert binary is not None, "Debian's chromium is needed: apt-get install chromium"
    profile = tmp_path / f"chromium-profile-{time.monotonic_ns()}"
    command = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    with process_group(command, dict(os.environ)) as browser:  # its helpers die with it
        out, err = browser.communicate(timeout=180)
    assert browser.returncode == 0, err[-3000:]
    return out


def rendered(tmp_path: Path, port: int) -> Cells:
    """The page as the browser's DOM holds it, its cells read back."""
    return cells(chromium(tmp_path, "--dump-dom", f"http://127.0.0.1:{port}/"))


def archived_next_offsets(s3: Any, bucket: str, topic: str, partitions: int) -> list[int]:
    """Per partition, the offset after the last archived record, from the data objects
    alone: each key ``arch/<topic>/<partition>/<first offset>.json``, one record a line."""
    found = []
    for partition in range(partitions):
        ends = [0]
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=f"arch/{topic}/{partition}/"
        )
        for listing in pages:
            for item in listing.get("Contents", []):
                first = int(item["Key"].rsplit("/", 1)[1].split(".")[0])
                body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                ends.append(first + len(body.decode().splitlines()))
        found.append(max(ends))
    return found


def kafka_end_offsets(broker: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": broker, "group.id": f"page-{topic}"})
    try:
        return [
            consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


def data_objects(s3: Any, bucket: str) -> int:
    listing = s3.list_objects_v2(Bucket=bucket, Prefix="arch/")
    return sum("/.kafka-archive/" not in item["Key"] for item in listing.get("Contents", []))


def wait_for(condition: Callable[[], bool], process: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 240  # Spark's start took 86 s on a busy 2-core machine
    while not condition():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


@contextlib.contextmanager
def following(command: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """``command`` (a ``run --follow``) running; stopped with SIGTERM at the end, exit 0."""
    with process_group(command, env) as process:
        yield process
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=90)
        assert process.returncode == 0, err
        assert "Traceback" not in err and "internal error" not in err, err


def test_the_status_page_in_chromium_shows_the_routes_offsets_and_lag(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    tmp_path: Path,
) -> None:
    """45 records over two partitions, objects of 10: the first batch archives 20 of each
    and holds the tails (3 and 2 records, younger than the default flush interval) back,
    so both partitions lag. Chromium's DOM of `/` shows the route, both partitions with the
    offsets boto3 finds archived, Kafka's end offsets, the lag, the batch's objects and no
    error; its screenshot is a real picture of the page."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 45)
    port = free_port()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 10"
    command = [
        KAFKA_ARCHIVE,
        *run_args(kcql, broker, s3_endpoint, "--master", "local[1]"),
        "--follow",
        "--poll-interval",
        "0.5",
        "--metrics-port",
        str(port),
    ]
    secret = "status-page-secret-value-4711"  # moto takes any secret key
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "AWS_SECRET_ACCESS_KEY": secret,
    }
    with following(command, env) as process:
        wait_for(lambda: len(archived_ids(s3_client, bkt)) == 40, process, "not archived")

        def shown() -> bool:  # the page is updated once the batch's lag is read
            data = page_data(port)
            rows = None if data is None else data["partitions"]
            return bool(rows) and [r["archived_offset"] for r in rows] == [20, 20]

        wait_for(shown, process, "the page never showed the archived offsets")
        page = rendered(tmp_path, port)
        shot = tmp_path / "status.png"
        chromium(
            tmp_path,
            f"--screenshot={shot}",
            "--window-size=1200,900",
            f"http://127.0.0.1:{port}/",
        )
    print(f"status page screenshot: {shot}")
    archived = archived_next_offsets(s3_client, bkt, name, 2)
    ends = kafka_end_offsets(broker, name, 2)
    assert archived == [20, 20] and ends == [23, 22], (archived, ends)
    cells = page.cells
    assert cells["job"].startswith(name)
    assert (cells["route-0-topic"], cells["route-0-target"]) == (name, f"{bkt}:arch")
    assert cells["route-0-format"] == "JSON"
    for partition in (0, 1):
        row = f"{name}[{partition}]@{bkt}:arch"
        assert cells[f"{row}.partition"] == str(partition)
        assert cells[f"{row}.archived"] == str(archived[partition])
        assert cells[f"{row}.end"] == str(ends[partition])
        assert cells[f"{row}.lag"] == str(ends[partition] - archived[partition])
    assert cells["last_archived.records"] == "40"
    assert cells["last_archived.objects"] == str(data_objects(s3_client, bkt)) == "4"
    assert int(cells["batches"]) >= 1
    assert cells["errors"] == "none in the last hour"
    assert "script" not in page.tags
    assert secret not in "".join(page.cells.values())
    data = shot.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR", data[:32]
    assert struct.unpack(">II", data[16:24]) == (1200, 900)
    assert len(data) > 20_000, len(data)  # a blank 1200x900 PNG is a few KB


def test_an_s3_outage_shows_under_errors_of_the_last_hour(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    tmp_path: Path,
) -> None:
    """S3 answers only 503 for a while: the batches that fail are listed on the page with
    their time, kind and one-line message, and counted; S3 back, every record is archived."""
    name, bkt = topic(partitions=1), bucket()
    produce(name, 20, partitions=1)
    port = free_port()
    with FaultProxy(s3_endpoint, rate=0.0, seed=5) as proxy:
        kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 10"
        command = [
            KAFKA_ARCHIVE,
            *run_args(kcql, broker, proxy.url, "--master", "local[1]"),
            "--follow",
            "--poll-interval",
            "0.3",
            "--metrics-port",
            str(port),
        ]
        env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "KAFKA_ARCHIVE_S3_MAX_ATTEMPTS": "2",
        }
        with following(command, env) as process:
            wait_for(lambda: archived_ids(s3_client, bkt) == list(range(20)), process, "first")
            proxy.fail_all = True
            produce(name, 10, first=20, partitions=1)
            wait_for(lambda: bool((page_data(port) or {}).get("errors")), process, "no error")
            page = rendered(tmp_path, port)
            proxy.fail_all = False
            wait_for(lambda: archived_ids(s3_client, bkt) == list(range(30)), process, "after")
            later = page_data(port)
    assert later is not None and later["errors"], later  # still within the hour
    cells = page.cells
    assert int(cells["failed_batches"]) >= 1
    # Every S3 request answered 503 SlowDown: planning's (S3 unavailable) or an upload's.
    assert cells["error-0.kind"] in ("S3UnavailableError", "UploadError"), cells
    message = cells["error-0.message"]
    assert "503" in message or "SlowDown" in message, message
    print(f"error shown: {cells['error-0.kind']}: {message}")
    assert "\n" not in message
    assert cells["error-0.at"].endswith(" s ago)"), cells["error-0.at"]
    assert "none in the last hour" not in cells["errors"]

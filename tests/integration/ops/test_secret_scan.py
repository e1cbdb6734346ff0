"""`kafka-archive submit -X sasl.password=<random>` on a local master: while it runs, a sampler
reads every process's /proc/<pid>/cmdline and environ; afterwards stdout, stderr, the Spark
event log and the --report file are searched too. The secret is in none of them (the
`kafka-archive submit` process itself excepted: its command line is the one the user typed)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, archived_ids, run_args

pytestmark = pytest.mark.integration


class ProcSampler:
    """Reads /proc/*/cmdline and /proc/*/environ of every process, over and over."""

    def __init__(self, needles: list[bytes], exclude: set[int]) -> None:
        self.needles = needles
        self.exclude = exclude
        self.hits: list[str] = []
        self.samples = 0
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> ProcSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.samples += 1
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit() or int(entry.name) in self.exclude:
                    continue
                for part in ("cmdline", "environ"):
                    try:
                        data = Path(entry.path, part).read_bytes()
                    except OSError:
                        continue
                    if part == "cmdline" and data:
                        self.seen.add(data.split(b"\0")[0].decode(errors="replace")[-40:])
                    for needle in self.needles:
                        if needle in data:
                            head = data.replace(b"\0", b" ")[:200].decode(errors="replace")
                            self.hits.append(f"{entry.name}/{part}: {head}")
            self._stop.wait(0.02)


def test_no_secret_on_any_command_line_log_or_report(
    stack: Any,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    tmp_path: Path,
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 200)
    password = "pw-" + secrets.token_hex(16)
    registry_password = "sr-" + secrets.token_hex(16)
    events = tmp_path / "events"
    events.mkdir()
    report = tmp_path / "report.json"
    command = [
        KAFKA_ARCHIVE,
        "submit",
        "--master",
        "local[1]",
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
        "--conf",
        f"spark.pyspark.python={sys.executable}",
        *run_args(
            f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 50",
            broker,
            s3_endpoint,
            command=None,
        ),
        # PLAINTEXT: librdkafka accepts and ignores the SASL password.
        "-X",
        f"sasl.password={password}",
        "-X",
        "sasl.username=archiver",
        "--schema-registry-url",
        f"http://archiver:{registry_password}@127.0.0.1:9/",
        "--report",
        str(report),
    ]
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    needles = [password.encode(), registry_password.encode()]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    with ProcSampler(needles, exclude={process.pid, os.getpid()}) as sampler:
        try:
            out, err = process.communicate(timeout=600)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, 9)
    assert process.returncode == 0, err.decode()[-3000:]
    assert archived_ids(s3_client, bkt) == list(range(200))
    assert sampler.hits == [], sampler.hits[:3]
    # The sampler did see the processes that carry the job: the JVM and Python workers.
    assert sampler.samples > 20 and any("java" in s for s in sampler.seen), sampler.seen
    logs = [p for p in events.rglob("*") if p.is_file()]
    assert logs, "the Spark event log was written"
    event_text = b"".join(p.read_bytes() for p in logs)
    assert b"sun.java.command" in event_text  # the run's command line is in the log
    for needle in needles:
        for what, data in (
            ("stdout", out),
            ("stderr", err),
            ("event log", event_text),
            ("report", report.read_bytes()),
        ):
            assert needle not in data, f"secret in {what}"
    assert json.loads(report.read_text())["records"] == 200

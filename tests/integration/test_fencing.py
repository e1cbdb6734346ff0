"""Fencing: runs of one job that overlap in time — a run frozen longer than its lease while a
second run takes over, a lease renewal whose response is lost, two hosts with one hostname,
an endpoint that ignores conditional headers, crashes between upload and commit, dead
letters past the commit cut — never lose or duplicate a record.

Every run is a whole ``kafka-archive`` process (its Spark JVM and Python workers in one
process group, frozen with SIGSTOP and thawed with SIGCONT); afterwards an independent
reader (plain boto3 + json) finds every produced record exactly once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, archived_ids, produce_ids

pytestmark = pytest.mark.integration

DAYS_AGO = int(time.time() * 1000) - 3 * 86_400_000
TTL = 6  # seconds of lease: the driver renews every TTL/6, a frozen run loses it in TTL


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
            "KAFKA_ARCHIVE_LOCK_TTL_SECONDS": str(TTL), **extra}  # fmt: skip


def _command(kcql: str, broker: str, endpoint: str, *more: str) -> list[str]:
    return [KAFKA_ARCHIVE, "run", "--kcql", kcql, "--bootstrap-servers", broker,
            "--endpoint-url", endpoint, "--master", "local[1]", *more]  # fmt: skip


@contextlib.contextmanager
def _process(command: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """A run in its own process group; whatever is left of the group is killed at the end."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)  # fmt: skip
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGCONT)
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def _finish(process: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def _pending(s3: Any, bucket: str) -> list[str]:
    page = s3.list_objects_v2(Bucket=bucket, Prefix="arch/.kafka-archive/")
    return [i["Key"] for i in page.get("Contents", []) if "/pending/" in i["Key"]]


def _committed(s3: Any, bucket: str) -> int:
    """The sum of every partition's committed next offset."""
    total = 0
    page = s3.list_objects_v2(Bucket=bucket, Prefix="arch/.kafka-archive/")
    for item in page.get("Contents", []):
        if "/state/" in item["Key"]:
            body = json.loads(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
            total += int(body["next_offset"])
    return total


def _wait(predicate: Callable[[], bool], what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("follow", [False, True], ids=["bounded", "follow"])
def test_a_run_frozen_past_its_lease_neither_loses_nor_duplicates_a_record(
    follow: bool,
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """Run A is frozen (SIGSTOP of its process group) just after it starts uploading; once
    its lease expired, run B takes over, archives further (more records were produced
    meanwhile) and commits; then A is thawed. A must not overwrite or delete what B
    committed, nor commit anything: it stops with exit 16 (fenced)."""
    name, bkt = topic(partitions=2), bucket()
    first = 40_500  # not a multiple of the flush count: each run's last object is cut short
    produce_ids(broker, name, 0, first, timestamp=DAYS_AGO)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.count'=1000)"
    follow_args = ("--follow", "--poll-interval", "1") if follow else ()
    command = _command(kcql, broker, s3_endpoint, *follow_args)
    with _process(command, _env()) as run_a:
        _wait(lambda: bool(_pending(s3_client, bkt)) or run_a.poll() is not None,
              "run A to start uploading")  # fmt: skip
        os.killpg(run_a.pid, signal.SIGSTOP)
        assert run_a.poll() is None, "run A finished before it could be frozen"
        produce_ids(broker, name, first, 3_000, timestamp=DAYS_AGO + first)
        time.sleep(TTL + 2)  # A's lease runs out while it is frozen
        with _process(command, _env()) as run_b:
            if follow:
                _wait(lambda: _committed(s3_client, bkt) == first + 3_000, "run B to commit")
                run_b.send_signal(signal.SIGTERM)
            code_b, _, err_b = _finish(run_b)
            assert code_b == 0, err_b
        assert _committed(s3_client, bkt) == first + 3_000
        os.killpg(run_a.pid, signal.SIGCONT)
        if follow:
            time.sleep(3 * TTL)  # time to do harm, were it able to
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run_a.pid, signal.SIGTERM)
        code_a, _, err_a = _finish(run_a)
    # The next run of the job finds nothing to repair and nothing new.
    bounded = _command(kcql, broker, s3_endpoint)
    after = subprocess.run(bounded, env=_env(), capture_output=True, text=True, timeout=300,
                           check=False)  # fmt: skip
    assert after.returncode == 0, after.stderr
    ids = archived_ids(s3_client, bkt)
    assert len(ids) == len(set(ids)), "records archived twice"
    assert ids == list(range(first + 3_000)), "records lost"
    assert code_a == 16, err_a
    assert "lease" in err_a.lower(), err_a

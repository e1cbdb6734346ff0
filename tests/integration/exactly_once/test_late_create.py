"""A stale run's create that lands late: the object of a run frozen past its lease arrives
after the run that took over recovered (and committed) the partition, under a key the new
run's boundaries left free. No marker names it any more, so the next run must find and
remove it by the watch recovery left (``state/pending.py``).

Run A is a whole ``kafka-archive`` process (frozen with SIGSTOP), runs B and the next run
run in this process on the session's Spark (``run_here``); the late create is a PUT held by
the fault proxy; afterwards an independent reader (plain boto3 + json) finds every record
exactly once.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import (
    archived_ids,
    process_env,
    process_group,
    run_command,
    run_here,
    wait_lease_expired,
)
from faultproxy import FaultProxy

pytestmark = pytest.mark.integration

DAYS_AGO = int(time.time() * 1000) - 3 * 86_400_000
TTL = 6  # seconds of lease


def _env() -> dict[str, str]:
    return process_env(KAFKA_ARCHIVE_LOCK_TTL_SECONDS=str(TTL))


_command = run_command


def _run_here(command: list[str]) -> int:
    """Run B and the next run, which meet what A left: in this process, with A's lease."""
    return run_here(command, KAFKA_ARCHIVE_LOCK_TTL_SECONDS=str(TTL))


def _objects(s3: Any, bucket: str) -> list[str]:
    page = s3.list_objects_v2(Bucket=bucket, Prefix="arch/")
    return [i["Key"] for i in page.get("Contents", []) if "/.kafka-archive/" not in i["Key"]]


def test_a_create_of_a_fenced_run_that_lands_late_is_removed_by_the_next_run(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """Run A (flush.count 1000) is frozen while the proxy holds the PUT of its object at
    offset 1000; once its lease expired, run B (flush.count 700) recovers what A left and
    commits all 20,500 records. Then the held PUT lands (its key is free: B's boundaries
    differ), A resumes and stops (exit 18), and the next run removes A's late object."""
    name, bkt = topic(partitions=1), bucket()
    total = 20_500
    produce(name, total, partitions=1, timestamp=DAYS_AGO)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.count'=1000)"
    kcql_b = kcql.replace("=1000", "=700")
    late = f"/arch/{name}/0/{1000:012d}.json"
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.hold = lambda method, path, _: method == "PUT" and path.split("?")[0].endswith(late)
        with process_group(_command(kcql, broker, proxy.url), _env()) as run_a:
            deadline = time.monotonic() + 180
            while not proxy.held.wait(0.05):
                assert run_a.poll() is None, run_a.communicate()[1]
                assert time.monotonic() < deadline, "run A never uploaded offset 1000"
            os.killpg(run_a.pid, signal.SIGSTOP)
            wait_lease_expired(s3_client, bkt)  # A's lease runs out while it is frozen
            assert _run_here(_command(kcql_b, broker, s3_endpoint)) == 0
            assert archived_ids(s3_client, bkt) == list(range(total))
            proxy.release.set()
            assert proxy.landed.wait(60), "the held PUT never reached the store"
            assert f"arch/{name}/0/{1000:012d}.json" in _objects(s3_client, bkt)
            os.killpg(run_a.pid, signal.SIGCONT)
            _, err_a = run_a.communicate(timeout=300)
    assert run_a.returncode == 18, err_a
    assert _run_here(_command(kcql_b, broker, s3_endpoint)) == 0
    ids = archived_ids(s3_client, bkt)
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} records archived twice"
    assert ids == list(range(total)), "records lost"

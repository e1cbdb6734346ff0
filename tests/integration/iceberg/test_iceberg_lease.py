"""The lease around an Iceberg table's commit: a driver frozen inside its commit past its
lease must not commit files that a newer run of the job, having taken the lease over,
removed as orphans. The table is read with pyiceberg and its files with boto3: every file
the table references exists, and every record is in it exactly once.

Run A's S3 traffic goes through a proxy that holds the first write under the table's
``metadata/`` (pyiceberg writing A's manifest: A is inside its append); A's whole process
group is then frozen (SIGSTOP, its lease renewals too) and the write let through. Once A's
lease has expired, run B takes the job over; B's commit waits until A has been thawed and
has ended, so that A's commit, if it is let through, comes first.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import iceberg_helpers
import pytest
from archive_helpers import process_env, process_group, run_args, run_command, wait_lease_expired
from faultproxy import FaultProxy
from iceberg_helpers import kcql_for, reader_table

from kafka_archive.archiver.iceberg import commits
from kafka_archive.cli import main

pytestmark = pytest.mark.integration

TTL = 6  # seconds of A's lease


def test_a_driver_frozen_inside_its_commit_past_its_lease_does_not_commit(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    kcql = kcql_for(name, bkt, 100)
    produce(name, 300, partitions=1)
    assert main(run_args(kcql, broker, s3_endpoint)) == 0, capsys.readouterr().err
    produce(name, 300, first=300, partitions=1)

    entered, release = threading.Event(), threading.Event()

    def hold(method: str, path: str, headers: dict[str, str]) -> bool:
        if (
            method in ("PUT", "POST")
            and "/tables/orders/metadata/" in path
            and not entered.is_set()
        ):
            entered.set()
            release.wait(120)
        return False

    env = process_env(KAFKA_ARCHIVE_LOCK_TTL_SECONDS=str(TTL))
    real_commit = commits.commit
    with FaultProxy(s3_endpoint, rate=0.0, seed=1) as proxy:
        proxy.drop_response = hold
        with process_group(run_command(kcql, broker, proxy.url), env) as a:
            assert entered.wait(180), a.communicate()
            os.killpg(a.pid, signal.SIGSTOP)
            release.set()
            wait_lease_expired(s3_client, bkt)  # A's lease expires while it is frozen

            ended: dict[str, Any] = {}

            def after_a(table: Any, *args: Any, **kwargs: Any) -> None:
                # B archived; before its commit, A is thawed and finishes its own.
                os.killpg(a.pid, signal.SIGCONT)
                _, err = a.communicate(timeout=120)
                ended.update(code=a.returncode, err=err)
                real_commit(table, *args, **kwargs)

            commits.commit = after_a
            try:
                b_code = main(run_args(kcql, broker, s3_endpoint))
            finally:
                commits.commit = real_commit
            b_err = capsys.readouterr().err
    assert ended, "B never reached its commit"
    assert ended["code"] != 0, f"A committed after losing its lease: {ended['err'][-2000:]}"
    table = reader_table(catalog_uri, s3_endpoint)
    files = table.inspect.all_files().column("file_path").to_pylist()
    missing = [
        f
        for f in files
        if "Contents"
        not in s3_client.list_objects_v2(Bucket=bkt, Prefix=f.removeprefix(f"s3://{bkt}/"))
    ]
    assert not missing, f"the table references removed files: {missing}"
    if b_code != 0:  # B lost to A's commit: the next run finishes the job
        assert main(run_args(kcql, broker, s3_endpoint)) == 0, capsys.readouterr().err
    ids = iceberg_helpers.table_ids(reader_table(catalog_uri, s3_endpoint))
    assert ids == list(range(600)), (b_code, b_err[-2000:])

"""`kafka-archive export-states`: an archive that keeps a commit log back to partition states,
so that commit_protocol=states continues it exactly once (the downgrade, issue 37). Real
broker, moto's S3 server, Spark.

The archive is read independently: every data object under the prefix with boto3 and json
(``archived_ids``), the states and the lock as JSON documents, the log's entries with
``commit_log_reader``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import archived_ids, cli, run_args
from commit_log_reader import entry_keys, read_log

pytestmark = pytest.mark.integration

P = 3
STATE = "arch/.kafka-archive/state/"
LOCK = "arch/.kafka-archive/lock.json"


def document(s3: Any, bucket: str, key: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    return body


def keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    found: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        found += [i["Key"] for i in page.get("Contents", [])]
    return found


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("kafka-archive: error: ")]


def test_a_log_archive_exported_to_states_is_continued_by_a_states_run_exactly_once(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 5"
    produce(name, 60, partitions=P)
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert not keys(s3_client, bkt, STATE), "log mode keeps no states"

    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="export-states"))
    assert code == 0, err
    assert f"{bkt}:arch: 3 partition state(s) written" in out, out
    for p in range(P):
        state = document(s3_client, bkt, f"{STATE}{name}/{p}.json")
        assert state["next_offset"] == 20 and state["version"] == 1, state
    lock = document(s3_client, bkt, LOCK)
    assert lock["released"] is True and lock.get("version", 1) == 1, lock
    states = [document(s3_client, bkt, k) for k in keys(s3_client, bkt, STATE)]
    assert all(lock["epoch"] >= state["epoch"] for state in states), "the next run fences them"
    assert read_log(s3_client, bkt).kinds[-1] == "claim", "the export's claim fences log writers"

    # The log is history now: a log-mode run refuses the target, and writes nothing.
    entries = entry_keys(s3_client, bkt)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 2, err
    (line,) = error_lines(err)
    assert "export-states" in line and "commit_protocol=states" in line, line
    assert entry_keys(s3_client, bkt) == entries
    # A second export writes nothing.
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="export-states"))
    assert code == 0 and "exported before, nothing written" in out, out + err
    assert entry_keys(s3_client, bkt) == entries

    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "states")
    produce(name, 30, first=60, partitions=P)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert archived_ids(s3_client, bkt) == list(range(90)), "every record exactly once"
    for p in range(P):
        assert document(s3_client, bkt, f"{STATE}{name}/{p}.json")["next_offset"] == 30
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, out + err


def test_objects_compact_replaced_keep_export_out_until_vacuum_removes_them(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A listing reader (the states protocol's) would read a replaced object beside the
    compacted one: exit 2, nothing written, until they are older than the vacuum grace;
    then export-states vacuums them and a states run reads the `.g<N>` objects."""
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 3"
    produce(name, 36, partitions=P)
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")
    monkeypatch.setenv("KAFKA_ARCHIVE_LOG_VACUUM_GRACE_SECONDS", "3")
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="compact"))
    assert code == 0, err
    before = sorted(keys(s3_client, bkt, "arch/"))

    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="export-states"))
    assert code == 2, err
    (line,) = error_lines(err)
    assert "no commit of its log names" in line and "Run export-states again after" in line, line
    assert sorted(keys(s3_client, bkt, "arch/")) == before, "nothing written"

    time.sleep(4)  # past the grace (3 s) by the store's clock
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="export-states"))
    assert code == 0, err
    assert "vacuum: removed" in out, out
    assert archived_ids(s3_client, bkt) == list(range(36))

    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "states")
    produce(name, 9, first=36, partitions=P)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert archived_ids(s3_client, bkt) == list(range(45)), "every record exactly once"
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, out + err

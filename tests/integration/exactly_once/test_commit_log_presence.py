"""commit_protocol=log: a live session's presence keeps a second writer of its target out
(exit 8, as the states protocol's lease does) instead of the second's claim fencing it; a
session that died or froze past its presence's ttl is taken over and fenced, as before.

Real processes (a `--follow` service as a whole process, SIGKILL and SIGSTOP of its process
group), a real broker, moto's S3 server, Spark. The archive is read independently: the log's
entries with boto3 and json (``commit_log_reader``), the objects they name with json.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

import botocore.exceptions
import pytest
from archive_helpers import (
    KAFKA_ARCHIVE,
    cli,
    process_env,
    process_group,
    run_args,
    wait_presence_expired,
)
from commit_log_reader import CommitLog, entry_keys, read_log

pytestmark = pytest.mark.integration

P = 3
DEADLINE = 240.0
PRESENCE = "arch/.kafka-archive/presence.json"
DAYS_AGO = int(time.time() * 1000) - 3 * 86_400_000  # (no tail is young: none held back)


@pytest.fixture
def log_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")


def kcql_of(name: str, bkt: str) -> str:
    return f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 5"


def follow_command(kcql: str, broker: str, endpoint: str) -> list[str]:
    return [
        KAFKA_ARCHIVE,
        *run_args(kcql, broker, endpoint, "--master", "local[1]"),
        "--follow",
        "--poll-interval",
        "0.3",
    ]


def wait_committed(s3: Any, bucket: str, records: int, process: subprocess.Popen[str]) -> None:
    """Until the log commits ``records`` offsets in all (the follow session archived them)."""
    deadline = time.monotonic() + DEADLINE
    while sum(read_log(s3, bucket).ends.values()) < records:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "not archived"
        time.sleep(0.3)


def exactly_once(s3: Any, bucket: str, produced: int) -> CommitLog:
    """Every produced record in exactly one object the log names; no other object."""
    folded = read_log(s3, bucket)
    seen: list[int] = []
    named: set[str] = set()
    for (_, partition), objects in folded.objects.items():
        for o in objects:
            body = s3.get_object(Bucket=bucket, Key=o["key"])["Body"].read()
            ids = [json.loads(line)["id"] for line in body.decode().splitlines()]
            assert all(i % P == partition and o["first"] <= i // P <= o["last"] for i in ids)
            seen += ids
            named.add(o["key"])
    assert sorted(seen) == list(range(produced)), "every record exactly once"
    data: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="arch/"):
        data |= {i["Key"] for i in page.get("Contents", []) if "/.kafka-archive/" not in i["Key"]}
    assert data == named, "no object the log does not name"
    return folded


def has_presence(s3: Any, bucket: str) -> bool:
    try:
        s3.head_object(Bucket=bucket, Key=PRESENCE)
    except botocore.exceptions.ClientError:
        return False
    return True


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("kafka-archive: error: ")]


def test_a_one_shot_run_beside_a_live_follow_session_exits_8_and_the_session_carries_on(
    log_mode: None,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=P), bucket()
    kcql = kcql_of(name, bkt)
    produce(name, 30, partitions=P, timestamp=DAYS_AGO)
    env = process_env(KAFKA_ARCHIVE_COMMIT_PROTOCOL="log")
    with process_group(follow_command(kcql, broker, s3_endpoint), env) as follow:
        wait_committed(s3_client, bkt, 30, follow)
        before = entry_keys(s3_client, bkt)

        code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
        assert code == 8, err
        assert "Traceback" not in err and "internal error" not in err, err
        (line,) = error_lines(err)
        assert f"is writing s3://{bkt}/arch (run " in line and "since " in line, line
        assert "wait for it to finish" in line, line
        assert entry_keys(s3_client, bkt) == before, "the refused run wrote no entry"

        produce(name, 30, first=30, partitions=P, timestamp=DAYS_AGO)
        wait_committed(s3_client, bkt, 60, follow)
        os.kill(follow.pid, signal.SIGTERM)
        _, follow_err = follow.communicate(timeout=DEADLINE)
    assert follow.returncode == 0, follow_err[-3000:]
    folded = exactly_once(s3_client, bkt, 60)
    assert folded.kinds.count("claim") == 1, folded.kinds
    assert not has_presence(s3_client, bkt), "a clean end removes the presence"


def test_a_follow_session_sigkilled_is_taken_over_by_the_next_run_exactly_once(
    log_mode: None,
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
    """Its holder is a process of this kernel that exists no more: the presence is dead at
    once (the states lease's rule), so the next run claims without waiting for its ttl."""
    name, bkt = topic(partitions=P), bucket()
    kcql = kcql_of(name, bkt)
    produce(name, 30, partitions=P, timestamp=DAYS_AGO)
    env = process_env(KAFKA_ARCHIVE_COMMIT_PROTOCOL="log")
    with process_group(follow_command(kcql, broker, s3_endpoint), env) as follow:
        wait_committed(s3_client, bkt, 30, follow)
        produce(name, 30, first=30, partitions=P, timestamp=DAYS_AGO)
        os.killpg(follow.pid, signal.SIGKILL)
        follow.wait(timeout=60)
    assert has_presence(s3_client, bkt), "a SIGKILLed session leaves its presence"

    # (Vacuum with a grace of 1 s: what the killed session left unnamed goes now.)
    monkeypatch.setenv("KAFKA_ARCHIVE_LOG_VACUUM_GRACE_SECONDS", "1")
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    folded = exactly_once(s3_client, bkt, 60)
    assert folded.kinds.count("claim") == 2, folded.kinds
    assert not has_presence(s3_client, bkt)


def test_a_frozen_follow_session_whose_presence_expired_is_fenced_with_no_duplicate(
    log_mode: None,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SIGSTOP freezes the session (its renewals too): once its presence is not renewed for
    its ttl by the store's clock, the next run takes it over and claims; thawed, the session
    is fenced by that claim at its next batch (exit 18) and commits nothing more."""
    name, bkt = topic(partitions=P), bucket()
    kcql = kcql_of(name, bkt)
    produce(name, 30, partitions=P, timestamp=DAYS_AGO)
    env = process_env(KAFKA_ARCHIVE_COMMIT_PROTOCOL="log", KAFKA_ARCHIVE_LOCK_TTL_SECONDS="6")
    with process_group(follow_command(kcql, broker, s3_endpoint), env) as follow:
        wait_committed(s3_client, bkt, 30, follow)
        os.killpg(follow.pid, signal.SIGSTOP)
        wait_presence_expired(s3_client, bkt)

        produce(name, 30, first=30, partitions=P, timestamp=DAYS_AGO)
        code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
        assert code == 0, err
        taken = read_log(s3_client, bkt)
        assert taken.kinds.count("claim") == 2, taken.kinds

        produce(name, 15, first=60, partitions=P, timestamp=DAYS_AGO)
        os.killpg(follow.pid, signal.SIGCONT)
        _, follow_err = follow.communicate(timeout=DEADLINE)
    assert follow.returncode == 18, follow_err[-3000:]
    assert "Traceback" not in follow_err, follow_err[-3000:]
    (line,) = error_lines(follow_err)
    assert "newer run" in line, line
    folded = read_log(s3_client, bkt)
    assert folded.entries[len(taken.entries) :] == [], "the fenced session commits nothing"
    exactly_once(s3_client, bkt, 60)

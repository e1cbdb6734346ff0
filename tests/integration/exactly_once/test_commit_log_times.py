"""Commit times in log mode (issue 37): each entry carries its writer's wall-clock time, and
``status`` (its JSON, the table, the metrics file of a run) shows a log archive's last
commit per partition as it does for an archive of states, read from the log with boto3."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import cli, run_args

pytestmark = pytest.mark.integration

P = 2
LOG = "arch/.kafka-archive/log/"


@pytest.fixture
def log_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")


def entries(s3: Any, bucket: str) -> list[dict[str, Any]]:
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=LOG).get("Contents", [])
    keys = sorted(i["Key"] for i in listed if "/checkpoint/" not in i["Key"])
    return [json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in keys]


def seconds(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_status_shows_a_log_archives_last_commit_time_from_its_entries(
    log_mode: None,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON`"
    produce(name, 10, partitions=P)
    before = time.time()
    metrics = tmp_path / "metrics.prom"
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, "--metrics-file", str(metrics)))
    after = time.time()
    assert code == 0, err
    docs = entries(s3_client, bkt)
    assert [d["kind"] for d in docs] == ["claim", "commit"]
    for d in docs:  # every entry carries its writer's wall-clock time, in seconds
        assert before - 1 <= d["at"] <= after + 1, d
    committed = docs[-1]["at"]

    code, out, err = cli(
        capsys, *run_args(kcql, broker, s3_endpoint, "--output", "json", command="status")
    )
    assert code == 0, err
    rows = json.loads(out)["partitions"]
    assert len(rows) == P
    for row in rows:
        assert row["last_commit"], row
        assert abs(seconds(row["last_commit"]) - committed) <= 1, (row, committed)

    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="status"))
    assert code == 0, err
    assert "never" not in out, out
    assert rows[0]["last_commit"] in out

    ages = re.findall(
        r"^kafka_archive_last_commit_age_seconds\{[^}]*\} (\S+)$", metrics.read_text(), re.M
    )
    assert len(ages) == P, metrics.read_text()
    assert all(0 <= float(a) < 120 for a in ages), ages

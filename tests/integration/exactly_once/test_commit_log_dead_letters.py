"""Dead letters in log mode (issue 37): records the format cannot store go to a dead-letter
object at the attempt's own key, which the commit entry names beside the partition's objects
(a side object): vacuum keeps it, a rerun does not write it again. Read with boto3 and json."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import cli, run_args
from confluent_kafka import Producer

pytestmark = pytest.mark.integration

LOG = "archive/.kafka-archive/log/"


@pytest.fixture
def log_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")
    # Vacuum at the next run: what the first wrote is older than this by the store's clock.
    monkeypatch.setenv("KAFKA_ARCHIVE_LOG_VACUUM_GRACE_SECONDS", "1")


def everything(s3: Any, bucket: str) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for i in page.get("Contents", []):
            out[i["Key"]] = s3.get_object(Bucket=bucket, Key=i["Key"])["Body"].read()
    return out


def test_dead_letters_are_named_by_the_commit_and_survive_vacuum(
    log_mode: None,
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    producer = Producer({"bootstrap.servers": broker})
    for i in range(30):
        value = b"not json {" if i in (7, 21) else json.dumps({"id": i}).encode()
        producer.produce(name, key=f"k{i}".encode(), value=value, partition=0)
    assert producer.flush(30) == 0
    kcql = (
        f"INSERT INTO {bkt}:archive SELECT * FROM {name} "
        "PROPERTIES('error.policy'='dead-letter', 'flush.count'=10)"
    )
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert "2 record(s) the format cannot store went to" in out, out
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))  # claim + vacuum
    assert code == 0, err

    found = everything(s3_client, bkt)
    entries = [json.loads(v) for k, v in sorted(found.items()) if k.startswith(LOG)]
    commits = [c for e in entries if e["kind"] == "commit" for c in e["commits"]]
    assert len(commits) == 1
    sides = commits[0]["sides"]
    assert [(s["first"], s["last"], s["records"]) for s in sides] == [(7, 21, 2)]
    key = sides[0]["key"]
    assert key.startswith(f"archive/_dead-letter/{name}/0/000000000007.e") and key.endswith(".json")
    letters = {k: v for k, v in found.items() if "/_dead-letter/" in k}
    assert list(letters) == [key], "one dead-letter object, the named one, kept by vacuum"
    assert s3_client.head_object(Bucket=bkt, Key=key)["ETag"] == sides[0]["checksum"]
    lines = [json.loads(line) for line in letters[key].splitlines()]
    assert [(d["metadata"]["offset"], d["key"], d["value"]) for d in lines] == [
        (7, "k7", "not json {"),
        (21, "k21", "not json {"),
    ]
    data = [v for k, v in found.items() if k.startswith(f"archive/{name}/")]
    ids = sorted(json.loads(line)["id"] for body in data for line in body.splitlines())
    assert ids == [i for i in range(30) if i not in (7, 21)]
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, out + err

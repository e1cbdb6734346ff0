"""Ends that move without objects in log mode (issue 37): ``--start latest`` begins each
partition at Kafka's end (recorded, so the next run resumes there, not at a later end), and
``--allow-gaps`` passes records Kafka deleted before they were archived, recorded as a gap
that ``verify`` reports as allowed (not a hole). The log and the objects are read with boto3
and json, never with our decoder."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import cli, run_args
from commit_log_reader import read_log
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

pytestmark = pytest.mark.integration

P = 2
LOG = "arch/.kafka-archive/log/"


@pytest.fixture
def log_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")


def entries(s3: Any, bucket: str) -> list[dict[str, Any]]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=LOG):
        keys += [i["Key"] for i in page.get("Contents", []) if "/checkpoint/" not in i["Key"]]
    return [json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in sorted(keys)]


def commits(s3: Any, bucket: str) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for e in entries(s3, bucket):
        for c in e.get("commits", []):
            out.setdefault(c["partition"], []).append(c)
    return out


def archived_ids(s3: Any, bucket: str, named: list[str]) -> list[int]:
    ids: list[int] = []
    for key in named:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        ids += [json.loads(line)["id"] for line in body.decode().splitlines()]
    return sorted(ids)


def named_keys(s3: Any, bucket: str) -> list[str]:
    return [o["key"] for cs in commits(s3, bucket).values() for c in cs for o in c["objects"]]


def test_start_latest_begins_each_partition_at_kafkas_end_and_later_runs_resume_there(
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
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON`"
    produce(name, 20, partitions=P)  # offsets 0..9 of each partition: before the start
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, "--start", "latest"))
    assert code == 0, err
    begun = commits(s3_client, bkt)
    assert {
        p: [(c["start"], c["end"], c.get("begins")) for c in cs] for p, cs in begun.items()
    } == {p: [(10, 10, True)] for p in range(P)}, (
        "each partition begins at Kafka's end, with no object"
    )
    assert entries(s3_client, bkt)[-1]["version"] == 4

    produce(name, 10, first=20, partitions=P)  # offsets 10..14
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, "--start", "latest"))
    assert code == 0, err
    produce(name, 6, first=30, partitions=P)  # offsets 15..17
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert archived_ids(s3_client, bkt, named_keys(s3_client, bkt)) == list(range(20, 36))
    for cs in commits(s3_client, bkt).values():
        assert cs[-1]["end"] == 18 and [c["start"] for c in cs] == [10, 10, 15], cs
    folded = read_log(s3_client, bkt)  # the fold: a first commit may begin past 0
    assert folded.begins == {(name, p): 10 for p in range(P)}, folded.begins
    assert folded.ends == {(name, p): 18 for p in range(P)}, folded.ends

    for extra in ((), ("--offline",)):
        code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, *extra, command="verify"))
        assert code == 0, out + err
        assert "hole" not in out, out
    code, out, err = cli(
        capsys, *run_args(kcql, broker, s3_endpoint, "--output", "json", command="status")
    )
    assert code == 0, err
    assert {r["partition"]: r["archived_offset"] for r in json.loads(out)["partitions"]} == {
        p: 18 for p in range(P)
    }


def test_allow_gaps_passes_records_kafka_deleted_records_the_gap_and_verify_allows_it(
    log_mode: None,
    broker: str,
    admin: AdminClient,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON`"
    produce(name, 20, partitions=P)  # offsets 0..9
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    produce(name, 20, first=20, partitions=P)  # offsets 10..19
    for f in admin.delete_records([KafkaTopicPartition(name, 0, 15)]).values():
        f.result(timeout=30)  # offsets 10..14 of partition 0 gone before they were archived

    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 16, out + err
    assert "GAP offsets 10..14" in out and "Traceback" not in err

    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, "--allow-gaps"))
    assert code == 0, out + err
    gapped = [c for c in commits(s3_client, bkt)[0] if c.get("gaps")]
    assert [(c["start"], c["end"], c["gaps"]) for c in gapped] == [(10, 20, [[10, 14]])]
    assert gapped[0]["objects"][0]["first"] == 15
    assert read_log(s3_client, bkt).gaps[(name, 0)] == [(10, 14)]  # objects and gap tile
    lost = {20 + 2 * i for i in range(5)}  # partition 0's offsets 10..14
    expected = sorted(set(range(40)) - lost)
    assert archived_ids(s3_client, bkt, named_keys(s3_client, bkt)) == expected

    produce(name, 4, first=40, partitions=P)  # offsets 20..21: the next run, no gap again
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, out + err
    assert "GAP" not in out
    assert archived_ids(s3_client, bkt, named_keys(s3_client, bkt)) == sorted(set(range(44)) - lost)

    allowed = "offsets 10..14: an allowed gap, deleted by Kafka before they were archived"
    for extra in ((), ("--offline",)):
        code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, *extra, command="verify"))
        assert code == 0, out + err
        assert allowed in out and "hole" not in out, out

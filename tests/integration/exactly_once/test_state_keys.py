"""Topics named like the keys under ``.kafka-archive/`` (``lock``, ``state``, ``pending``, ...),
on Apache Kafka and an S3 server: their routes' keys are never taken for the job-scoped layout
of earlier versions (``<job>/lock.json``, ``<job>/state/...``), which a run retires and adopts.

A topic named ``lock`` once had its topic id record at ``.kafka-archive/topics/lock.json``,
the old layout's lock of a job named ``topics``: the second run "retired" it, writing a lock
over the record, so the topic's id was no longer checked and a re-created ``lock`` topic was
archived from the old offsets on (its first records skipped, without a word). An archive whose
record is at that key (written before the record moved) keeps it and is still checked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import archived_ids, cli, produce_to, run_args
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_archive.archiver.state import identity

pytestmark = pytest.mark.integration

# Each a folder or file name of either layout under .kafka-archive/.
TOPICS = [
    "lock",
    "state",
    "pending",
    "watch",
    "index",
    "log",
    "columns",
    "topics",
    "checkpoint",
    "lock.json",
    "probe-r1",
]


def _create_anew(admin: AdminClient, name: str) -> None:
    """``name`` with one partition and no records (deleted first if it exists)."""
    if name in admin.list_topics(timeout=30).topics:
        admin.delete_topics([name])[name].result(30)
    deadline = time.monotonic() + 60
    while True:  # a deletion completes asynchronously
        try:
            admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(30)
            return
        except Exception:
            assert time.monotonic() < deadline, f"topic {name} was not deleted"
            time.sleep(0.5)


def _command(
    capsys: pytest.CaptureFixture[str], kcql: str, broker: str, endpoint: str, command: str
) -> tuple[int, str, str]:
    """``command`` as a new process runs it: nothing known of the topic ids beforehand."""
    identity._confirmed.clear()
    return cli(capsys, *run_args(kcql, broker, endpoint, command=command))


def _records(s3: Any, bucket: str, prefix: str) -> dict[str, dict[str, Any]]:
    """Every document under ``prefix``'s ``.kafka-archive/`` by key (plain boto3 + json)."""
    found = {}
    listing = s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/.kafka-archive/")
    for item in listing.get("Contents", []):
        if item["Key"].endswith(".json"):
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            found[item["Key"]] = json.loads(body)
    return found


def test_topics_named_like_state_keys_keep_their_topic_records_through_every_command(
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bkt = bucket()
    for number, name in enumerate(TOPICS):
        _create_anew(admin, name)
        produce_to(broker, name, 3, first=100 * number, partitions=1)
    # "older": topic lock archived by a version that kept its record at topics/lock.json.
    older = f"INSERT INTO {bkt}:older SELECT * FROM `lock`"
    every = "; ".join(f"INSERT INTO {bkt}:every SELECT * FROM `{name}`" for name in TOPICS)
    with monkeypatch.context() as before:
        before.setattr(
            identity,
            "topic_identity_key",
            lambda target, topic: f"{target.head}.kafka-archive/topics/{topic}.json",
        )
        code, _, err = _command(capsys, older, broker, s3_endpoint, "run")
    assert code == 0, err
    old_key = "older/.kafka-archive/topics/lock.json"
    record = s3_client.get_object(Bucket=bkt, Key=old_key)["Body"].read()
    assert json.loads(record)["topic_id"], record

    code, _, err = _command(capsys, every, broker, s3_endpoint, "run")
    assert code == 0, err
    for kcql in (older, every):
        for command in ("run", "status", "verify"):
            code, out, err = _command(capsys, kcql, broker, s3_endpoint, command)
            assert code == 0, (kcql, command, out, err)
    assert archived_ids(s3_client, bkt, "older/") == [0, 1, 2]
    assert archived_ids(s3_client, bkt, "every/") == [
        100 * n + i for n in range(len(TOPICS)) for i in range(3)
    ]

    # The new lock topic has grown past the archived offset 3: only its id tells it apart.
    _create_anew(admin, "lock")
    produce_to(broker, "lock", 6, first=10_000, partitions=1)
    for kcql in (older, every):
        for command in ("run", "status", "verify"):
            code, out, err = _command(capsys, kcql, broker, s3_endpoint, command)
            assert code == 17, (kcql, command, out, err)
            assert "topic 'lock' was deleted and re-created" in err.strip().splitlines()[-1]
    assert archived_ids(s3_client, bkt, "older/") == [0, 1, 2], "nothing of the new topic"
    assert max(archived_ids(s3_client, bkt, "every/")) < 10_000

    # What the runs kept: the older record as it was; a record per topic, no lock over one.
    assert s3_client.get_object(Bucket=bkt, Key=old_key)["Body"].read() == record
    documents = _records(s3_client, bkt, "every")
    assert not [k for k, body in documents.items() if body.get("retired")], documents.keys()
    recorded = {body["topic"] for body in documents.values() if "topic_id" in body}
    assert recorded == set(TOPICS)

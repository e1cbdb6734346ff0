"""``verify`` of a compacted topic after Kafka's log cleaner removed records that were
archived before it ran, on Apache Kafka. The archive is right (it holds every record Kafka
served, in order); Kafka now serves a subsequence of it. verify used to compare them record
by record and report a clean archive as NOT CLEAN (exit 1: "holds 2 record(s) more than
Kafka has … (duplicates?)", "archived record differs"); it now checks, on topics whose
``cleanup.policy`` compacts, that Kafka's records are in the archive in order, notes the
ones the cleaner removed since, and still reports a record that differs. Read back with
boto3 + json."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import cli, run_args
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from test_kafka_semantics import _compacted_topic, _wait_compacted, _write_rolling, in_kafka

pytestmark = pytest.mark.integration


def test_verify_is_clean_on_a_compacted_topic_whose_archived_records_were_cleaned_since(
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = _compacted_topic(admin), bucket()
    producer = Producer({"bootstrap.servers": broker})
    # Offsets 0..4 in the active segment (not cleaned yet): a, b, a', c, tombstone of b.
    for key, i in (("a", 0), ("b", 1), ("a", 2), ("c", 3), ("b", None)):
        value = None if i is None else json.dumps({"id": i}).encode()
        producer.produce(name, key=key.encode(), value=value, partition=0)
    assert producer.flush(30) == 0
    kcql = (
        f"INSERT INTO {bkt}:env SELECT * FROM {name} STOREAS `JSON` "
        "PROPERTIES('store.envelope'=true); "
        f"INSERT INTO {bkt}:plain SELECT * FROM {name} STOREAS `JSON`"
    )
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    # New segments let the cleaner remove a (0) and b (1), archived above.
    _write_rolling(producer, name, [("d", 4), ("e", 5), ("f", 6)])
    _wait_compacted(broker, name, gone={0, 1})
    assert [r[1] for r in in_kafka(broker, name)][:3] == [2, 3, 4]

    args = run_args(kcql, broker, s3_endpoint, "--output", "json", command="verify")
    code, out, err = cli(capsys, *args)
    assert code == 0, out
    partitions = json.loads(out)["partitions"]
    assert [p["discrepancies"] for p in partitions] == [[], []]
    for partition in partitions:
        assert any("2 archived record(s) are no longer in Kafka" in n for n in partition["notes"])

    # A record that differs is still one.
    key = f"plain/{name}/0/000000000000.json"
    lines = s3_client.get_object(Bucket=bkt, Key=key)["Body"].read().decode().splitlines()
    assert lines[2] == '{"id": 2}'
    lines[2] = '{"id":-2}'
    s3_client.put_object(Bucket=bkt, Key=key, Body=("\n".join(lines) + "\n").encode())
    code, out, err = cli(capsys, *args)
    assert code == 1, out
    plain = [p for p in json.loads(out)["partitions"] if p["target"].endswith(":plain")]
    assert [d["problem"] for d in plain[0]["discrepancies"]] == [
        "archived record differs from Kafka"
    ]

"""Lenses' padding properties end to end: the statement of stream-reactor's own tests is
archived, its objects are named as Lenses names them, and every command reads them back.

The statement and the expected key shape come from stream-reactor's
kafka-connect-aws-s3/src/it/scala/io/lenses/streamreactor/connect/cloud/common/sink/
CoreSinkTaskTestCases.scala ("partition by custom partitioning with topic/partition/offset"):
``streamReactorBackups/myTopic/000000000001/myTopic(000000000001_000000000000).csv``.
Objects are listed and read with plain boto3 + json.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

PADDING = "PROPERTIES('padding.length.partition'='12', 'padding.length.offset'='12')"


def test_padding_of_twelve_names_objects_as_lenses_and_reads_back(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=2), bucket()
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5})
    for i in range(40):
        producer.produce(name, value=json.dumps({"id": i}).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    # The second statement is stream-reactor's "write multiple partitions independently"
    # (Lenses: streamReactorBackups/myTopic/000000000001/000000000001.json).
    kcql = (
        f"INSERT INTO {bkt}:archive SELECT * FROM {name} PARTITIONBY _topic, _partition "
        f"STOREAS `JSON` WITHPARTITIONER=Values WITH_FLUSH_COUNT = 7 {PADDING};\n"
        f"INSERT INTO {bkt}:plain SELECT * FROM {name} WITH_FLUSH_COUNT = 7 {PADDING}"
    )
    common = ("--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url", s3_endpoint)
    assert main(["validate", "--kcql", kcql]) == 0, capsys.readouterr().err
    assert main(["run", *common]) == 0, capsys.readouterr().err

    shape = re.compile(
        rf"^archive/{re.escape(name)}/(?P<p1>\d{{12}})/{re.escape(name)}"
        r"\((?P<p2>\d{12})_(?P<offset>\d{12})\)\.json$"
    )
    seen: list[int] = []
    for item in s3_client.list_objects_v2(Bucket=bkt, Prefix="archive/")["Contents"]:
        key = item["Key"]
        if "/.kafka-archive/" in key:
            continue
        match = shape.match(key)
        assert match, key
        assert match["p1"] == match["p2"]
        body = s3_client.get_object(Bucket=bkt, Key=key)["Body"].read().decode()
        records = [json.loads(line) for line in body.splitlines()]
        assert 0 < len(records) <= 7
        for record in records:
            assert record["id"] % 2 == int(match["p1"])
        # Record i is at offset i // 2 of partition i % 2.
        assert int(match["offset"]) == records[0]["id"] // 2
        seen.extend(r["id"] for r in records)
    assert sorted(seen) == list(range(40)), "every record exactly once"

    plain = re.compile(rf"^plain/{re.escape(name)}/(?P<p>\d{{12}})/(?P<offset>\d{{12}})\.json$")
    seen = []
    for item in s3_client.list_objects_v2(Bucket=bkt, Prefix="plain/")["Contents"]:
        if "/.kafka-archive/" in item["Key"]:
            continue
        match = plain.match(item["Key"])
        assert match, item["Key"]
        body = s3_client.get_object(Bucket=bkt, Key=item["Key"])["Body"].read().decode()
        records = [json.loads(line) for line in body.splitlines()]
        assert all(r["id"] % 2 == int(match["p"]) for r in records)
        assert int(match["offset"]) == records[0]["id"] // 2
        seen.extend(r["id"] for r in records)
    assert sorted(seen) == list(range(40)), "every record exactly once"
    capsys.readouterr()

    assert main(["verify", *common]) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert (
        main(
            [
                "cat",
                "--from",
                f"{bkt}:plain",
                "--topic",
                name,
                "--partition",
                "1",
                "--offset",
                "3",
                "--count",
                "4",
                "--kcql",
                kcql,
                "--endpoint-url",
                s3_endpoint,
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["offset"] for line in lines] == [3, 4, 5, 6]

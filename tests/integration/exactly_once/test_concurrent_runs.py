"""Two runs of the same job started together: one archives, the other exits 8 naming the
holder of the job's lock (or finds nothing new once the first is done); afterwards every
record is archived exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE
from confluent_kafka import Producer

pytestmark = pytest.mark.integration


@pytest.mark.every_s3
def test_two_runs_of_one_job_at_once_archive_exactly_once(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    name, bkt = topic(partitions=2), bucket()
    producer = Producer({"bootstrap.servers": broker})
    for i in range(2000):
        producer.produce(name, value=json.dumps({"id": i}).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 100"
    command = [
        KAFKA_ARCHIVE,
        "run",
        "--kcql",
        kcql,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        s3_endpoint,
        "--master",
        "local[1]",
    ]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    runs = [
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outcomes = [(run.wait(timeout=300), *run.communicate()) for run in runs]
    codes = sorted(code for code, _, _ in outcomes)
    assert codes in ([0, 0], [0, 8]), outcomes
    if codes == [0, 8]:
        (locked,) = [err for code, _, err in outcomes if code == 8]
        assert "is already running" in locked
    totals = [out for code, out, _ in outcomes if code == 0]
    assert sum("total: 2000 records" in out for out in totals) == 1, totals

    ids: list[int] = []
    for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bkt, Prefix="arch/"):
        for item in page.get("Contents", []):
            if "/.kafka-archive/" not in item["Key"]:
                body = s3_client.get_object(Bucket=bkt, Key=item["Key"])["Body"].read()
                ids.extend(json.loads(line)["id"] for line in body.decode().splitlines())
    assert sorted(ids) == list(range(2000))

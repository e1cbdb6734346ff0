"""What several integration tests share: numbered records in, the archive read back with
plain boto3 + json (never our own readers), and the installed command for subprocess runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

KAFKA_ARCHIVE = str(Path(sys.executable).with_name("kafka-archive"))
"""The ``kafka-archive`` command of the interpreter running the tests, for whole-process runs."""


def produce_ids(
    broker: str, topic: str, first: int, count: int, *, partitions: int = 2,
    timestamp: int | None = None,
) -> None:  # fmt: skip
    """Records ``{"id": i}`` for i in [first, first + count), record i into partition
    ``i % partitions`` (at ``timestamp + i`` ms when a timestamp is given)."""
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5})
    for i in range(first, first + count):
        kwargs: dict[str, Any] = {} if timestamp is None else {"timestamp": timestamp + i}
        producer.produce(topic, value=json.dumps({"id": i}).encode(), partition=i % partitions,
                         **kwargs)  # fmt: skip
    assert producer.flush(30) == 0


def archived_ids(s3: Any, bucket: str, prefix: str = "arch/") -> list[int]:
    """The sorted ids of every JSON record in the data objects under ``prefix``."""
    ids: list[int] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if "/.kafka-archive/" not in item["Key"] and "/_dead-letter/" not in item["Key"]:
                body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                ids.extend(json.loads(line)["id"] for line in body.decode().splitlines())
    return sorted(ids)

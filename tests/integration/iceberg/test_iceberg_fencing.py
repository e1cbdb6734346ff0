"""An Iceberg route's data files under the job's lease, against moto's S3 server (no
Spark): a table's file is never deleted by a task, and tasks prove the lease."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kafka_archive import kcql
from kafka_archive.archiver import iceberg
from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import FencedError
from kafka_archive.archiver.core.model import TopicPartition, WorkUnit
from kafka_archive.archiver.state.fencing import UnitFencing
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Target

pytestmark = pytest.mark.integration

TP = TopicPartition("orders", 0)


@pytest.fixture
def store(s3_endpoint: str) -> S3Store:
    return S3Store(S3Settings(endpoint_url=s3_endpoint, region="us-east-1"))


def _unit(bucket: str, *, run: str, epoch: int, stop: int = 100) -> WorkUnit:
    plan = kcql.parse(
        f"INSERT INTO {bucket}:tables/orders SELECT * FROM orders STOREAS PARQUET "
        "PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.orders')"
    )
    (unit,) = iceberg.with_data_layout(
        (
            WorkUnit(
                0, plan.routes[0], TP, 0, stop, run, "job", "g", epoch=epoch, lease_ttl_seconds=600
            ),
        )
    )
    return unit


def test_a_tables_file_is_never_deleted_by_another_attempt(
    store: S3Store, bucket: Callable[..., str], s3_client: Any
) -> None:
    """Two attempts of one unit (a Spark retry, or a speculative copy that loses the race)
    write the same key: the second adopts the first's file, it never deletes it (the driver
    may be committing it). An attempt with other boundaries at that key (a unit of an
    earlier batch of the run) stops instead of replacing it. And a unit of an epoch that
    lost the lease writes nothing."""
    target = Target(bucket(), "tables/orders")
    lock = JobLock(store, target, "job", "0123456789abcdef", ttl_seconds=600)
    lock.acquire()
    try:
        unit = _unit(target.bucket, run="0123456789abcdef", epoch=lock.epoch)
        key = "tables/orders/data/orders/0/000000000000_0123456789abcdef_job.parquet"

        def put(body: bytes) -> Callable[[], None]:
            return lambda: store.put_bytes(target.bucket, key, body)

        UnitFencing(store, unit).create(key, put(b"first attempt"))
        first = s3_client.head_object(Bucket=target.bucket, Key=key)
        UnitFencing(store, unit).create(key, put(b"second attempt"))
        after = s3_client.head_object(Bucket=target.bucket, Key=key)
        assert (after["ETag"], after["LastModified"]) == (first["ETag"], first["LastModified"])
        assert (
            s3_client.get_object(Bucket=target.bucket, Key=key)["Body"].read() == b"first attempt"
        )

        other = _unit(target.bucket, run="0123456789abcdef", epoch=lock.epoch, stop=50)
        with pytest.raises(FencedError):
            UnitFencing(store, other).create(key, put(b"other bounds"))
        body = s3_client.get_object(Bucket=target.bucket, Key=key)["Body"].read()
        assert body == b"first attempt"

        stale = _unit(target.bucket, run="fedcba9876543210", epoch=lock.epoch - 1)
        with pytest.raises(FencedError, match="took the job's lease over"):
            UnitFencing(store, stale).create(key.replace("0123", "fedc"), put(b"stale"))
    finally:
        lock.release()

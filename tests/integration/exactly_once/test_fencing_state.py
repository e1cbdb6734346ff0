"""The fencing building blocks against a real S3 endpoint (moto's server), without Spark:
lease takeover and release, partition fences, create-only objects, recovery of a fenced
run's objects below the committed offset."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import wait_lease_expired
from faultproxy import FaultProxy

from kafka_archive import kcql
from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import FencedError
from kafka_archive.archiver.core.model import TopicPartition, WorkUnit
from kafka_archive.archiver.state import checkpoint, pending
from kafka_archive.archiver.state.fencing import UnitFencing
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.state.paths import lock_key
from kafka_archive.archiver.store.s3 import PreconditionFailed, S3Store
from kafka_archive.kcql.plan import Target

pytestmark = pytest.mark.integration

TP = TopicPartition("orders", 0)


@pytest.fixture
def store(s3_endpoint: str) -> S3Store:
    return S3Store(S3Settings(endpoint_url=s3_endpoint, region="us-east-1"))


def _lock(s3: Any, target: Target) -> dict[str, Any]:
    body = s3.get_object(Bucket=target.bucket, Key=lock_key(target))["Body"].read()
    return dict(json.loads(body))


def test_a_stale_holder_neither_releases_nor_renews_the_new_holders_lease(
    store: S3Store, bucket: Callable[..., str], s3_client: Any
) -> None:
    target = Target(bucket(), "archive")
    stale = JobLock(store, target, "job", "run-a", ttl_seconds=2)
    stale.acquire()
    stale._stop.set()  # frozen: it renews no more
    wait_lease_expired(s3_client, target.bucket)  # its lease runs out
    with JobLock(store, target, "job", "run-b", ttl_seconds=600) as newer:
        assert newer.epoch > stale.epoch
        stale._renew_once()  # thawed: its renewal finds another run's lock
        assert stale.lost
        with pytest.raises(FencedError, match="run-b took the job's lease over"):
            stale.check()
        stale.release()
        assert _lock(s3_client, target)["run_id"] == "run-b"
        assert _lock(s3_client, target)["released"] is False
    assert _lock(s3_client, target)["released"] is True  # kept: epochs go on growing
    with JobLock(store, target, "job", "run-c", ttl_seconds=600) as third:
        assert third.epoch > newer.epoch


def test_an_older_run_is_fenced_off_a_partition_a_newer_run_stamped(
    store: S3Store, bucket: Callable[..., str]
) -> None:
    target = Target(bucket(), "")
    old = checkpoint.PartitionState(next_offset=10, run_id="a", committed_at="t", epoch=5)
    checkpoint.commit(store, target, "job", TP, old, expected_etag=None)
    loaded_by_a = checkpoint.load(store, target, "job", TP)
    fenced_b = checkpoint.fence(store, target, "job", TP, loaded_by_a, epoch=7, initial_offset=0)
    assert fenced_b.state is not None and fenced_b.state.epoch == 7
    assert fenced_b.state.next_offset == 10
    # Run A (epoch 5) commits against the ETag it read: refused as fenced.
    later = checkpoint.PartitionState(next_offset=20, run_id="a", committed_at="t", epoch=5)
    with pytest.raises(FencedError, match="newer lease"):
        checkpoint.commit(store, target, "job", TP, later, expected_etag=loaded_by_a.etag)
    # ... and cannot fence it back either.
    with pytest.raises(FencedError):
        checkpoint.fence(
            store,
            target,
            "job",
            TP,
            checkpoint.load(store, target, "job", TP),
            epoch=5,
            initial_offset=0,
        )
    # Fencing twice with one epoch writes nothing.
    again = checkpoint.fence(store, target, "job", TP, fenced_b, epoch=7, initial_offset=0)
    assert again.etag == fenced_b.etag


def _unit(bucket: str, *, run: str, epoch: int, etag: str | None, stop: int = 100) -> WorkUnit:
    plan = kcql.parse(f"INSERT INTO {bucket}:archive SELECT * FROM orders")
    return WorkUnit(
        0,
        plan.routes[0],
        TP,
        0,
        stop,
        run,
        "job",
        "g",
        state_etag=etag,
        epoch=epoch,
        lease_ttl_seconds=600,
    )


def test_an_object_is_created_never_overwritten_unless_provably_garbage(
    store: S3Store, bucket: Callable[..., str], s3_client: Any, tmp_path: Path
) -> None:
    target = Target(bucket(), "archive")
    lock = JobLock(store, target, "job", "run-b", ttl_seconds=600)
    lock.acquire()
    try:
        fenced = checkpoint.fence(
            store,
            target,
            "job",
            TP,
            checkpoint.load(store, target, "job", TP),
            epoch=lock.epoch,
            initial_offset=0,
        )
        unit = _unit(target.bucket, run="run-b", epoch=lock.epoch, etag=fenced.etag)
        fencing = UnitFencing(store, unit)
        key = "archive/orders/0/000000000000.json"

        def put(body: bytes) -> Callable[[], None]:
            return lambda: store.put_bytes(target.bucket, key, body)

        s3_client.put_object(
            Bucket=target.bucket,
            Key=key,
            Body=b"stale run's\n",
            IfNoneMatch="*",
            Metadata=pending.writer_metadata("run-a", 1, "u"),
        )
        with pytest.raises(PreconditionFailed), store.creating(target.bucket, key):
            store.put_bytes(target.bucket, key, b"again\n")
        # Another run's uncommitted object, the partition unchanged since this run fenced
        # it: replaced.
        fencing.create(key, put(b"run b\n"))
        head = s3_client.head_object(Bucket=target.bucket, Key=key)
        assert s3_client.get_object(Bucket=target.bucket, Key=key)["Body"].read() == b"run b\n"
        assert head["Metadata"]["kafka-archive-run"] == "run-b"
        # A twin attempt of the same unit finds its own object: adopted, not uploaded again.
        UnitFencing(store, unit).create(key, put(b"never sent\n"))
        assert s3_client.get_object(Bucket=target.bucket, Key=key)["Body"].read() == b"run b\n"
        # Once the partition was committed past a unit's plan, an existing object is not that
        # unit's to replace (a zombie attempt of an earlier batch, with other boundaries):
        # fenced, the object untouched.
        done = checkpoint.PartitionState(100, "run-b", "t", epoch=lock.epoch)
        checkpoint.commit(store, target, "job", TP, done, expected_etag=fenced.etag)
        stale = UnitFencing(
            store, _unit(target.bucket, run="run-b", epoch=lock.epoch, etag=fenced.etag, stop=50)
        )
        with pytest.raises(FencedError, match="another run wrote the partition's state"):
            stale.create(key, put(b"stale\n"))
        assert s3_client.get_object(Bucket=target.bucket, Key=key)["Body"].read() == b"run b\n"
        # A unit of an epoch that no longer holds the lease stops before it writes at all.
        old = UnitFencing(
            store, _unit(target.bucket, run="run-a", epoch=lock.epoch - 1, etag=fenced.etag)
        )
        with pytest.raises(FencedError, match="took the job's lease over"):
            old.create("archive/orders/0/000000000100.json", put(b"x\n"))
        assert "Contents" not in s3_client.list_objects_v2(
            Bucket=target.bucket, Prefix="archive/orders/0/000000000100"
        )
    finally:
        lock.release()


def test_recovery_removes_a_fenced_runs_object_below_the_committed_offset(
    store: S3Store, bucket: Callable[..., str], s3_client: Any
) -> None:
    """Run B (epoch 7) committed 0..199 with objects at 0 and 100; fenced run A (epoch 5,
    another flush count) left an object at 50 with its marker; an object at 150 carries B's
    epoch although A marked it (B wrote it after A's marker). Only A's is removed."""
    target = Target(bucket(), "archive")
    keys = {o: f"archive/orders/0/{o:012d}.json" for o in (0, 50, 100, 150)}
    writers = {0: ("run-b", 7), 50: ("run-a", 5), 100: ("run-b", 7), 150: ("run-b", 7)}
    for offset, key in keys.items():
        run, epoch = writers[offset]
        s3_client.put_object(
            Bucket=target.bucket,
            Key=key,
            Body=b"{}\n",
            Metadata=pending.writer_metadata(run, epoch, "u"),
        )
    pending.mark(store, target, "job", TP, 50, keys[50], "run-a", 5)
    pending.mark(store, target, "job", TP, 150, keys[150], "run-a", 5)
    pending.mark(store, target, "job", TP, 100, keys[100], "run-b", 7)  # B crashed pre-clear
    state = checkpoint.PartitionState(200, "run-b", "t", epoch=7, commits=((0, 7),))
    fenced: list[int] = []
    result = pending.recover(store, target, "job", TP, state, lambda: fenced.append(1))
    assert result.deleted_objects == (keys[50],)
    assert fenced == [1]
    listed = sorted(o["Key"] for o in s3_client.list_objects_v2(Bucket=target.bucket)["Contents"])
    assert [k for k in listed if "/.kafka-archive/" not in k] == [keys[0], keys[100], keys[150]]
    # A's keys stay watched (for a create of A that lands late), B's markers go.
    watched = [k for k in listed if "/.kafka-archive/watch/orders/0/" in k]
    assert len(watched) == 2 and not [k for k in listed if "/pending/" in k], listed


def test_an_acquisition_whose_response_is_lost_holds_the_lease(
    s3_endpoint: str, bucket: Callable[..., str], s3_client: Any
) -> None:
    """The lock PUT is applied but its answer lost; the SDK's retry meets 412 (the lock now
    exists — ours). The run recognises its own acquisition instead of calling itself busy."""
    target = Target(bucket(), "archive")
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.drop_response = lambda method, path, headers: (
            method == "PUT" and path.split("?")[0].endswith("/lock.json") and proxy.dropped == 0
        )
        store = S3Store(S3Settings(endpoint_url=proxy.url, region="us-east-1"))
        with JobLock(store, target, "job", "run-a", ttl_seconds=600) as lock:
            assert proxy.dropped == 1
            assert _lock(s3_client, target)["epoch"] == lock.epoch
            lock.check()
    assert _lock(s3_client, target)["released"] is True


def test_a_refused_multipart_completion_knows_the_etag_it_would_have_given(
    store: S3Store, bucket: Callable[..., str], s3_client: Any
) -> None:
    """What tells a retried task's multipart object (its metadata fixed before its content
    was known) from another: the ETag the refused completion would have given, S3's."""
    bkt, key = bucket(), "archive/orders/0/000000000000.json"
    parts = [b"a" * (5 * 1024 * 1024), b"b" * 100]

    def upload() -> tuple[str, list[str]]:
        upload_id = store.start_multipart(bkt, key)
        etags = [store.upload_part(bkt, key, upload_id, n, p) for n, p in enumerate(parts, 1)]
        return upload_id, etags

    upload_id, etags = upload()
    with store.creating(bkt, key):
        store.complete_multipart(bkt, key, upload_id, etags)
    assert store.refused_etag(bkt, key) is None
    first = s3_client.head_object(Bucket=bkt, Key=key)["ETag"]
    upload_id, etags = upload()  # a retry of the same bytes
    with pytest.raises(PreconditionFailed), store.creating(bkt, key):
        store.complete_multipart(bkt, key, upload_id, etags)
    assert store.refused_etag(bkt, key) == first
    assert store.refused_etag(bkt, key) is None, "told once"
    store.abort_upload(bkt, key, upload_id)

"""The exactly-once building blocks against a real S3 endpoint: lock, commit, recovery."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import JobLockedError, StateConflictError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.state import checkpoint, pending
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.state.paths import lock_key
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Target

pytestmark = pytest.mark.integration

TP = TopicPartition("orders", 0)


@pytest.fixture
def store(s3_endpoint: str) -> S3Store:
    return S3Store(S3Settings(endpoint_url=s3_endpoint, region="us-east-1"))


def _state(offset: int, run: str) -> checkpoint.PartitionState:
    return checkpoint.PartitionState(next_offset=offset, run_id=run, committed_at="t")


def test_second_lock_holder_is_refused_until_release(
    store: S3Store, bucket: Callable[..., str]
) -> None:
    target = Target(bucket(), "archive")
    with (
        JobLock(store, target, "job", "run-a", ttl_seconds=600),
        pytest.raises(JobLockedError, match="already running"),
    ):
        JobLock(store, target, "job", "run-b", ttl_seconds=600).acquire()
    with JobLock(store, target, "job", "run-b", ttl_seconds=600):
        pass


def test_expired_lock_is_taken_over(
    store: S3Store, bucket: Callable[..., str], s3_client: Any
) -> None:
    target = Target(bucket(), "archive")
    stale = {"run_id": "dead", "host": "h", "pid": 1, "expires_at": "2000-01-01T00:00:00Z"}
    s3_client.put_object(
        Bucket=target.bucket, Key=lock_key(target), Body=json.dumps(stale).encode()
    )
    with JobLock(store, target, "job", "run-b", ttl_seconds=600):
        body = json.loads(
            s3_client.get_object(Bucket=target.bucket, Key=lock_key(target))["Body"].read()
        )
        assert body["run_id"] == "run-b"


def test_commit_refuses_a_state_moved_by_another_run(
    store: S3Store, bucket: Callable[..., str]
) -> None:
    target = Target(bucket(), "")
    checkpoint.commit(store, target, "job", TP, _state(10, "run-a"), expected_etag=None)
    loaded = checkpoint.load(store, target, "job", TP)
    assert loaded.state is not None and loaded.state.next_offset == 10

    checkpoint.commit(store, target, "job", TP, _state(20, "run-b"), expected_etag=loaded.etag)
    with pytest.raises(StateConflictError, match="changed by another run"):
        checkpoint.commit(store, target, "job", TP, _state(30, "run-c"), expected_etag=loaded.etag)
    with pytest.raises(StateConflictError):
        checkpoint.commit(store, target, "job", TP, _state(5, "run-d"), expected_etag=None)
    final = checkpoint.load(store, target, "job", TP).state
    assert final is not None and final.next_offset == 20


def test_a_twin_attempt_of_the_same_run_may_commit_the_same_offset(
    store: S3Store, bucket: Callable[..., str]
) -> None:
    target = Target(bucket(), "p")
    checkpoint.commit(store, target, "job", TP, _state(10, "run-a"), expected_etag=None)
    # A speculative copy of the same task loaded the same (absent) state and finished later.
    checkpoint.commit(store, target, "job", TP, _state(10, "run-a"), expected_etag=None)
    with pytest.raises(StateConflictError):
        checkpoint.commit(store, target, "job", TP, _state(11, "run-a"), expected_etag=None)


def test_recovery_deletes_only_objects_at_or_beyond_the_committed_offset(
    store: S3Store, bucket: Callable[..., str], s3_client: Any
) -> None:
    target = Target(bucket(), "archive")
    keys = {
        0: "archive/x/orders(0_000000000000).json",
        50: "archive/y/orders(0_000000000050).json",
        70: "archive/x/orders(0_000000000070).json",
    }
    for start, key in keys.items():
        pending.mark(store, target, "job", TP, start, key, "run-crashed")
        s3_client.put_object(Bucket=target.bucket, Key=key, Body=b"{}\n")

    result = pending.recover(store, target, "job", TP, _state(50, "run-done"))

    assert sorted(result.deleted_objects) == sorted([keys[50], keys[70]])
    assert result.cleared_markers == 3
    left = [o["Key"] for o in s3_client.list_objects_v2(Bucket=target.bucket).get("Contents", [])]
    assert left == [keys[0]], "committed object kept, orphans and all markers removed"


def test_recovery_judges_each_object_of_a_marker_that_names_several(
    store: S3Store, bucket: Callable[..., str], s3_client: Any
) -> None:
    """One marker for a unit's small objects: each is judged by its own first offset."""
    target = Target(bucket(), "archive")
    keys = {
        30: "archive/orders(0_000000000030).json",
        50: "archive/orders(0_000000000050).json",
        70: "archive/orders(0_000000000070).json",
    }
    pending.mark_all(store, target, "job", TP, [(k, s) for s, k in keys.items()], "run-x")
    for key in keys.values():
        s3_client.put_object(Bucket=target.bucket, Key=key, Body=b"{}\n")

    result = pending.recover(store, target, "job", TP, _state(50, "run-done"))

    assert sorted(result.deleted_objects) == sorted([keys[50], keys[70]])
    assert result.cleared_markers == 1
    left = [o["Key"] for o in s3_client.list_objects_v2(Bucket=target.bucket).get("Contents", [])]
    assert left == [keys[30]], "the object below the commit kept, the others and the marker gone"

"""State belongs to the route (target + topic), not to the job: adding or removing a
statement keeps every other route's progress, and archives written by the layout before
(``<prefix>/.kafka-archive/<job>/...``) are adopted by the next run.

The archive is read back with boto3 + json (``archived_ids``), never with our readers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import archived_ids
from commit_log_reader import entry_keys, read_log

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import StateConflictError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.read import listing
from kafka_archive.archiver.state import checkpoint, legacy
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.cli import main
from kafka_archive.kcql.plan import Target

pytestmark = pytest.mark.integration


def _run(capsys: pytest.CaptureFixture[str], statements: list[str], *args: str) -> str:
    code = main(["run", "--kcql", ";\n".join(statements), *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def _ids(s3: Any, bucket: str, topic: str) -> list[int]:
    return archived_ids(s3, bucket, prefix=f"arch/{topic}/")


def test_adding_and_removing_statements_keeps_every_routes_progress(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b, c, bkt = topic(), topic(), topic(), bucket()
    flags = ("--bootstrap-servers", broker, "--endpoint-url", s3_endpoint)
    into = f"INSERT INTO {bkt}:arch SELECT * FROM"
    sa, sb, sc = (f"{into} {t} STOREAS `JSON` WITH_FLUSH_COUNT = 50" for t in (a, b, c))
    for name in (a, b, c):
        produce(name, 120, partitions=1)

    out = _run(capsys, [sa, sb], *flags)
    assert "total: 240 records" in out
    assert _ids(s3_client, bkt, a) == _ids(s3_client, bkt, b) == list(range(120))

    # Add C (another default job name): A and B resume from their state, C starts where
    # --start says (latest: at its end).
    produce(a, 30, first=120, partitions=1)
    out = _run(capsys, [sa, sb, sc], *flags, "--start", "latest")
    assert "total: 30 records" in out, out
    assert _ids(s3_client, bkt, a) == list(range(150))
    assert _ids(s3_client, bkt, b) == list(range(120))
    assert _ids(s3_client, bkt, c) == []

    # Remove B: A and C keep their progress; B, added back later, keeps its own.
    produce(a, 10, first=150, partitions=1)
    produce(b, 10, first=120, partitions=1)
    produce(c, 5, first=120, partitions=1)
    out = _run(capsys, [sa, sc], *flags)
    assert "total: 15 records" in out, out
    assert _ids(s3_client, bkt, a) == list(range(160))
    assert _ids(s3_client, bkt, b) == list(range(120))
    assert _ids(s3_client, bkt, c) == list(range(120, 125))
    out = _run(capsys, [sb, sa], *flags)
    assert "total: 10 records" in out, out
    assert _ids(s3_client, bkt, b) == list(range(130))

    # One state per route and partition, no job folder.
    states = sorted(
        i["Key"]
        for i in s3_client.list_objects_v2(Bucket=bkt, Prefix="arch/.kafka-archive/")["Contents"]
        if "/state/" in i["Key"]
    )
    assert states == sorted(f"arch/.kafka-archive/state/{t}/0.json" for t in (a, b, c))


def _to_old_layout(s3: Any, bucket: str, topic: str, job: str) -> dict[str, Any]:
    """Move the route's state where the earlier version kept it, as it wrote it, with a
    released lock of that job; returns the state's body."""
    new = f"arch/.kafka-archive/state/{topic}/0.json"
    body = json.loads(s3.get_object(Bucket=bucket, Key=new)["Body"].read())
    body["job"] = job
    s3.put_object(
        Bucket=bucket,
        Key=f"arch/.kafka-archive/{job}/state/{topic}/0.json",
        Body=json.dumps(body).encode(),
    )
    s3.delete_object(Bucket=bucket, Key=new)
    lock = {
        "job": job,
        "run_id": "old-run",
        "epoch": body["epoch"],
        "host": "h",
        "pid": 1,
        "renewal": 4,
        "expires_at_ms": 0,
        "expires_at": "2000-01-01T00:00:00Z",
        "released": True,
    }
    s3.put_object(
        Bucket=bucket, Key=f"arch/.kafka-archive/{job}/lock.json", Body=json.dumps(lock).encode()
    )
    s3.delete_object(Bucket=bucket, Key="arch/.kafka-archive/lock.json")
    return dict(body)


def test_an_archive_of_the_job_scoped_layout_is_adopted(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """State, lock and an intent marker as the earlier version wrote them: the next run (of
    another job name) continues at the old state's offset, deletes the object the marker
    names (a crashed old run's, beyond the commit), retires the old lock."""
    name, bkt = topic(), bucket()
    flags = ("--bootstrap-servers", broker, "--endpoint-url", s3_endpoint)
    statement = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 50"
    produce(name, 100, partitions=1)
    _run(capsys, [statement], *flags)
    old = _to_old_layout(s3_client, bkt, name, "orders-0a1b2c3d")
    assert old["next_offset"] == 100
    # status reads the old job's state (the listing and the state index, which still names
    # the route's state the listing no longer shows, prove nothing for it) and writes nothing.
    status = [
        "status",
        "--kcql",
        statement,
        *flags,
        "--job-name",
        "orders-0a1b2c3d",
        "--output",
        "json",
    ]
    before = s3_client.list_objects_v2(Bucket=bkt)["Contents"]
    assert main(status) == 0
    (row,) = json.loads(capsys.readouterr().out)["partitions"]
    assert row["archived_offset"] == 100 and row["lag"] == 0, row
    assert s3_client.list_objects_v2(Bucket=bkt)["Contents"] == before
    # A crashed old run: an uncommitted object at offset 100 and its marker.
    stray = f"arch/{name}/0/000000000100.json"
    s3_client.put_object(Bucket=bkt, Key=stray, Body=b'{"id": -1}\n')
    digest = hashlib.sha256(stray.encode()).hexdigest()[:16]
    marker = {"key": stray, "start": 100, "run": "crashed", "epoch": old["epoch"] + 1}
    s3_client.put_object(
        Bucket=bkt,
        Key=f"arch/.kafka-archive/orders-0a1b2c3d/pending/{name}/0/{100:020d}-{digest}.json",
        Body=json.dumps(marker).encode(),
    )
    produce(name, 40, first=100, partitions=1)

    out = _run(capsys, [statement], *flags, "--job-name", "renamed")
    assert "total: 40 records" in out, out
    assert _ids(s3_client, bkt, name) == list(range(140))
    keys = {i["Key"] for i in s3_client.list_objects_v2(Bucket=bkt, Prefix="arch/")["Contents"]}
    assert not any("/orders-0a1b2c3d/state/" in k or "/pending/" in k for k in keys), keys
    state = json.loads(
        s3_client.get_object(Bucket=bkt, Key=f"arch/.kafka-archive/state/{name}/0.json")[
            "Body"
        ].read()
    )
    assert state["next_offset"] == 140
    lock = "arch/.kafka-archive/orders-0a1b2c3d/lock.json"
    retired = json.loads(s3_client.get_object(Bucket=bkt, Key=lock)["Body"].read())
    assert retired["retired"] is True and retired["epoch"] > old["epoch"]


def _data_keys(s3: Any, bucket: str) -> set[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="arch/")
    return {
        o["Key"]
        for page in pages
        for o in page.get("Contents", [])
        if "/.kafka-archive/" not in o["Key"]
    }


def _refused_then_settled(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    s3: Any,
    bucket: str,
    statement: str,
    flags: tuple[str, ...],
    why: str,
) -> None:
    """A commit_protocol=log run refuses what only the states protocol settles, in one line
    (exit 2), writing nothing; a states run settles it."""
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")
    before = _data_keys(s3, bucket)
    code = main(["run", "--kcql", statement, *flags])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert why in err and "commit_protocol=states" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) <= 2, err
    assert _data_keys(s3, bucket) == before and entry_keys(s3, bucket) == []
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "states")
    _run(capsys, [statement], *flags)


def test_a_log_mode_run_over_the_job_scoped_layout_says_to_adopt_it_first_then_migrates_it(
    monkeypatch: pytest.MonkeyPatch,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The commit log's migration reads route states only: over an archive of an earlier
    version's per-job layout a log-mode run would begin every partition again (each record
    twice). It refuses instead; once a states run adopted the layout, it migrates."""
    name, bkt = topic(), bucket()
    flags = ("--bootstrap-servers", broker, "--endpoint-url", s3_endpoint)
    statement = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 50"
    produce(name, 100, partitions=1)
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "states")
    _run(capsys, [statement], *flags)
    _to_old_layout(s3_client, bkt, name, "orders-0a1b2c3d")
    produce(name, 40, first=100, partitions=1)

    _refused_then_settled(capsys, monkeypatch, s3_client, bkt, statement, flags, "per-job layout")
    produce(name, 20, first=140, partitions=1)
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")
    out = _run(capsys, [statement], *flags)
    assert "total: 20 records" in out, out
    assert _ids(s3_client, bkt, name) == list(range(160))
    logged = read_log(s3_client, bkt)
    assert logged.kinds == ["claim", "import", "claim", "commit"]
    assert logged.ends == {(name, 0): 160}
    assert logged.named() == _data_keys(s3_client, bkt)


def test_a_log_mode_run_after_a_crashed_states_run_says_to_recover_it_first_then_migrates_it(
    monkeypatch: pytest.MonkeyPatch,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A states run that crashed left an object past its commit and the intent marker that
    names it; only the states protocol's recovery deletes it (the log never names it, and
    vacuum leaves an object without a log writer). A log-mode run refuses to migrate such a
    target; after a states run recovered it, a log-mode run migrates it, exactly once."""
    name, bkt = topic(), bucket()
    flags = ("--bootstrap-servers", broker, "--endpoint-url", s3_endpoint)
    statement = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 50"
    produce(name, 100, partitions=1)
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "states")
    _run(capsys, [statement], *flags)
    state = json.loads(
        s3_client.get_object(Bucket=bkt, Key=f"arch/.kafka-archive/state/{name}/0.json")[
            "Body"
        ].read()
    )
    stray = f"arch/{name}/0/000000000100.json"
    s3_client.put_object(Bucket=bkt, Key=stray, Body=b'{"id": -1}\n')
    digest = hashlib.sha256(stray.encode()).hexdigest()[:16]
    marker = {"key": stray, "start": 100, "run": "crashed", "epoch": state["epoch"] + 1}
    s3_client.put_object(
        Bucket=bkt,
        Key=f"arch/.kafka-archive/pending/{name}/0/{100:020d}-{digest}.json",
        Body=json.dumps(marker).encode(),
    )
    produce(name, 40, first=100, partitions=1)

    _refused_then_settled(capsys, monkeypatch, s3_client, bkt, statement, flags, "intent marker")
    assert stray not in _data_keys(s3_client, bkt) or _ids(s3_client, bkt, name) == list(range(140))
    produce(name, 20, first=140, partitions=1)
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")
    out = _run(capsys, [statement], *flags)
    assert "total: 20 records" in out, out
    assert _ids(s3_client, bkt, name) == list(range(160))
    logged = read_log(s3_client, bkt)
    assert logged.kinds == ["claim", "import", "claim", "commit"]
    assert logged.ends == {(name, 0): 160}
    assert logged.named() == _data_keys(s3_client, bkt)


@pytest.fixture
def store(s3_endpoint: str) -> S3Store:
    return S3Store(S3Settings(endpoint_url=s3_endpoint, region="us-east-1"))


def test_two_old_jobs_with_state_for_one_partition_need_a_choice(
    store: S3Store, s3_client: Any, bucket: Callable[..., str]
) -> None:
    target, tp = Target(bucket(), "arch"), TopicPartition("orders", 0)
    for job, offset in (("first", 10), ("second", 20)):
        body = checkpoint.PartitionState(offset, job, "t").to_json(tp, job)
        s3_client.put_object(
            Bucket=target.bucket,
            Key=f"arch/.kafka-archive/{job}/state/orders/0.json",
            Body=json.dumps(body).encode(),
        )
    assert listing.committed_offsets(store, target) == {}  # two old jobs: no one answer
    found = legacy.scan(store, target)
    assert legacy.adopt(store, target, {"payments"}, "any", found) == 0
    with pytest.raises(StateConflictError, match="first, second"):
        legacy.adopt(store, target, {"orders"}, "any", found)
    assert legacy.adopt(store, target, {"orders"}, "second", found) == 1
    adopted = checkpoint.load(store, target, "any", tp).state
    assert adopted is not None and adopted.next_offset == 20
    assert listing.committed_offsets(store, target) == {tp: 20}  # the route's state wins
    # Once the route has state, the other old job's is left alone.
    assert legacy.adopt(store, target, {"orders"}, "any", legacy.scan(store, target)) == 0

"""Work units smaller than a partition (archiver.subunits) on a real broker, S3 and Spark: a
keyed, skewed topic whose large partition is archived by several Spark tasks, exactly once,
read back with plain boto3 + json; the committed pieces' intent markers cleared in the
batch's one bulk delete (requests counted by a proxy), and a SIGKILL between the commit and
that delete; a failed piece whose later neighbours are not committed and are cleaned up by
the next run; SIGKILL mid-run with splitting on."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, run_args
from confluent_kafka import Producer
from faultproxy import FaultProxy

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

KEY = re.compile(r"^archive/(?P<topic>[^/]+)/(?P<partition>\d+)/(?P<offset>\d{12})\.json$")
HOT, COLD = 4000, 200  # records of the hot partition 0 and of each of partitions 1..3


SKEWED = HOT + 3 * COLD  # records of one skewed()


def skewed(first: int = 0, *, bad: int | None = None) -> Iterator[dict[str, Any]]:
    """Keyed records {"id": i} from ``first``: one hot key fills partition 0, three cold keys
    the others. The record with id ``bad`` is not JSON."""
    i = first
    for partition, count in ((0, HOT), (1, COLD), (2, COLD), (3, COLD)):
        for _ in range(count):
            value = b"not json {" if i == bad else json.dumps({"id": i}).encode()
            yield {"key": f"key-{partition}".encode(), "value": value, "partition": partition}
            i += 1


def data_objects(s3: Any, bucket: str) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="archive/"):
        for item in page.get("Contents", []):
            if "/.kafka-archive/" not in item["Key"]:
                found[item["Key"]] = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
    return found


def ids_of(found: dict[str, bytes]) -> list[int]:
    return [json.loads(line)["id"] for body in found.values() for line in body.splitlines()]


def states(s3: Any, bucket: str) -> dict[int, int]:
    """partition -> next offset, from the state objects read as plain JSON."""
    out: dict[int, int] = {}
    page = s3.list_objects_v2(Bucket=bucket, Prefix="archive/.kafka-archive/")
    for item in page.get("Contents", []):
        if "/state/" in item["Key"]:
            body = json.loads(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
            out[body["partition"]] = body["next_offset"]
    return out


def last_job_tasks(spark: Any) -> int:
    """Tasks of the stage of the Spark job that ran last (Spark's own count)."""
    tracker = spark.statusTracker()
    job = max(tracker.getJobIdsForGroup())
    info = tracker.getJobInfo(job)
    return sum(tracker.getStageInfo(stage).numTasks for stage in info.stageIds)


def test_a_skewed_partition_is_split_into_tasks_and_archived_exactly_once(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, bkt = topic(partitions=4), bucket()
    produce(name, skewed())
    produced = SKEWED
    monkeypatch.setenv("KAFKA_ARCHIVE_MAX_RECORDS_PER_UNIT", "1000")
    args = run_args(
        f"INSERT INTO {bkt}:archive SELECT * FROM {name} WITH_FLUSH_COUNT = 500",
        broker,
        s3_endpoint,
        command=None,
    )
    assert main(["run", *args]) == 0, capsys.readouterr().err
    # The run counts partitions as partitions, and says how many pieces it made of them.
    assert "archiving 4 partition(s), 7 pieces with Spark" in capsys.readouterr().err
    # Spark ran the hot partition as 4 tasks of 1,000 offsets; the cold ones (small units)
    # share a task per core.
    assert last_job_tasks(spark) == HOT // 1000 + min(3, spark.defaultParallelism)
    found = data_objects(s3_client, bkt)
    ids = ids_of(found)
    assert sorted(ids) == list(range(produced)) and len(ids) == len(set(ids))
    hot = sorted(k for k in found if KEY.match(k) and KEY.match(k)["partition"] == "0")  # type: ignore[index]
    # The same objects as one task would cut (every 500 offsets), written by 4 tasks: each
    # object's writer metadata names the piece it belongs to.
    assert [int(KEY.match(k)["offset"]) for k in hot] == list(range(0, HOT, 500))  # type: ignore[index]
    pieces = {
        s3_client.head_object(Bucket=bkt, Key=k)["Metadata"]["kafka-archive-unit"] for k in hot
    }
    assert {p.split("-")[0] for p in pieces} == {"0", "1000", "2000", "3000"}
    assert states(s3_client, bkt) == {0: HOT, 1: COLD, 2: COLD, 3: COLD}
    page = s3_client.list_objects_v2(Bucket=bkt, Prefix="archive/.kafka-archive/")
    assert not any("/pending/" in item["Key"] for item in page.get("Contents", []))

    # More records: the next run continues from each partition's commit, still exactly once.
    produce(name, skewed(produced))
    produced += SKEWED
    assert main(["run", *args]) == 0, capsys.readouterr().err
    ids = ids_of(data_objects(s3_client, bkt))
    assert sorted(ids) == list(range(produced)) and len(ids) == len(set(ids))
    assert states(s3_client, bkt) == {0: 2 * HOT, 1: 2 * COLD, 2: 2 * COLD, 3: 2 * COLD}


def hot_partitions(hot: int, count: int, partitions: int) -> Iterator[dict[str, Any]]:
    """{"id": i} records: ``count`` into each of the first ``hot`` partitions, 10 into the rest."""
    i = 0
    for partition in range(partitions):
        for _ in range(count if partition < hot else 10):
            yield {"value": json.dumps({"id": i}).encode(), "partition": partition}
            i += 1


def bulk_deletes(proxy: FaultProxy) -> int:
    """DeleteObjects requests (``POST /bucket?delete``) the proxy forwarded."""
    return sum(1 for method, path, _ in proxy.requests if method == "POST" and "?delete" in path)


def test_split_partitions_clear_their_markers_in_the_batchs_one_bulk_delete(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, bkt = topic(partitions=4), bucket()
    produce(name, hot_partitions(3, 1500, 4))
    monkeypatch.setenv("KAFKA_ARCHIVE_MAX_RECORDS_PER_UNIT", "500")
    kcql = f"INSERT INTO {bkt}:archive SELECT * FROM {name} WITH_FLUSH_COUNT = 100"
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        assert main(run_args(kcql, broker, proxy.url)) == 0, capsys.readouterr().err
    assert "archiving 4 partition(s), 10 pieces" in capsys.readouterr().err
    ids = ids_of(data_objects(s3_client, bkt))
    assert sorted(ids) == list(range(3 * 1500 + 10)) and len(ids) == len(set(ids))
    assert states(s3_client, bkt) == {0: 1500, 1: 1500, 2: 1500, 3: 10}
    # Every piece of the three split partitions (and the small unit) wrote markers; all of
    # them are gone, removed by one DeleteObjects request for the batch (not one per split
    # partition), and none by a single-object DELETE.
    assert not _pending(s3_client, bkt)
    assert bulk_deletes(proxy) == 1, proxy.requests
    assert not [p for m, p, _ in proxy.requests if m == "DELETE" and "/pending/" in p]


def test_sigkill_between_a_split_commit_and_its_marker_delete_leaves_only_stale_markers(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A whole-process run is SIGKILLed (with its JVM and Python workers) by the S3 proxy
    when it sends the batch's bulk delete of intent markers, after every partition, split or
    not, committed: the markers stay, stale. The next run clears them and neither deletes,
    rewrites nor duplicates a committed object."""
    name, bkt = topic(partitions=4), bucket()
    produce(name, skewed())
    kcql = f"INSERT INTO {bkt}:archive SELECT * FROM {name} WITH_FLUSH_COUNT = 500"
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "KAFKA_ARCHIVE_MAX_RECORDS_PER_UNIT": "1000",
    }
    running: list[subprocess.Popen[bytes]] = []

    class Killed(Exception):
        """Raised in the proxy's handler: the request is never forwarded."""

    def kill_at_bulk_delete(method: str, path: str, headers: dict[str, str]) -> bool:
        if method == "POST" and "?delete" in path:
            os.killpg(running[0].pid, signal.SIGKILL)
            raise Killed(path)
        return False

    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.drop_response = kill_at_bulk_delete
        process = subprocess.Popen(
            [KAFKA_ARCHIVE, *run_args(kcql, broker, proxy.url), "--master", "local[2]"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        running.append(process)
        try:
            assert process.wait(timeout=300) == -signal.SIGKILL
        finally:
            with contextlib.suppress(ProcessLookupError):  # what the kill left of the group
                os.killpg(process.pid, signal.SIGKILL)
    # Killed after the commits: every partition is committed, its markers are still there.
    assert states(s3_client, bkt) == {0: HOT, 1: COLD, 2: COLD, 3: COLD}
    markers = _pending_keys(s3_client, bkt)
    assert {k.split("/pending/")[1].split("/")[1] for k in markers} == {"0", "1", "2", "3"}
    before = _data_versions(s3_client, bkt)
    ids = ids_of(data_objects(s3_client, bkt))
    assert sorted(ids) == list(range(SKEWED)) and len(ids) == len(set(ids))

    # The next run (nothing new to archive) clears the stale markers and nothing else.
    assert main(run_args(kcql, broker, s3_endpoint)) == 0, capsys.readouterr().err
    assert "removed" not in capsys.readouterr().err
    assert not _pending(s3_client, bkt)
    assert _data_versions(s3_client, bkt) == before
    assert states(s3_client, bkt) == {0: HOT, 1: COLD, 2: COLD, 3: COLD}

    # And the archive goes on from the commits, every record once.
    produce(name, skewed(SKEWED))
    assert main(run_args(kcql, broker, s3_endpoint)) == 0, capsys.readouterr().err
    ids = ids_of(data_objects(s3_client, bkt))
    assert sorted(ids) == list(range(2 * SKEWED)) and len(ids) == len(set(ids))
    assert not _pending(s3_client, bkt)


def _pending_keys(s3: Any, bucket: str) -> list[str]:
    page = s3.list_objects_v2(Bucket=bucket, Prefix="archive/.kafka-archive/")
    return [item["Key"] for item in page.get("Contents", []) if "/pending/" in item["Key"]]


def _data_versions(s3: Any, bucket: str) -> dict[str, tuple[str, Any]]:
    """Each data object's ETag and last-modified time: the same after a run that neither
    deleted nor rewrote it."""
    page = s3.list_objects_v2(Bucket=bucket, Prefix="archive/")
    return {
        item["Key"]: (item["ETag"], item["LastModified"])
        for item in page.get("Contents", [])
        if "/.kafka-archive/" not in item["Key"]
    }


def test_a_failed_piece_commits_only_the_pieces_before_it(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, bkt = topic(partitions=4), bucket()
    bad = 2345  # in the hot partition's third piece [2000, 3000)
    produce(name, skewed(bad=bad))
    produced = SKEWED
    monkeypatch.setenv("KAFKA_ARCHIVE_MAX_RECORDS_PER_UNIT", "1000")
    conn = ["--bootstrap-servers", broker, "--endpoint-url", s3_endpoint]
    kcql = f"INSERT INTO {bkt}:archive SELECT * FROM {name} PROPERTIES('flush.count'=500"
    code = main(["run", "--kcql", kcql + ")", *conn])
    err = capsys.readouterr().err
    assert code == 10, err  # BadRecordError: the record at offset 2345 stops the partition
    assert "offset 2345" in err and "Traceback" not in err, err
    # The partition is committed up to the bad record; the fourth piece [3000, 4000) did
    # its work, but above a failed piece it is not committed.
    assert states(s3_client, bkt)[0] == bad
    hot = {
        int(m["offset"])
        for k in data_objects(s3_client, bkt)
        if (m := KEY.match(k)) and m["partition"] == "0"
    }
    assert {3000, 3500} <= hot
    page = s3_client.list_objects_v2(Bucket=bkt, Prefix="archive/.kafka-archive/")
    assert any("/pending/" in item["Key"] for item in page.get("Contents", []))

    # Skip the bad record: the next run removes the uncommitted objects and archives the rest
    # from offset 2345 on, every record once.
    code = main(["run", "--kcql", kcql + ", 'error.policy'='skip')", *conn])
    assert code == 0, capsys.readouterr().err
    ids = ids_of(data_objects(s3_client, bkt))
    assert len(ids) == len(set(ids))
    assert sorted(ids) == [i for i in range(produced) if i != bad]
    assert states(s3_client, bkt)[0] == HOT


@pytest.mark.full
def test_sigkill_with_split_partitions_resumes_to_exactly_once(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(20261123)
    name, bkt = topic(partitions=4), bucket()
    args = run_args(
        f"INSERT INTO {bkt}:archive SELECT * FROM {name} WITH_FLUSH_COUNT = 100",
        broker,
        s3_endpoint,
        command=None,
    )
    monkeypatch.setenv("KAFKA_ARCHIVE_MAX_RECORDS_PER_UNIT", "500")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    produced = interrupted = 0
    for trial in range(6):
        produce(name, skewed(produced))
        produced += SKEWED
        process = subprocess.Popen(
            [KAFKA_ARCHIVE, "run", *args, "--master", "local[2]"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while not _pending(s3_client, bkt) and process.poll() is None:
            assert time.monotonic() < deadline, "the run never started uploading"
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 0.5))
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        interrupted += _pending(s3_client, bkt)
        assert main(["run", *args]) == 0, (trial, capsys.readouterr().err)
        capsys.readouterr()
        ids = ids_of(data_objects(s3_client, bkt))
        assert len(ids) == len(set(ids)), f"trial {trial}: duplicates"
        assert sorted(ids) == list(range(produced)), f"trial {trial}: records missing or extra"
        assert not _pending(s3_client, bkt), "markers left after a clean run"
    assert interrupted >= 2, f"only {interrupted} of 6 kills left uncommitted pieces"


def _pending(s3: Any, bucket: str) -> bool:
    return bool(_pending_keys(s3, bucket))


@pytest.mark.full
def test_measure_a_skewed_topic_split_and_whole(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """The figure for the README: the same keyed, skewed topic (one hot partition of 300,000
    records of ~500 B, three of 30,000) archived by whole-process runs, once with the hot
    partition split into pieces of 100,000 offsets and once as one task per partition.
    Prints both wall times (``pytest -s``); asserts each archive holds every record once."""
    name = topic(partitions=4)
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 50, "batch.size": 1_000_000})
    pad = "x" * 480
    i = 0
    for partition, count in ((0, 300_000), (1, 30_000), (2, 30_000), (3, 30_000)):
        for _ in range(count):
            producer.produce(
                name,
                key=f"key-{partition}".encode(),
                value=json.dumps({"id": i, "pad": pad}).encode(),
                partition=partition,
            )
            i += 1
            if i % 50_000 == 0:
                producer.flush(60)
    assert producer.flush(60) == 0
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    seconds: dict[str, float] = {}
    for label, per_unit in (
        ("whole", 10**9),
        ("split", 100_000),
        ("whole again", 10**9),
        ("split again", 100_000),
    ):
        bkt = bucket()
        kcql = f"INSERT INTO {bkt}:archive SELECT * FROM {name} WITH_FLUSH_COUNT = 50000"
        started = time.monotonic()
        done = subprocess.run(
            [
                KAFKA_ARCHIVE,
                *run_args(kcql, broker, s3_endpoint),
                "--master",
                "local[2]",
            ],
            env={**env, "KAFKA_ARCHIVE_MAX_RECORDS_PER_UNIT": str(per_unit)},
            capture_output=True,
            timeout=900,
            check=False,
        )
        seconds[label] = time.monotonic() - started
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        ids = ids_of(data_objects(s3_client, bkt))
        assert len(ids) == i and len(set(ids)) == i
    print(
        "\nskewed topic (300,000 + 3 x 30,000 records of ~500 B), local[2]: "
        + ", ".join(f"{label} {s:.1f} s" for label, s in seconds.items())
    )

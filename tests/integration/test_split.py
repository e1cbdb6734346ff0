"""Work units smaller than a partition (archiver.subunits) on a real broker, S3 and Spark: a
keyed, skewed topic whose large partition is archived by several Spark tasks, exactly once,
read back with plain boto3 + json; a failed piece whose later neighbours are not committed
and are cleaned up by the next run; SIGKILL mid-run with splitting on."""

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
    page = s3.list_objects_v2(Bucket=bucket, Prefix="archive/.kafka-archive/")
    return any("/pending/" in item["Key"] for item in page.get("Contents", []))


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

"""`kafka-archive compact` of PARTITIONBY and time layouts (issue 38): a partition's objects of
several groups interleave, so compact merges consecutive objects of one group (an untiled
rewrite entry) into that group's folder. Real broker, moto's S3 server, real Spark.

Every check reads the archive independently: the log's entries listed with boto3 and folded
from their JSON by ``commit_log_reader.read_log`` (never our log codec), the named objects read
with json or pyarrow (never our decoder). Record ``i`` of a topic of ``P`` partitions is at
offset ``i // P`` of partition ``i % P``, and its group is ``i % 3``: a header value, or an
hour of record time, so where each record belongs is known from its id.
"""

from __future__ import annotations

import io
import json
import random
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow.dataset as ds
import pyarrow.fs
import pyarrow.parquet as pq
import pytest
from archive_helpers import cli, run_args
from commit_log_reader import CommitLog, read_log
from faultproxy import FaultProxy
from put_trigger import Trigger, log_mode_process

pytestmark = pytest.mark.integration

P = 2
GROUPS = ("g0", "g1", "g2")
HOUR = 3_600_000
BASE = 1_764_000_000_000 - 1_764_000_000_000 % HOUR  # 2025-11-24 16:00 UTC, on the hour


@pytest.fixture
def log_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")


def by_header(bkt: str, name: str, fmt: str) -> str:
    return (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} PARTITIONBY _header.h STOREAS `{fmt}` "
        "PROPERTIES('store.envelope'=true, 'flush.count'=3)"
    )


def by_hour(bkt: str, name: str) -> str:
    return (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` "
        "PROPERTIES('store.envelope'=true, 'flush.count'=3, 'layout'='hive')"
    )


def records(first: int, count: int) -> Iterator[dict[str, Any]]:
    """Record i: partition i % P, group i % 3 (header h and the hour of its time)."""
    for i in range(first, first + count):
        yield {
            "value": json.dumps({"id": i}).encode(),
            "partition": i % P,
            "headers": [("h", GROUPS[i % 3].encode())],
            "timestamp": BASE + (i % 3) * HOUR + i,
        }


def group_of(key: str) -> str:
    """The group folder of a key: the header's value, or the hour of the hive layout."""
    for seg in key.split("/")[1:-1]:
        if seg in GROUPS or seg.split("=")[-1] in GROUPS:
            return seg.split("=")[-1]
        if seg.startswith("hour="):
            return GROUPS[(int(seg[5:]) - 16) % 3]
    raise AssertionError(f"{key}: no group folder")


def ids_in(body: bytes, key: str) -> list[int]:
    """The ``id`` of each record of an object (the envelope's value), by json or pyarrow."""
    if key.endswith(".parquet"):
        vals = pq.read_table(io.BytesIO(body)).column("value").to_pylist()
        return [int((json.loads(v) if isinstance(v, bytes | str) else v)["id"]) for v in vals]
    docs = [json.loads(line) for line in body.decode().splitlines() if line]
    return [
        int(d["value"]["id"] if isinstance(d["value"], dict) else json.loads(d["value"])["id"])
        for d in docs
    ]


def data_keys(s3: Any, bucket: str) -> set[str]:
    keys: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="arch/"):
        keys |= {i["Key"] for i in page.get("Contents", []) if "/.kafka-archive/" not in i["Key"]}
    return keys


def assert_exactly_once(s3: Any, bucket: str, produced: int) -> CommitLog:
    """Every produced record in exactly one object the log names, inside its [first, last],
    in its group's folder; every partition committed to its end; every rewrite untiled."""
    log = read_log(s3, bucket)
    for rw in (rw for e in log.entries for rw in e.get("rewrites", [])):
        assert rw.get("tiled") is False and not rw["removed"], rw
        assert len({group_of(o["key"]) for o in rw["replaced"] + rw["objects"]}) == 1, rw
    seen: list[int] = []
    for (_, p), objs in log.objects.items():
        firsts = [o["first"] for o in objs]
        assert firsts == sorted(firsts), "a partition's objects in first-offset order"
        for o in objs:
            ids = ids_in(s3.get_object(Bucket=bucket, Key=o["key"])["Body"].read(), o["key"])
            assert len(ids) == o["records"] and ids, o
            assert [i // P for i in ids] == sorted(i // P for i in ids), o
            for i in ids:
                assert i % P == p and o["first"] <= i // P <= o["last"], (o, i)
                assert group_of(o["key"]) == GROUPS[i % 3], (o["key"], i)
            seen += ids
    assert sorted(seen) == list(range(produced)), "every record exactly once"
    assert {tp[1]: end for tp, end in log.ends.items()} == {
        p: len(range(p, produced, P)) for p in range(P)
    }
    return log


def compact_args(kcql: str, endpoint: str, *extra: str) -> list[str]:
    return ["compact", "--kcql", kcql, "--endpoint-url", endpoint, *extra]


def check_our_readers(
    capsys: pytest.CaptureFixture[str], kcql: str, bkt: str, name: str, broker: str, s3: str, n: int
) -> None:
    """``verify`` exits 0; ``cat`` of each partition returns every record in offset order."""
    code, out, err = cli(capsys, *run_args(kcql, broker, s3, command="verify"))
    assert code == 0, out + err
    for p in range(P):
        code, out, err = cli(
            capsys, "cat", "--from", f"{bkt}:arch", "--topic", name, "--partition", str(p),
            "--offset", "0", "--count", "1000", "--endpoint-url", s3, "--kcql", kcql,
        )  # fmt: skip
        assert code == 0 and "Traceback" not in err, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert [line["offset"] for line in lines] == list(range(len(range(p, n, P))))
        values = [v if isinstance(v := line["value"], dict) else json.loads(v) for line in lines]
        assert [int(v["id"]) for v in values] == list(range(p, n, P))


def vacuum_past_the_grace(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    time.sleep(2.5)
    monkeypatch.setenv("KAFKA_ARCHIVE_LOG_VACUUM_GRACE_SECONDS", "1")
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    monkeypatch.delenv("KAFKA_ARCHIVE_LOG_VACUUM_GRACE_SECONDS")


@pytest.mark.parametrize("layout", ["partitionby", "hour"])
def test_compact_merges_each_groups_objects_into_its_folder_and_every_reader_agrees(
    layout: str,
    log_mode: None,
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
    name, bkt = topic(partitions=P), bucket()
    kcql = by_header(bkt, name, "PARQUET") if layout == "partitionby" else by_hour(bkt, name)
    produce(name, records(0, 90))
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    before = assert_exactly_once(s3_client, bkt, 90)
    small = sum(len(v) for v in before.objects.values())
    assert small >= 20, f"many small objects ({small})"

    code, out, err = cli(capsys, *compact_args(kcql, s3_endpoint))
    assert code == 0, err
    after = assert_exactly_once(s3_client, bkt, 90)
    assert after.kinds == ["claim", "commit", "claim", "rewrite"], "one rewrite entry"
    # One object per group and partition, in its group's folder, a generation up.
    assert {tp[1]: len(v) for tp, v in after.objects.items()} == {p: 3 for p in range(P)}
    assert all(".g1" in o["key"] for v in after.objects.values() for o in v)
    assert f"{small} object(s)" in out and f"-> {P * 3} object(s)" in out, out
    check_our_readers(capsys, kcql, bkt, name, broker, s3_endpoint, 90)

    # A second compact has nothing to do.
    code, out, err = cli(capsys, *compact_args(kcql, s3_endpoint))
    assert code == 0 and "nothing to compact" in out, out + err

    # A later run archives only the new records.
    produce(name, records(90, 30))
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert_exactly_once(s3_client, bkt, 120)

    # Vacuum past the grace takes the replaced objects: a listing reader then reads each
    # record once (pyarrow.dataset over the PARQUET prefix, as users point it).
    vacuum_past_the_grace(monkeypatch, capsys, run_args(kcql, broker, s3_endpoint))
    folded = assert_exactly_once(s3_client, bkt, 120)
    assert data_keys(s3_client, bkt) == folded.named()
    check_our_readers(capsys, kcql, bkt, name, broker, s3_endpoint, 120)
    if layout == "partitionby":
        fs = pyarrow.fs.S3FileSystem(
            endpoint_override=s3_endpoint, scheme="http", region="us-east-1"
        )
        table = ds.dataset(f"{bkt}/arch/", filesystem=fs, format="parquet").to_table()
        vals = table.column("value").to_pylist()
        got = [int((json.loads(v) if isinstance(v, bytes | str) else v)["id"]) for v in vals]
        assert sorted(got) == list(range(120))


# Where the kill lands among the compact's data PUTs (6 new objects: 3 groups x 2
# partitions); drawn once, seeded, so a failure replays.
KILL_AT = sorted(random.Random(38).sample(range(1, 7), 2))


@pytest.mark.parametrize("nth", KILL_AT)
def test_compact_of_partitionby_sigkilled_at_a_put_then_rerun_is_exactly_once(
    nth: int,
    log_mode: None,
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
    name, bkt = topic(partitions=P), bucket()
    kcql = by_header(bkt, name, "JSON")
    produce(name, records(0, 72))
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    small = sum(len(v) for v in assert_exactly_once(s3_client, bkt, 72).objects.values())
    trigger = Trigger(signal.SIGKILL, nth)
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.drop_response = trigger.on_request
        with log_mode_process(compact_args(kcql, proxy.url)) as process:
            trigger.process = process
            process.wait(timeout=300)
    assert trigger.fired.is_set(), "compact ended before its nth PUT"
    assert read_log(s3_client, bkt).kinds == ["claim", "commit", "claim"], "killed before its entry"
    assert_exactly_once(s3_client, bkt, 72)

    code, _, err = cli(capsys, *compact_args(kcql, s3_endpoint))
    assert code == 0, err
    folded = assert_exactly_once(s3_client, bkt, 72)
    assert folded.kinds == ["claim", "commit", "claim", "claim", "rewrite"]
    assert sum(len(v) for v in folded.objects.values()) == P * 3 < small
    check_our_readers(capsys, kcql, bkt, name, broker, s3_endpoint, 72)

    vacuum_past_the_grace(monkeypatch, capsys, run_args(kcql, broker, s3_endpoint))
    folded = assert_exactly_once(s3_client, bkt, 72)
    assert data_keys(s3_client, bkt) == folded.named()


def test_erase_of_a_partitionby_route_is_refused_exit_2_nothing_written(
    s3_endpoint: str,
    s3_client: Any,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    bkt = bucket()
    kcql = by_header(bkt, "t", "JSON")
    code, _, err = cli(capsys, "erase", "--kcql", kcql, "--endpoint-url", s3_endpoint, "--key", "x")
    assert code == 2 and "PARTITIONBY" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) <= 2, err
    assert data_keys(s3_client, bkt) == set()

"""`run` with commit_protocol=log over PARTITIONBY routes (issue 37): several objects of a
partition open at once hold interleaved offsets, and a commit names them with ``tiled``
false. Real broker, real S3 endpoint, real Spark.

Every check reads the archive independently: the log's entries listed with boto3 and folded
from their JSON by ``commit_log_reader.read_log`` (never our log codec), the named objects read
with json or pyarrow (never our decoder). Record ``i`` of a topic of ``P`` partitions is at
offset ``i // P`` of partition ``i % P``, and its group is ``i % 3``, so where each record
belongs is known from its id.
"""

from __future__ import annotations

import io
import json
import signal
import time
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq
import pytest
from archive_helpers import cli, run_args
from commit_log_reader import read_log
from faultproxy import FaultProxy
from put_trigger import Trigger, log_mode_run

pytestmark = pytest.mark.integration

P = 2
GROUPS = ("g0", "g1", "g2")


@pytest.fixture
def log_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")


def value(i: int) -> dict[str, Any]:
    return {"id": i, "k": GROUPS[i % 3]}


def headers(i: int) -> list[tuple[str, bytes]]:
    return [("h", GROUPS[i % 3].encode())]


def kcql_of(bkt: str, name: str, fmt: str, field: str, flush: int) -> str:
    return (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} PARTITIONBY {field} STOREAS `{fmt}` "
        f"WITH_FLUSH_COUNT = {flush} PROPERTIES('store.envelope'=true)"
    )


def ids_in(s3: Any, bucket: str, key: str) -> list[int]:
    """The ``id`` of each record of an object (the envelope's value), by json or pyarrow."""
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    if key.endswith(".parquet"):
        table = pq.read_table(io.BytesIO(body))
        vals = table.column("value").to_pylist()
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


def assert_exactly_once(s3: Any, bucket: str, produced: int) -> list[str]:
    """Every produced record in exactly one named object, inside the object's [first, last],
    in the folder of its group; every partition committed to its end; objects of several
    groups interleave; nothing under the route the log does not name. The entry kinds."""
    log = read_log(s3, bucket)
    kinds, objects = log.kinds, {tp[1]: objs for tp, objs in log.objects.items()}
    assert all(c.get("tiled") is False for e in log.entries for c in e["commits"]), (
        "PARTITIONBY objects are named as interleaved"
    )
    ends = {tp[1]: end for tp, end in log.ends.items()}
    seen: list[int] = []
    overlap = False
    for p, objs in objects.items():
        for o in objs:
            ids = ids_in(s3, bucket, o["key"])
            assert len(ids) == o["records"]
            groups = {GROUPS[i % 3] for i in ids}
            folders = [seg.split("=")[-1] for seg in o["key"].split("/")[1:-1]]
            assert len(groups) == 1 and folders == [groups.pop()], (o["key"], ids)
            for i in ids:
                assert i % P == p and o["first"] <= i // P <= o["last"], (o, i)
            seen += ids
            overlap |= any(q is not o and q["first"] <= o["first"] <= q["last"] for q in objs)
    assert sorted(seen) == list(range(produced)), "every record exactly once"
    assert ends == {p: len(range(p, produced, P)) for p in range(P)}
    assert overlap, "objects of several groups interleave"
    named = {o["key"] for objs in objects.values() for o in objs}
    assert data_keys(s3, bucket) == named, "no object the log does not name"
    return kinds


def cat_ids(
    capsys: pytest.CaptureFixture[str],
    kcql: str,
    bkt: str,
    name: str,
    endpoint: str,
    p: int,
    at: int,
) -> list[int]:
    code, out, err = cli(
        capsys, "cat", "--from", f"{bkt}:arch", "--topic", name, "--partition", str(p),
        "--offset", str(at), "--count", "1000", "--endpoint-url", endpoint, "--kcql", kcql,
    )  # fmt: skip
    assert code == 0 and "Traceback" not in err, err
    out_ids = []
    for line in out.splitlines():
        v = json.loads(line)["value"]  # cat prints the value as text
        out_ids.append(int((v if isinstance(v, dict) else json.loads(v))["id"]))
    return out_ids


def check_readers(
    capsys: pytest.CaptureFixture[str],
    kcql: str,
    bkt: str,
    name: str,
    endpoint: str,
    produced: int,
    broker: str,
) -> None:
    for p in range(P):
        at = 5  # inside the archive: the objects holding it interleave with others
        want = [i for i in range(produced) if i % P == p and i // P >= at]
        assert cat_ids(capsys, kcql, bkt, name, endpoint, p, at) == want
    code, out, err = cli(capsys, "verify", *run_args(kcql, broker, endpoint, command=None))
    assert code == 0, out + err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("fmt", "field"),
    [("JSON", "k"), ("PARQUET", "_header.h"), ("JSON", "_header.h"), ("PARQUET", "k")],
)
def test_log_mode_partitionby_runs_twice_over_a_growing_topic_exactly_once(
    fmt: str,
    field: str,
    log_mode: None,
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
    kcql = kcql_of(bkt, name, fmt, field, 5)
    produce(name, 60, partitions=P, value=value, headers=headers)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert assert_exactly_once(s3_client, bkt, 60) == ["claim", "commit"]

    produce(name, 46, first=60, partitions=P, value=value, headers=headers)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert assert_exactly_once(s3_client, bkt, 106) == ["claim", "commit", "claim", "commit"]
    check_readers(capsys, kcql, bkt, name, s3_endpoint, 106, broker)


def test_log_mode_partitionby_sigkill_mid_job_then_a_rerun_is_exactly_once(
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
    produce(name, 300, partitions=P, value=value, headers=headers)
    killer = Trigger(signal.SIGKILL, nth=6)
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.drop_response = killer.on_request
        with log_mode_run(kcql_of(bkt, name, "JSON", "k", 10), broker, proxy.url) as process:
            killer.process = process
            process.wait(timeout=600)
    assert killer.fired.is_set(), "the run ended before its 6th object"
    assert read_log(s3_client, bkt).kinds == ["claim"], "nothing committed"
    leftovers = data_keys(s3_client, bkt)
    assert len(leftovers) >= 5

    time.sleep(2)  # the rerun's vacuum takes the leftovers past a grace of 1 s
    monkeypatch.setenv("KAFKA_ARCHIVE_LOG_VACUUM_GRACE_SECONDS", "1")
    kcql = kcql_of(bkt, name, "JSON", "k", 13)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert assert_exactly_once(s3_client, bkt, 300) == ["claim", "claim", "commit"]
    check_readers(capsys, kcql, bkt, name, s3_endpoint, 300, broker)

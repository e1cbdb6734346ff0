"""`kafka-archive compact` on commit-log archives (issue 38): real broker, moto's S3 server,
real Spark for the runs and `verify`.

Every check reads the archive independently: the log's entries listed with boto3 and folded
from their JSON by ``commit_log_reader.read_log`` (claims, commits, rewrites; never our log
codec), the objects they name read with json or pyarrow (never our decoder). Record ``i`` of a
topic of ``P`` partitions is at offset ``i // P`` of partition ``i % P``.
"""

from __future__ import annotations

import io
import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq
import pytest
from archive_helpers import cli, run_args, wait_presence_expired
from commit_log_reader import CommitLog, read_log
from faultproxy import FaultProxy
from put_trigger import Trigger, log_mode_process

pytestmark = pytest.mark.integration

P = 3


@pytest.fixture
def log_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")


def ids_in(body: bytes, fmt: str) -> list[int]:
    if fmt == "PARQUET":
        return [int(i) for i in pq.read_table(io.BytesIO(body)).column("id").to_pylist()]
    return [json.loads(line)["id"] for line in body.decode().splitlines()]


def data_keys(s3: Any, bucket: str) -> dict[str, str]:
    keys: dict[str, str] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="arch/"):
        keys |= {
            i["Key"]: i["ETag"]
            for i in page.get("Contents", [])
            if "/.kafka-archive/" not in i["Key"]
        }
    return keys


def everything(s3: Any, bucket: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        found.update({i["Key"]: i["ETag"] for i in page.get("Contents", [])})
    return found


def assert_exactly_once(s3: Any, bucket: str, topic: str, produced: int, fmt: str) -> CommitLog:
    """Every produced record in exactly one object the log names, inside its range; a
    compact removes nothing, and its new objects tile the span they replace, each full."""
    folded = read_log(s3, bucket)
    for rw in (rw for e in folded.entries for rw in e.get("rewrites", [])):
        at = rw["replaced"][0]["first"]
        for o in rw["objects"]:
            assert o["first"] == at and o["records"] == o["last"] - o["first"] + 1
            at = o["last"] + 1
        assert at == rw["replaced"][-1]["last"] + 1 and not rw["removed"]
    seen: list[int] = []
    for (t, partition), objects in folded.objects.items():
        assert t == topic
        for o in objects:
            ids = ids_in(s3.get_object(Bucket=bucket, Key=o["key"])["Body"].read(), fmt)
            assert len(ids) == o["records"]
            for i in ids:
                assert i % P == partition and o["first"] <= i // P <= o["last"], (o, i)
            seen += ids
    assert sorted(seen) == list(range(produced)), "every record exactly once"
    assert folded.ends == {(topic, p): len(range(p, produced, P)) for p in range(P)}
    return folded


def compact_args(kcql: str, endpoint: str, *extra: str) -> list[str]:
    return ["compact", "--kcql", kcql, "--endpoint-url", endpoint, *extra]


def vacuum_past_the_grace(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """A run after the grace (1 s, by the store's clock): its vacuum removes what no entry
    names, the replaced objects included (their rewrite entry is older than the grace)."""
    time.sleep(2.5)
    monkeypatch.setenv("KAFKA_ARCHIVE_LOG_VACUUM_GRACE_SECONDS", "1")
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    monkeypatch.delenv("KAFKA_ARCHIVE_LOG_VACUUM_GRACE_SECONDS")


@pytest.mark.parametrize("fmt", ["JSON", "PARQUET"])
def test_compact_merges_small_objects_and_every_reader_and_a_later_run_agree(
    fmt: str,
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
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `{fmt}` WITH_FLUSH_COUNT = 4"
    produce(name, 90, partitions=P)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    before = assert_exactly_once(s3_client, bkt, name, 90, fmt)
    assert sum(len(v) for v in before.objects.values()) == P * 8  # 30 records each, 4 an object

    code, out, err = cli(capsys, *compact_args(kcql, s3_endpoint))
    assert code == 0, err
    after = assert_exactly_once(s3_client, bkt, name, 90, fmt)
    assert after.kinds == ["claim", "commit", "claim", "rewrite"], "one rewrite entry"
    assert {tp: len(v) for tp, v in after.objects.items()} == {(name, p): 1 for p in range(P)}
    assert all(".g1." in o["key"] for v in after.objects.values() for o in v)
    assert f"{P * 8} object(s)" in out and f"-> {P} object(s)" in out
    assert "S3:" in out and "PUT" in out and "GET" in out, out

    # Our readers take the objects from the log: verify is clean, cat reads them back.
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, err
    for p in range(P):
        code, out, err = cli(
            capsys,
            *["cat", "--from", f"{bkt}:arch", "--topic", name, "--partition", str(p)],
            *["--offset", "0", "--count", "100", "--endpoint-url", s3_endpoint],
        )
        assert code == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert [line["offset"] for line in lines] == list(range(30))
        assert [int(line["value"]["id"]) for line in lines] == list(range(p, 90, P))

    # A second compact has nothing to do and writes nothing.
    listed = everything(s3_client, bkt)
    code, out, err = cli(capsys, *compact_args(kcql, s3_endpoint))
    assert code == 0, err
    assert "nothing to compact" in out
    assert everything(s3_client, bkt) == listed

    # A later run archives only the new records, after the compacted ones.
    produce(name, 30, first=90, partitions=P)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert_exactly_once(s3_client, bkt, name, 120, fmt)

    # Vacuum past the grace: the replaced objects go, only what the log names is left.
    vacuum_past_the_grace(monkeypatch, capsys, run_args(kcql, broker, s3_endpoint))
    folded = assert_exactly_once(s3_client, bkt, name, 120, fmt)
    assert set(data_keys(s3_client, bkt)) == folded.named()


def test_compact_of_a_target_of_states_exits_2_and_writes_nothing(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 3"
    produce(name, 12, partitions=1)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))  # states (the default)
    assert code == 0, err
    listed = everything(s3_client, bkt)
    code, _out, err = cli(capsys, *compact_args(kcql, s3_endpoint))
    assert code == 2
    assert "commit_protocol=log" in err and len(err.strip().splitlines()) <= 2, err
    assert "Traceback" not in err
    assert everything(s3_client, bkt) == listed, "nothing written"

    # An empty target: the same, one line.
    code, _, err = cli(capsys, *compact_args(kcql.replace(bkt, bucket()), s3_endpoint))
    assert code == 2 and "Traceback" not in err, err


@pytest.mark.parametrize(
    ("tail", "why"),
    [
        # Archived in log mode since issue 37, but a rewrite entry does not name the new
        # objects' block indexes yet.
        (
            "PROPERTIES('store.compression'='gzip', 'store.gzip.block.bytes'=4096)",
            "gzip block",
        ),
    ],
)
def test_compact_refuses_what_log_mode_refuses(
    tail: str,
    why: str,
    s3_endpoint: str,
    s3_client: Any,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    bkt = bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM t {tail}"
    code, _, err = cli(capsys, *compact_args(kcql, s3_endpoint))
    assert code == 2 and why in err and "Traceback" not in err, err
    assert everything(s3_client, bkt) == {}, "nothing written"


@pytest.mark.parametrize("nth", [1, 3, 5])
def test_compact_sigkilled_at_its_nth_put_then_rerun_is_exactly_once(
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
    """Killed while creating its new objects (the nth data PUT of about 6: each partition's
    8 objects merge into 2 at a target size of 4 objects), then run again."""
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 3"
    produce(name, 72, partitions=P)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    sizes = [o["size"] for v in read_log(s3_client, bkt).objects.values() for o in v]
    target = str(sum(sorted(sizes)[-4:]))  # about 4 objects a new one: 2 new a partition
    trigger = Trigger(signal.SIGKILL, nth)
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.drop_response = trigger.on_request
        with log_mode_process(compact_args(kcql, proxy.url, "--target-size", target)) as process:
            trigger.process = process
            process.wait(timeout=300)
    assert trigger.fired.is_set(), "compact ended before its nth PUT"
    assert read_log(s3_client, bkt).kinds == ["claim", "commit", "claim"], "killed before its entry"
    assert_exactly_once(s3_client, bkt, name, 72, "JSON")

    code, _out, err = cli(capsys, *compact_args(kcql, s3_endpoint, "--target-size", target))
    assert code == 0, err
    folded = assert_exactly_once(s3_client, bkt, name, 72, "JSON")
    assert folded.kinds == ["claim", "commit", "claim", "claim", "rewrite"]
    assert sum(len(v) for v in folded.objects.values()) < len(sizes)

    vacuum_past_the_grace(monkeypatch, capsys, run_args(kcql, broker, s3_endpoint))
    folded = assert_exactly_once(s3_client, bkt, name, 72, "JSON")
    assert set(data_keys(s3_client, bkt)) == folded.named()
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, err


def test_a_run_that_claims_meanwhile_fences_compact_exit_18_nothing_swapped(
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
    """compact held at its first new object while a log-mode run of the same target claims
    the partitions: compact stops with exit 18, the log has no rewrite, the run's archive
    is whole."""
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 3"
    produce(name, 36, partitions=P)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.hold = lambda method, path, _: method == "PUT" and "/.kafka-archive/" not in path
        # (A short ttl: compact's presence expires once it is frozen.)
        ttl = {"KAFKA_ARCHIVE_LOCK_TTL_SECONDS": "6"}
        with log_mode_process(compact_args(kcql, proxy.url), **ttl) as process:
            assert proxy.held.wait(120), "compact never created an object"
            produce(name, 9, first=36, partitions=P)
            # Live, compact keeps the run out (its presence); frozen past its ttl, it is
            # taken over, and the run's claim fences it.
            code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
            assert code == 8 and "compact is writing" in err, err
            os.killpg(process.pid, signal.SIGSTOP)
            wait_presence_expired(s3_client, bkt)
            code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
            assert code == 0, err
            proxy.release.set()
            os.killpg(process.pid, signal.SIGCONT)
            assert process.wait(timeout=120) == 18
            assert process.stderr is not None
            lines = process.stderr.read().decode().strip().splitlines()
    assert "newer run claimed" in lines[-1] and not any("Traceback" in x for x in lines)
    folded = assert_exactly_once(s3_client, bkt, name, 45, "JSON")
    assert folded.kinds == ["claim", "commit", "claim", "claim", "commit"]

"""An archive of the state protocol migrated to the commit log (issue 37): real runs, then
``migrate``, then the states deleted. ``status``, ``verify``, ``cat`` and ``restore`` answer
as before; the log read by hand (boto3 + json) names the same records the states archive
held (objects read with json / pyarrow); an object the log does not name is no data; a named
object deleted is a hole; migrating again creates nothing; a claim left without its import
is finished by the next call; today's state-protocol run refuses the migrated target."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq
import pytest
from archive_helpers import cli, kafka_records, run_args
from commit_log_reader import read_log
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import FormatVersionError, JobLockedError
from kafka_archive.archiver.plan.checks import compile_plan
from kafka_archive.archiver.read.migrate import migrate
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.store.s3 import S3Store

pytestmark = pytest.mark.integration

FLUSH = 20


def _keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def _ids(s3: Any, bucket: str, key: str) -> list[int]:
    """The ``id`` of each record of an archived object, read with json or pyarrow."""
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    if key.endswith(".parquet"):
        table = pq.read_table(io.BytesIO(body))
        if "id" in table.column_names:
            return [int(v) for v in table.column("id").to_pylist()]
        values = table.column("value").to_pylist()  # the envelope's value: JSON bytes
        return [int((json.loads(v) if isinstance(v, bytes | str) else v)["id"]) for v in values]
    docs = [json.loads(line) for line in body.decode().splitlines() if line]
    return [int(d["value"]["id"] if isinstance(d.get("value"), dict) else d["id"]) for d in docs]


def _status(capsys: pytest.CaptureFixture[str], conn: list[str]) -> list[dict[str, Any]]:
    code, out, err = cli(capsys, "status", *conn, "--output", "json")
    assert code == 0, err
    rows = json.loads(out)["partitions"]
    for row in rows:  # commit times differ: the migration's import is a commit of its own
        row.pop("last_commit")
    return rows


def _verify(capsys: pytest.CaptureFixture[str], conn: list[str]) -> tuple[int, dict[str, Any]]:
    code, out, err = cli(capsys, "verify", *conn, "--output", "json")
    assert "Traceback" not in err, err
    report = json.loads(out)
    for p in report["partitions"]:
        p.pop("s3_requests", None)
        p.pop("notes", None)
    report.pop("seconds", None)
    report.pop("s3_requests", None)
    report.pop("s3_cost_usd", None)
    return code, report


def _cat(
    capsys: pytest.CaptureFixture[str], location: str, name: str, endpoint: str, p: int, at: int
) -> tuple[int, list[str]]:
    code, out, err = cli(
        capsys,
        "cat",
        "--from",
        location,
        "--topic",
        name,
        "--partition",
        str(p),
        "--offset",
        str(at),
        "--count",
        "1000",
        "--endpoint-url",
        endpoint,
        *_kcql_of(location),
    )
    assert "Traceback" not in err, err
    return code, out.splitlines()


_KCQL: dict[str, list[str]] = {}


def _kcql_of(location: str) -> list[str]:
    return _KCQL.get(location, [])


def _restore(
    capsys: pytest.CaptureFixture[str],
    broker: str,
    endpoint: str,
    location: str,
    name: str,
    to: str,
) -> None:
    code, _, err = cli(
        capsys,
        "restore",
        "--from",
        location,
        "--topic",
        name,
        "--to-topic",
        to,
        "--bootstrap-servers",
        broker,
        "--endpoint-url",
        endpoint,
        "--values-only",
        *_kcql_of(location),
    )
    assert code == 0, err


def _restored_ids(broker: str, to: str, partitions: int) -> dict[int, list[bytes | None]]:
    out: dict[int, list[bytes | None]] = {}
    for r in kafka_records(broker, to, partitions):
        out.setdefault(r.partition, []).append(r.value)
    return out


@pytest.mark.parametrize("shape", ["json_gap", "parquet_partitionby"])
def test_a_migrated_archive_reads_as_its_states_did(
    shape: str,
    broker: str,
    admin: AdminClient,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=2), bucket()
    value = lambda i: {"id": i, "c": "DE" if i % 3 else "FR"}  # noqa: E731
    if shape == "json_gap":
        kcql = (
            f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = {FLUSH}"
        )
    else:
        kcql = (
            f"INSERT INTO {bkt}:arch SELECT * FROM {name} PARTITIONBY c STOREAS `PARQUET` "
            f"WITH_FLUSH_COUNT = {FLUSH} PROPERTIES('store.envelope'=true)"
        )
    location = f"{bkt}:arch"
    if shape == "parquet_partitionby":
        _KCQL[location] = ["--kcql", kcql]
    conn = run_args(kcql, broker, s3_endpoint, command=None)
    produce(name, 100, partitions=2, value=value)  # offsets 0..49 of each partition
    code, _, err = cli(capsys, "run", *conn)
    assert code == 0, err
    produce(name, 60, first=100, partitions=2, value=value)  # 50..79
    if shape == "json_gap":  # Kafka deletes 50..64 of partition 0 before they are archived
        for f in admin.delete_records([KafkaTopicPartition(name, 0, 65)]).values():
            f.result(timeout=30)
        code, out, err = cli(capsys, "run", *conn)
        assert code == 16, out + err
        code, _, err = cli(capsys, "run", *conn, "--allow-gaps")
    else:
        code, _, err = cli(capsys, "run", *conn)
    assert code == 0, err
    produce(name, 40, first=160, partitions=2, value=value)  # 80..99: a third run's objects
    code, _, err = cli(capsys, "run", *conn)
    assert code == 0, err

    # -- before: the states archive ------------------------------------------------------
    status_before = _status(capsys, conn)
    verify_before = _verify(capsys, conn)
    assert verify_before[0] == 0, verify_before
    cat_before = {p: _cat(capsys, location, name, s3_endpoint, p, 25) for p in (0, 1)}
    to = topic(partitions=2)
    _restore(capsys, broker, s3_endpoint, location, name, to)
    restored_before = _restored_ids(broker, to, 2)
    data = [k for k in _keys(s3_client, bkt, "arch/") if "/.kafka-archive/" not in k]
    ids_before = sorted(i for k in data for i in _ids(s3_client, bkt, k))

    # -- the migration, then the states deleted -------------------------------------------
    store = S3Store(S3Settings(endpoint_url=s3_endpoint, region="us-east-1"))
    plan = compile_plan(kcql)
    done = migrate(store, plan.routes[0].target, plan.routes, run_id="migration-1", job="")
    assert done.partitions == 2, done
    assert any(k.endswith("lock.json") for k in done.created), done
    assert sum(".kafka-archive/log/" in k for k in done.created) == 2, done  # claim + import
    for key in _keys(s3_client, bkt, "arch/.kafka-archive/state/"):
        s3_client.delete_object(Bucket=bkt, Key=key)
    assert migrate(store, plan.routes[0].target, plan.routes, run_id="m2", job="").created == ()

    # -- after: the same answers ------------------------------------------------------------
    assert _status(capsys, conn) == status_before
    assert _verify(capsys, conn) == verify_before
    assert {p: _cat(capsys, location, name, s3_endpoint, p, 25) for p in (0, 1)} == cat_before
    to = topic(partitions=2)
    _restore(capsys, broker, s3_endpoint, location, name, to)
    assert _restored_ids(broker, to, 2) == restored_before

    # -- the log by hand equals the states archive ------------------------------------------
    logged = read_log(s3_client, bkt, "arch")
    assert logged.ends == {(name, 0): 100, (name, 1): 100}
    named_ids = sorted(
        i for objs in logged.objects.values() for o in objs for i in _ids(s3_client, bkt, o["key"])
    )
    assert named_ids == ids_before
    assert logged.gaps[(name, 0)] == ([(50, 64)] if shape == "json_gap" else [])
    # Every record produced (id i at offset i // 2 of partition i % 2), but the gap's.
    lost = range(100, 130, 2) if shape == "json_gap" else range(0)
    assert named_ids == [i for i in range(200) if i not in lost]

    # -- an object the log does not name: not data -----------------------------------------
    named = [o["key"] for o in logged.objects[(name, 1)]]
    stray = named[0].replace(f"{0:012d}", f"{1:012d}")
    assert stray != named[0] and stray not in data
    s3_client.copy_object(Bucket=bkt, Key=stray, CopySource={"Bucket": bkt, "Key": named[0]})
    assert _cat(capsys, location, name, s3_endpoint, 1, 25) == cat_before[1]
    to = topic(partitions=2)
    _restore(capsys, broker, s3_endpoint, location, name, to)
    assert _restored_ids(broker, to, 2) == restored_before
    code, out, err = cli(capsys, "verify", *conn, "--output", "json")
    assert code == 0, out + err
    (p1,) = [p for p in json.loads(out)["partitions"] if p["partition"] == 1]
    assert any(stray in n and "uncommitted leftover" in n for n in p1["notes"]), p1

    # -- a named object deleted: a hole, with its offsets -----------------------------------
    s3_client.delete_object(Bucket=bkt, Key=named[-1])
    code, out, _ = cli(capsys, "verify", *conn, "--output", "json")
    assert code == 1, out
    (p1,) = [p for p in json.loads(out)["partitions"] if p["partition"] == 1]
    holes = [d for d in p1["discrepancies"] if "the commit log names" in d["problem"]]
    assert [(d["first_offset"], d["last_offset"]) for d in holes] and holes[0][
        "first_offset"
    ] is not None, p1


def test_a_claim_without_its_import_is_finished_and_the_state_protocol_refuses(
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
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = {FLUSH}"
    conn = run_args(kcql, broker, s3_endpoint, command=None)
    produce(name, 50, partitions=1)
    code, _, err = cli(capsys, "run", *conn)
    assert code == 0, err
    # A migration that crashed after its claim: entry 1 is a claim, no import follows.
    claim = {
        "version": 1,
        "seq": 1,
        "kind": "claim",
        "writer": {"run_id": "crashed", "epoch": 1},
        "claims": [{"route": name, "topic": name, "partition": 0}],
        "commits": [],
    }
    s3_client.put_object(
        Bucket=bkt,
        Key="arch/.kafka-archive/log/00000000000000000001.json",
        Body=json.dumps(claim).encode(),
    )
    status_before = _status(capsys, conn)  # the log commits nothing yet: read from states
    assert [r["archived_offset"] for r in status_before] == [50]

    store = S3Store(S3Settings(endpoint_url=s3_endpoint, region="us-east-1"))
    plan = compile_plan(kcql)
    done = migrate(store, plan.routes[0].target, plan.routes, run_id="m", job="")
    assert [k.rsplit("/", 1)[1] for k in done.created if "/log/" in k] == [
        "00000000000000000002.json",
        "00000000000000000003.json",
    ]
    entries = [
        json.loads(s3_client.get_object(Bucket=bkt, Key=k)["Body"].read())
        for k in sorted(_keys(s3_client, bkt, "arch/.kafka-archive/log/"))
    ]
    assert [e["kind"] for e in entries] == ["claim", "claim", "import"]
    assert entries[1]["writer"]["epoch"] == 2 and entries[2]["writer"] == entries[1]["writer"]
    assert entries[2]["imports"][0]["end"] == 50
    for key in _keys(s3_client, bkt, "arch/.kafka-archive/state/"):
        s3_client.delete_object(Bucket=bkt, Key=key)
    assert _status(capsys, conn) == status_before
    assert migrate(store, plan.routes[0].target, plan.routes, run_id="m3", job="").created == ()

    # A commit after the import (as a log-mode run makes it, here by hand): readers follow.
    body = b"".join(json.dumps({"id": i}).encode() + b"\n" for i in range(50, 60))
    key = f"arch/{name}/0/{50:012d}.json"
    s3_client.put_object(Bucket=bkt, Key=key, Body=body)
    commit = {
        "version": 1,
        "seq": 4,
        "kind": "commit",
        "writer": entries[1]["writer"],
        "claims": [],
        "commits": [
            {
                "route": name,
                "topic": name,
                "partition": 0,
                "start": 50,
                "end": 60,
                "objects": [
                    {
                        "key": key,
                        "first": 50,
                        "last": 59,
                        "records": 10,
                        "size": len(body),
                        "checksum": "c",
                    }
                ],
            }
        ],
    }
    s3_client.put_object(
        Bucket=bkt,
        Key="arch/.kafka-archive/log/00000000000000000004.json",
        Body=json.dumps(commit).encode(),
    )
    assert [r["archived_offset"] for r in _status(capsys, conn)] == [60]
    code, lines = _cat(capsys, f"{bkt}:arch", name, s3_endpoint, 0, 48)
    assert code == 0 and [json.loads(line)["value"]["id"] for line in lines] == list(range(48, 60))

    # Today's (state-protocol) run refuses the migrated target: one line, exit 24.
    produce(name, 10, first=50, partitions=1)
    code, out, err = cli(capsys, "run", *conn)
    assert code == 24, out + err
    assert "Traceback" not in err and "lock.json" in err and "format version 2" in err, err
    assert len(_keys(s3_client, bkt, "arch/.kafka-archive/log/")) == 4


def test_the_marker_waits_for_a_live_state_lease_and_then_fences_state_writers(
    s3_endpoint: str, s3_client: Any, bucket: Callable[..., str]
) -> None:
    """A state run holding the target's lease keeps the migration out (exit 8, nothing
    written); once it released, the marker takes the lock's place (its epoch above the
    lease's), and a state run's lease is then refused (exit 24)."""
    bkt = bucket()
    store = S3Store(S3Settings(endpoint_url=s3_endpoint, region="us-east-1"))
    plan = compile_plan(f"INSERT INTO {bkt}:arch SELECT * FROM t")
    target = plan.routes[0].target
    lock = JobLock(store, target, "job", "state-run", 60)
    lock.acquire()
    try:
        with pytest.raises(JobLockedError, match="cannot be migrated") as held:
            migrate(store, target, plan.routes, run_id="m", job="job")
        assert held.value.exit_code == 8
        assert _keys(s3_client, bkt, "arch/.kafka-archive/log/") == []
    finally:
        lock.release()
    done = migrate(store, target, plan.routes, run_id="m", job="job")
    assert done.created == ("arch/.kafka-archive/lock.json",)  # no states: nothing to import
    marker = json.loads(
        s3_client.get_object(Bucket=bkt, Key="arch/.kafka-archive/lock.json")["Body"].read()
    )
    assert marker["version"] == 2 and marker["migrated"] is True
    assert marker["epoch"] > lock.epoch
    with pytest.raises(FormatVersionError, match="format version 2") as refused:
        JobLock(store, target, "job", "late-state-run", 60).acquire()
    assert refused.value.exit_code == 24
    assert migrate(store, target, plan.routes, run_id="m2", job="job").created == ()

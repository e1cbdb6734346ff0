"""`kafka-archive verify` against a real archive: clean passes, damage is found and named."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from archive_helpers import cli, run_args

pytestmark = pytest.mark.integration


@pytest.fixture
def archived(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> tuple[str, str, tuple[str, ...]]:
    """A topic of 600 records over 2 partitions archived in objects of 100 records."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 600, partitions=2)
    conn = run_args(
        f"INSERT INTO {bkt}:archive SELECT * FROM {name} WITH_FLUSH_COUNT = 100",
        broker,
        s3_endpoint,
        command=None,
    )
    code, _, err = cli(capsys, "run", *conn)
    assert code == 0, err
    return name, bkt, conn


def key(topic: str, partition: int, offset: int) -> str:
    return f"archive/{topic}/{partition}/{offset:012d}.json"


def test_a_clean_archive_verifies_against_kafka_and_offline(
    archived: tuple[str, str, tuple[str, ...]], capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, conn = archived
    code, out, err = cli(capsys, "verify", *conn, "--output", "json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["clean"] is True
    assert [(p["partition"], p["records"], p["objects"]) for p in report["partitions"]] == [
        (0, 300, 3),
        (1, 300, 3),
    ]
    assert all((p["checked_from"], p["checked_to"]) == (0, 300) for p in report["partitions"])

    code, out, err = cli(capsys, "verify", *conn, "--offline")
    assert code == 0, out + err
    assert out.strip().splitlines()[-1].startswith("clean: 2 partition(s), 6 object(s), 600")


def test_a_deleted_object_is_named_with_its_offsets(
    archived: tuple[str, str, tuple[str, ...]],
    s3_client: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt, conn = archived
    s3_client.delete_object(Bucket=bkt, Key=key(name, 1, 100))
    code, out, _ = cli(capsys, "verify", *conn, "--output", "json")
    assert code == 1, out
    (bad,) = [p for p in json.loads(out)["partitions"] if p["discrepancies"]]
    assert bad["partition"] == 1
    # The state names the object, whose key says it held 100..199 (the next one starts at
    # 200) and counts it; offsets 100..199 now fall to the object starting at 0.
    assert bad["discrepancies"] == [
        {
            "first_offset": 100,
            "last_offset": 199,
            "key": None,
            "problem": f"the state names {key(name, 1, 100)}, which does not exist",
        },
        {
            "first_offset": None,
            "last_offset": None,
            "key": None,
            "problem": "the state counts 3 object(s) written, but 2 exist: 1 object(s) were "
            "deleted",
        },
        {
            "first_offset": 100,
            "last_offset": 199,
            "key": key(name, 1, 0),
            "problem": "record missing from its object",
        },
    ]


def test_a_copied_object_is_found_online_and_offline(
    archived: tuple[str, str, tuple[str, ...]],
    s3_client: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt, conn = archived
    s3_client.copy_object(
        Bucket=bkt, Key=key(name, 0, 150), CopySource={"Bucket": bkt, "Key": key(name, 0, 100)}
    )
    code, out, _ = cli(capsys, "verify", *conn)
    assert code == 1
    assert f"{name}-0: " in out and f"{name}-1: ok" in out
    assert f"{key(name, 0, 100)}: holds 50 record(s) more than Kafka has" in out
    assert f"offsets 150..199 {key(name, 0, 150)}: archived record differs from Kafka" in out

    code, out, _ = cli(capsys, "verify", *conn, "--offline")
    assert code == 1
    assert f"offsets 150..199 {key(name, 0, 150)}: overlaps {key(name, 0, 100)}" in out


def test_a_truncated_object_is_found(
    archived: tuple[str, str, tuple[str, ...]],
    s3_client: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt, conn = archived
    cut_mid_line = key(name, 0, 200)
    body = s3_client.get_object(Bucket=bkt, Key=cut_mid_line)["Body"].read()
    s3_client.put_object(Bucket=bkt, Key=cut_mid_line, Body=body[:-1])
    cut_at_line = key(name, 1, 200)
    body = s3_client.get_object(Bucket=bkt, Key=cut_at_line)["Body"].read()
    s3_client.put_object(Bucket=bkt, Key=cut_at_line, Body=b"".join(body.splitlines(True)[:90]))

    code, out, _ = cli(capsys, "verify", *conn)
    assert code == 1
    assert f"offset 200 {cut_mid_line}: unreadable JSON object: the last line has no line" in out
    assert f"offsets 290..299 {cut_at_line}: record missing from its object" in out


def test_records_refused_under_skip_or_dead_letter_are_not_reported_missing(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Tombstones and values that are no JSON object, refused by AVRO, PARQUET and TEXT under
    error.policy skip/dead-letter, are not in the archive by design: verify is clean. (And a
    value holding NaN, as Python's json.dumps writes it, is the same value archived.)"""
    name, bkt = topic(partitions=1), bucket()
    odd: dict[int, bytes | None] = {3: None, 7: b"[1, 2]", 11: b"42", 15: b'"x"\n'}
    nan = b'{"id": 5, "score": NaN}'

    produce(name, 20, partitions=1, value=lambda i: odd.get(i, nan if i == 5 else {"id": i}))
    kcql = "; ".join(
        f"INSERT INTO {bkt}:{prefix} SELECT * FROM {name} STOREAS {fmt} "
        f"PROPERTIES('error.policy'='{policy}', 'flush.count'=5)"
        for prefix, fmt, policy in (
            ("p", "PARQUET", "skip"),
            ("a", "AVRO", "dead-letter"),
            ("t", "TEXT", "skip"),
        )
    )
    conn = run_args(kcql, broker, s3_endpoint, command=None)
    code, _, err = cli(capsys, "run", *conn)
    assert code == 0, err

    # The archive, read independently: the plain records are there, the refused ones not.
    def objects(prefix: str) -> list[bytes]:
        listed = s3_client.list_objects_v2(Bucket=bkt, Prefix=f"{prefix}/{name}/")["Contents"]
        return [s3_client.get_object(Bucket=bkt, Key=o["Key"])["Body"].read() for o in listed]

    plain = [{"id": i} for i in range(20) if i not in odd]
    rows = [r for data in objects("p") for r in pq.read_table(pa.BufferReader(data)).to_pylist()]
    assert [r["id"] for r in rows] == [r["id"] for r in plain]
    assert math.isnan(next(r["score"] for r in rows if r["id"] == 5))
    rows = [r for data in objects("a") for r in fastavro.reader(io.BytesIO(data))]
    assert [r["id"] for r in rows] == [r["id"] for r in plain]
    lines = [line for data in objects("t") for line in data.decode().splitlines()]
    assert len(lines) == 18 and "42" in lines and "[1, 2]" in lines
    code, out, err = cli(capsys, "verify", *conn, "--output", "json")
    report = json.loads(out)
    assert [d for p in report["partitions"] for d in p["discrepancies"]] == []
    assert report["clean"] is True and code == 0, out + err
    # Each refused record is noted once, as one that cannot be stored: not also as a hole
    # between objects (offsets compared with Kafka record by record are no guess), which
    # named the wrong offsets besides (5..5 after an object of 0..5 without 3).
    code, out, err = cli(capsys, "verify", *conn)
    assert code == 0, err
    assert "in no object" not in out, out
    assert out.count("cannot be stored in this format") == 3, out

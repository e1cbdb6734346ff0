"""`kafka-archive run` end to end: real broker, real S3 endpoint, real Spark.

Objects are read back with plain boto3 + json (not our code) and every record is checked to
appear exactly once, in offset order, in an object whose key names its first offset.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import run_args
from confluent_kafka import Producer

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

KEY = re.compile(r"^archive/(?P<topic>[^/]+)/(?P<partition>\d+)/(?P<offset>\d{12})\.(?P<ext>\w+)$")


# Record i: key k{i}, value {"id": i, "note": ...}, header n=i (produce(..., **NOTED)).
NOTED: dict[str, Any] = {
    "partitions": 3,
    "key": lambda i: f"k{i}".encode(),
    "value": lambda i: {"id": i, "note": "x" * (i % 7)},
    "headers": lambda i: [("n", str(i).encode())],
}


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["run", *args])
    out, err = capsys.readouterr()
    return code, out, err


def objects(s3: Any, bucket: str, prefix: str = "archive/") -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            key = item["Key"]
            if "/.kafka-archive/" in f"/{key}":
                continue
            found[key] = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return found


def ids_by_partition(found: dict[str, bytes], topic: str) -> dict[int, list[tuple[int, list[int]]]]:
    """partition -> [(start offset from the key, ids in the object)] in key order."""
    layout: dict[int, list[tuple[int, list[int]]]] = {}
    for key in sorted(found):
        match = KEY.match(key)
        assert match, f"unexpected key {key}"
        assert match["topic"] == topic
        ids = [json.loads(line)["id"] for line in found[key].decode().splitlines()]
        layout.setdefault(int(match["partition"]), []).append((int(match["offset"]), ids))
    return layout


def assert_exactly_once(found: dict[str, bytes], topic: str, total: int, partitions: int) -> None:
    layout = ids_by_partition(found, topic)
    assert sorted(layout) == list(range(partitions))
    seen: list[int] = []
    for partition, chunks in layout.items():
        expected_offset = 0
        for start, ids in chunks:
            # The key's offset is the offset of its first record; objects tile the partition.
            assert start == expected_offset, (partition, start, expected_offset)
            assert ids == [partition + partitions * (start + n) for n in range(len(ids))]
            expected_offset += len(ids)
            seen.extend(ids)
    assert sorted(seen) == list(range(total)), "every record exactly once"


def test_run_archives_then_resumes_then_has_nothing_new(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=3), bucket()
    kcql = f"INSERT INTO {bkt}:archive SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 1000"
    args = run_args(kcql, broker, s3_endpoint, command=None)

    produce(name, 10_000, **NOTED)
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    first = objects(s3_client, bkt)
    assert_exactly_once(first, name, 10_000, 3)
    assert max(len(body.splitlines()) for body in first.values()) == 1000
    assert "total: 10000 records" in out
    assert f"{name}-0: offsets 0..3333" in out

    produce(name, 2_000, first=10_000, **NOTED)
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    second = objects(s3_client, bkt)
    assert_exactly_once(second, name, 12_000, 3)
    assert {k: v for k, v in second.items() if k in first} == first, "old objects untouched"
    assert "total: 2000 records" in out

    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    assert objects(s3_client, bkt) == second
    assert "nothing new to archive" in out
    assert "total: 0 records" in out


def test_text_and_bytes_formats_store_values_verbatim(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    values = [b"plain", b"with\nnewline", b"\x00\xffbinary", b"", None]
    producer = Producer({"bootstrap.servers": broker})
    for value in values:
        producer.produce(name, value=value, partition=0)
    assert producer.flush(30) == 0

    code, _, err = run_cli(
        capsys,
        *run_args(
            f"INSERT INTO {bkt}:archive SELECT * FROM {name} STOREAS BYTES",
            broker,
            s3_endpoint,
            command=None,
        ),
    )
    assert code == 0, err
    (body,) = objects(s3_client, bkt).values()
    decoded: list[bytes | None] = []
    pos = 0
    while pos < len(body):  # 8-byte big-endian length, -1 for a tombstone (README)
        (length,) = struct.unpack_from(">q", body, pos)
        pos += 8
        decoded.append(None if length == -1 else body[pos : pos + length])
        pos += max(length, 0)
    assert decoded == values

    text_topic = topic(partitions=1)
    producer = Producer({"bootstrap.servers": broker})
    for value in (b"alpha", "βeta".encode(), b"gamma"):
        producer.produce(text_topic, value=value, partition=0)
    assert producer.flush(30) == 0
    code, _, err = run_cli(
        capsys,
        *run_args(
            f"insert into {bkt}:text select * from {text_topic} storeas `text`",
            broker,
            s3_endpoint,
            command=None,
        ),
    )
    assert code == 0, err
    (text,) = objects(s3_client, bkt, "text/").values()
    assert text.decode("utf-8").splitlines() == ["alpha", "βeta", "gamma"]


def test_value_that_is_not_json_fails_naming_offset_and_keeps_what_came_before(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    producer = Producer({"bootstrap.servers": broker})
    for i in range(5):
        producer.produce(name, value=json.dumps({"id": i}).encode(), partition=0)
    producer.produce(name, value=b"not json {", partition=0)
    producer.produce(name, value=b'{"id": 6}', partition=0)
    assert producer.flush(30) == 0
    args = run_args(
        f"INSERT INTO {bkt}:archive SELECT * FROM {name} STOREAS `JSON`",
        broker,
        s3_endpoint,
        command=None,
    )

    code, _, err = run_cli(capsys, *args)
    assert code == 10
    assert f"{name}-0 offset 5" in err
    assert "Traceback" not in err
    assert "not json" not in err, "payloads never appear in messages"
    found = objects(s3_client, bkt)
    assert [json.loads(x)["id"] for body in found.values() for x in body.splitlines()] == [
        0,
        1,
        2,
        3,
        4,
    ]

    # The committed offset is 5: a re-run stops at the same record, duplicating nothing.
    code, _, err = run_cli(capsys, *args)
    assert code == 10
    assert objects(s3_client, bkt) == found


@pytest.mark.parametrize(
    ("case", "exit_code", "message"),
    [
        ("missing-bucket", 6, "does not exist"),
        ("missing-topic", 4, "does not exist"),
        ("bad-kcql", 2, "kcql:1:"),
        ("no-bootstrap", 2, "no Kafka bootstrap servers"),
    ],
)
def test_user_mistakes_exit_non_zero_with_one_line(
    case: str,
    exit_code: int,
    message: str,
    broker: str,
    s3_endpoint: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KAFKA_ARCHIVE_BOOTSTRAP_SERVERS", raising=False)
    name, bkt = topic(partitions=1), bucket()
    kcql = f"INSERT INTO {bkt}:a SELECT * FROM {name}"
    conn = ["--bootstrap-servers", broker, "--endpoint-url", s3_endpoint]
    if case == "missing-bucket":
        kcql = f"INSERT INTO no-such-bucket-{bkt[-8:]}:a SELECT * FROM {name}"
    elif case == "missing-topic":
        kcql = f"INSERT INTO {bkt}:a SELECT * FROM no-such-topic-{bkt[-8:]}"
    elif case == "bad-kcql":
        kcql = f"INSERT INTO {bkt}:a SELEKT * FROM {name}"
    elif case == "no-bootstrap":
        conn = ["--endpoint-url", s3_endpoint]
    code, _, err = run_cli(capsys, "--kcql", kcql, *conn)
    assert code == exit_code, err
    assert message in err
    assert "Traceback" not in err
    if case != "bad-kcql":
        assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("policy", ["skip", "dead-letter"])
def test_error_policies_keep_bad_records_out_and_count_them(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    policy: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    producer = Producer({"bootstrap.servers": broker})
    for i in range(30):
        value = b"not json {" if i in (7, 21) else json.dumps({"id": i}).encode()
        producer.produce(name, key=f"k{i}".encode(), value=value, partition=0)
    assert producer.flush(30) == 0
    kcql = (
        f"INSERT INTO {bkt}:archive SELECT * FROM {name} "
        f"PROPERTIES('error.policy'='{policy}', 'flush.count'=10)"
    )
    code, out, err = run_cli(capsys, *run_args(kcql, broker, s3_endpoint, command=None))
    assert code == 0, err
    found = objects(s3_client, bkt)
    data = {k: v for k, v in found.items() if "/_dead-letter/" not in k}
    ids = [json.loads(line)["id"] for body in data.values() for line in body.splitlines()]
    assert sorted(ids) == [i for i in range(30) if i not in (7, 21)]
    assert "total: 28 records" in out
    letters = {k: v for k, v in found.items() if "/_dead-letter/" in k}
    if policy == "skip":
        assert "2 record(s) the format cannot store were skipped" in out
        assert letters == {}
    else:
        key = f"archive/_dead-letter/{name}/0/000000000007.json"
        assert f"2 record(s) the format cannot store went to {key}" in out
        lines = [json.loads(line) for line in letters[key].splitlines()]
        assert [(d["metadata"]["offset"], d["key"], d["value"]) for d in lines] == [
            (7, "k7", "not json {"),
            (21, "k21", "not json {"),
        ]
        assert all("not JSON" in d["error"] for d in lines)
    # Verify agrees: the refused records are in no object by design, not missing.
    code = main(run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, capsys.readouterr().out


def test_kafka_unreachable_is_one_line_on_stderr_not_librdkafkas_retries(
    s3_endpoint: str, bucket: Callable[..., str], capfd: pytest.CaptureFixture[str]
) -> None:
    """A refused connection makes librdkafka log a line every 50 ms (about 200 before the
    metadata request gives up): they are debug output; the user gets one error, exit 3."""
    from devstack import free_port

    kcql = f"INSERT INTO {bucket()}:archive SELECT * FROM orders"
    code = main(run_args(kcql, f"127.0.0.1:{free_port()}", s3_endpoint))
    err = capfd.readouterr().err
    assert code == 3, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) <= 2, err[:2000]
    assert lines[-1].startswith("kafka-archive: error: cannot reach Kafka")

"""`kafka-archive cat`: exactly the requested records, at object starts, ends and middles."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import Bed, cli, run_args

from kafka_archive.cli import main

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def json_archive(module_bed: Bed) -> tuple[str, str, str]:
    """250 JSON records of one partition in objects starting at 0, 100 and 200 (made once:
    the tests only read it)."""
    name, bkt = module_bed.topic(partitions=1), module_bed.bucket()
    module_bed.produce(name, 250, partitions=1)
    kcql = f"INSERT INTO {bkt}:data/v1 SELECT * FROM {name} WITH_FLUSH_COUNT = 100"
    assert main(run_args(kcql, module_bed.broker, module_bed.endpoint)) == 0
    return name, f"{bkt}:data/v1", module_bed.endpoint


def cat(capsys: pytest.CaptureFixture[str], archive: tuple[str, str, str], *args: str) -> Any:
    name, location, endpoint = archive
    return cli(
        capsys,
        "cat",
        "--from",
        location,
        "--topic",
        name,
        "--partition",
        "0",
        "--endpoint-url",
        endpoint,
        *args,
    )


@pytest.mark.parametrize(
    ("offset", "count", "ids"),
    [
        (0, 1, [0]),  # the first record of the first object
        (99, 3, [99, 100, 101]),  # the end of one object into the next
        (150, 2, [150, 151]),  # the middle of an object
        (200, 1, [200]),  # the start of the last object
        (248, 10, [248, 249]),  # the end of the archive: fewer than asked for
    ],
)
def test_cat_returns_exactly_the_requested_records(
    json_archive: tuple[str, str, str],
    capsys: pytest.CaptureFixture[str],
    offset: int,
    count: int,
    ids: list[int],
) -> None:
    code, out, err = cat(capsys, json_archive, "--offset", str(offset), "--count", str(count))
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["value"] for line in lines] == [{"id": i} for i in ids]
    assert [line["offset"] for line in lines] == ids
    assert all(line["offset_exact"] and line["value_encoding"] == "json" for line in lines)
    name = json_archive[0]
    assert lines[0]["object"] == f"data/v1/{name}/0/{offset // 100 * 100:012d}.json"


def test_cat_beyond_the_archive_and_a_wrong_place_fail_with_one_line(
    json_archive: tuple[str, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cat(capsys, json_archive, "--offset", "250")
    assert (code, out) == (13, "")
    assert "offset 250 is beyond the archive" in err
    assert len(err.strip().splitlines()) == 1

    name, location, endpoint = json_archive
    code, _, err = cli(
        capsys,
        "cat",
        "--from",
        location + "/other",
        "--topic",
        name,
        "--partition",
        "0",
        "--offset",
        "0",
        "--endpoint-url",
        endpoint,
    )
    assert code == 13
    assert "no archived objects" in err and "--kcql" in err


def test_cat_finds_the_objects_of_a_topic_whose_name_a_key_escapes(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A topic starting with '_' is named %5F… in keys: cat lists that folder, with or
    without --kcql (it listed the raw name and said the archive held no records)."""
    name, bkt = topic(partitions=1, prefix="_orders-"), bucket()
    produce(name, 250, partitions=1)
    kcql = f"INSERT INTO {bkt}:data/v1 SELECT * FROM {name} WITH_FLUSH_COUNT = 100"
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    folder = f"data/v1/%5F{name[1:]}/0/"
    listed = s3_client.list_objects_v2(Bucket=bkt, Prefix="data/v1/")
    keys = {item["Key"] for item in listed["Contents"] if "/.kafka-archive/" not in item["Key"]}
    assert keys == {f"{folder}{start:012d}.json" for start in (0, 100, 200)}
    where = ("--topic", name, "--partition", "0", "--offset", "99", "--count", "3")
    for statement in ((), ("--kcql", kcql)):
        code, out, err = cli(
            capsys,
            "cat",
            *("--from", f"{bkt}:data/v1", *where, "--endpoint-url", s3_endpoint),
            *statement,
        )
        assert code == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert [(line["offset"], line["value"]) for line in lines] == [
            (i, {"id": i}) for i in (99, 100, 101)
        ]
        assert lines[0]["object"] == f"{folder}000000000000.json"


def test_cat_prints_binary_values_base64_and_text_as_text(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    values: list[bytes | None] = [b"\x00\xff", "naïve".encode(), None, b""]
    produce(name, len(values), partitions=1, value=values.__getitem__)
    kcql = f"INSERT INTO {bkt}:raw SELECT * FROM {name} STOREAS BYTES"
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    code, out, err = cli(
        capsys,
        "cat",
        "--from",
        f"{bkt}:raw",
        "--topic",
        name,
        "--partition",
        "0",
        "--offset",
        "0",
        "--count",
        "4",
        "--endpoint-url",
        s3_endpoint,
    )
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(line["value"], line["value_encoding"]) for line in lines] == [
        (base64.b64encode(b"\x00\xff").decode(), "base64"),
        ("naïve", "text"),
        (None, None),
        ("", "text"),
    ]


def test_an_archive_without_records_and_a_missing_bucket_say_so(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A route whose runs archived nothing (all refused, or started at `latest`) has state
    but no objects: cat says the archive is empty, not to check --from; a bucket that does
    not exist points at --from (not at an INSERT INTO the user did not write)."""
    bkt = bucket()
    state = {"next_offset": 5, "partition": 0, "topic": "orders"}
    s3_client.put_object(
        Bucket=bkt, Key="arch/.kafka-archive/state/orders/0.json", Body=json.dumps(state)
    )
    where = ("--topic", "orders", "--partition", "0", "--offset", "0")
    code, _, err = cli(
        capsys, "cat", "--from", f"{bkt}:arch", *where, "--endpoint-url", s3_endpoint
    )
    assert code == 13 and "holds no records yet" in err, err
    code, _, err = cli(
        capsys, "cat", "--from", f"{bkt}-gone", *where, "--endpoint-url", s3_endpoint
    )
    assert code == 6 and "Check --from" in err and "INSERT INTO" not in err, err
    # An empty object (damaged): restore names it (an internal error, StopIteration, before).
    s3_client.put_object(Bucket=bkt, Key="arch/orders/0/000000000000.json", Body=b"")
    code, _, err = cli(
        capsys,
        "restore",
        "--from",
        f"{bkt}:arch",
        "--topic",
        "orders",
        "--to-topic",
        "orders-restored",
        "--values-only",
        *("--bootstrap-servers", broker, "--endpoint-url", s3_endpoint),
    )
    assert code == 14 and "000000000000.json holds no records" in err, err


def test_cat_and_restore_of_a_partitionby_archive_without_kcql_point_at_kcql(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An archive written with PARTITIONBY holds records that the default layout does not
    find: cat and restore without --kcql say to pass it (they said the archive "holds no
    records yet" while status showed every record archived)."""
    name, bkt = topic(partitions=1), bucket()
    produce(name, 30, partitions=1, value=lambda i: {"id": i, "c": "DE" if i % 2 else "FR"})
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PARTITIONBY c STOREAS `JSON`"
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    where = ("--from", f"{bkt}:arch", "--topic", name)
    code, _, err = cli(
        capsys, "cat", *where, "--partition", "0", "--offset", "0", "--endpoint-url", s3_endpoint
    )
    assert code == 13 and "no records yet" not in err, err
    assert "--kcql" in err and "up to offset 30" in err, err
    code, _, err = cli(
        capsys,
        "restore",
        *where,
        "--to-topic",
        f"{name}-restored",
        *("--bootstrap-servers", broker, "--endpoint-url", s3_endpoint),
    )
    assert code == 13 and "no records yet" not in err and "--kcql" in err, err

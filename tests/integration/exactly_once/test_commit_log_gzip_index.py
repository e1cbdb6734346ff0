"""Seekable block-GZIP objects in log mode (issue 37): each object's block index is named by
the commit entry beside it (a side object), so vacuum keeps it and ``cat`` finds it: one
range GET of the data object's block (requests counted by a pass-through proxy). The log, the
objects and the indexes are read with boto3, gzip and json."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import run_args
from faultproxy import FaultProxy

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

LOG = "arch/.kafka-archive/log/"


@pytest.fixture
def log_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")


def commits(s3: Any, bucket: str) -> list[dict[str, Any]]:
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=LOG).get("Contents", [])
    keys = sorted(i["Key"] for i in listed if "/checkpoint/" not in i["Key"])
    docs = [json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in keys]
    return [c for d in docs for c in d["commits"]]


def test_log_mode_names_each_block_index_beside_its_object_and_cat_seeks_with_it(
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
    name, bkt = topic(partitions=1), bucket()
    produce(name, 2000, partitions=1)
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('store.compression'="
        "'gzip', 'store.gzip.block.bytes'=4096, 'flush.count'=1000)"
    )
    args = run_args(kcql, broker, s3_endpoint, command=None)
    assert main(["run", *args]) == 0, capsys.readouterr().err
    produce(name, 500, first=2000, partitions=1)
    assert main(["run", *args]) == 0, capsys.readouterr().err  # its claim, vacuum, a commit

    named = [
        (o, s)
        for c in commits(s3_client, bkt)
        for o, s in zip(c["objects"], c["sides"], strict=True)
    ]
    assert len(named) == 3
    for obj, side in named:
        assert side["key"] == obj["key"] + ".index.json"
        assert (side["first"], side["last"]) == (obj["first"], obj["last"])
        body = s3_client.get_object(Bucket=bkt, Key=obj["key"])["Body"].read()
        got = s3_client.get_object(Bucket=bkt, Key=side["key"])
        assert got["ETag"] == side["checksum"], "the index the entry names, as created"
        blocks = json.loads(got["Body"].read())["blocks"]
        ids = [json.loads(line)["id"] for line in gzip.decompress(body).decode().splitlines()]
        assert blocks[0]["first_offset"] == ids[0] and sum(b["records"] for b in blocks) == len(ids)
        assert blocks[-1]["byte_offset"] + blocks[-1]["length"] == len(body)
    capsys.readouterr()
    assert main(["verify", *args]) == 0, capsys.readouterr().out
    capsys.readouterr()

    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        code = main(
            [
                "cat",
                "--from",
                f"{bkt}:arch",
                "--topic",
                name,
                "--partition",
                "0",
                "--offset",
                "1500",
                "--endpoint-url",
                proxy.url,
            ]
        )
        out = capsys.readouterr().out
    assert code == 0
    record = json.loads(out)
    assert record["offset"] == 1500 and record["value"] == {"id": 1500}
    reads = [
        (path, rng)
        for method, path, rng in proxy.requests
        if method == "GET" and path.split("?")[0].endswith(".json.gz")
    ]
    assert len(reads) == 1 and reads[0][1] is not None, proxy.requests
    assert any(
        method == "GET" and path.split("?")[0].endswith(".index.json")
        for method, path, _ in proxy.requests
    )

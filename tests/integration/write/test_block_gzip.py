"""Seekable block-GZIP objects: one gzip file for every reader, an index object, and `cat`
reading one record with the index and a single range GET of its block (requests counted by
a pass-through proxy in front of the S3 endpoint)."""

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


def test_block_gzip_objects_are_gzip_with_an_index_and_cat_uses_one_range_get(
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

    key = f"arch/{name}/0/000000001000.json.gz"
    body = s3_client.get_object(Bucket=bkt, Key=key)["Body"].read()
    lines = gzip.decompress(body).decode().splitlines()  # any gzip reader reads it whole
    assert [json.loads(line)["id"] for line in lines] == list(range(1000, 2000))
    index = json.loads(s3_client.get_object(Bucket=bkt, Key=key + ".index.json")["Body"].read())
    blocks = index["blocks"]
    assert len(blocks) > 3 and blocks[0]["first_offset"] == 1000
    assert sum(b["records"] for b in blocks) == 1000
    assert blocks[-1]["byte_offset"] + blocks[-1]["length"] == len(body)
    for block in blocks:  # each block is a gzip member of its own
        part = body[block["byte_offset"] : block["byte_offset"] + block["length"]]
        first = json.loads(gzip.decompress(part).splitlines()[0])["id"]
        assert first == block["first_offset"]
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
    assert record["offset_exact"] is True
    reads = [
        (path, rng)
        for method, path, rng in proxy.requests
        if method == "GET" and path.split("?")[0].endswith(".json.gz")
    ]
    assert len(reads) == 1 and reads[0][1] is not None, proxy.requests

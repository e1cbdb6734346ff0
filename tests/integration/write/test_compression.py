"""Whole-object compression: keys say it, standard decompressors read it, and verify and cat
(without the KCQL) read it back."""

from __future__ import annotations

import bz2
import gzip
import json
from collections.abc import Callable
from typing import Any

import pytest
from backports import zstd
from confluent_kafka import Producer

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

DECOMPRESS: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    "gzip": (".gz", gzip.decompress),
    "bzip2": (".bz2", bz2.decompress),
    "zstd": (".zst", zstd.decompress),
}


@pytest.mark.parametrize(("fmt", "codec"), [("JSON", "gzip"), ("TEXT", "zstd"), ("CSV", "bzip2")])
def test_compressed_objects_are_named_for_their_codec_and_read_back(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    fmt: str,
    codec: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    producer = Producer({"bootstrap.servers": broker})
    values = [json.dumps({"id": i, "pad": "x" * 40}) for i in range(250)]
    for value in values:
        producer.produce(name, value=value.encode(), partition=0)
    assert producer.flush(30) == 0
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS {fmt} "
        f"PROPERTIES('store.compression'='{codec}', 'flush.count'=100)"
    )
    args = ("--kcql", kcql, "--bootstrap-servers", broker, "--endpoint-url", s3_endpoint)
    assert main(["run", *args]) == 0, capsys.readouterr().err

    suffix, decompress = DECOMPRESS[codec]
    ext = fmt.lower()
    listing = s3_client.list_objects_v2(Bucket=bkt, Prefix=f"arch/{name}/0/")["Contents"]
    keys = sorted(item["Key"] for item in listing)
    assert keys == [f"arch/{name}/0/{o:012d}.{ext}{suffix}" for o in (0, 100, 200)]
    lines: list[str] = []
    for key in keys:
        body = s3_client.get_object(Bucket=bkt, Key=key)["Body"].read()
        lines.extend(decompress(body).decode().splitlines())
    if fmt == "CSV":
        assert lines == [f"{i},{'x' * 40}" for i in range(250)]
    else:
        assert lines == values
    assert sum(len(v) + 1 for v in values) > sum(i["Size"] for i in listing)  # it compresses
    capsys.readouterr()

    assert main(["verify", *args]) == 0, capsys.readouterr().out
    capsys.readouterr()
    if fmt != "CSV":  # cat tells the format by the extension
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
                "150",
                "--endpoint-url",
                s3_endpoint,
            ]
        )
        out = capsys.readouterr().out
        assert code == 0
        found = json.loads(out)
        assert found["offset"] == 150
        expected = json.loads(values[150]) if fmt == "JSON" else values[150]
        assert found["value"] == expected

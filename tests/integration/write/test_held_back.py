"""A stated flush interval holds back, in a one-shot run too, every open object whose first
record is younger than the interval (docs/formats.md, Flush interval): the run says so, with
the offsets and when a later run takes them, instead of a bare "0 records"."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import run_args

from kafka_archive.cli import main

pytestmark = pytest.mark.integration


def test_a_run_names_the_records_a_stated_flush_interval_holds_back(
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
    hour_ago = int(time.time() * 1000) - 3_600_000 - 60_000
    produce(name, 30, partitions=1, timestamp=hour_ago)  # old enough: flushed
    produce(name, 20, first=30, partitions=1)  # produced now: held back an hour
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.interval'=3600)"
    assert main(run_args(kcql, broker, s3_endpoint)) == 0
    err = capsys.readouterr().err
    assert f"{name}[0]: offsets 30..49 held back" in err, err
    assert "flush.interval 3600 s" in err and "a later run archives them" in err, err
    listed = s3_client.list_objects_v2(Bucket=bkt, Prefix="arch/")
    keys = [o["Key"] for o in listed.get("Contents", []) if "/.kafka-archive/" not in o["Key"]]
    ids = [
        json.loads(line)["id"]
        for key in keys
        for line in s3_client.get_object(Bucket=bkt, Key=key)["Body"].read().splitlines()
    ]
    assert sorted(ids) == list(range(30))

    # Run again at once: the same offsets are held back, and said so; nothing is written.
    assert main(run_args(kcql, broker, s3_endpoint)) == 0
    assert f"{name}[0]: offsets 30..49 held back" in capsys.readouterr().err

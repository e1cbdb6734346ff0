"""PARTITIONBY end to end: objects land under the values of their records, each record once.

Objects are listed and read with plain boto3 + json; ``verify`` then compares the archive
with Kafka record by record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import run_args
from confluent_kafka import Producer

from kafka_archive.cli import main
from kafka_archive.cli.connector import importer

pytestmark = pytest.mark.integration

COUNTRIES = ("DE", "FR", None)  # None: the record has no country header
KINDS = ("retail", "b2b")


def kind(i: int) -> dict[str, Any]:
    return {"id": i, "kind": KINDS[i % 2]}


def country(i: int) -> list[tuple[str, bytes]]:
    return [] if (c := COUNTRIES[i % 3]) is None else [("country", c.encode())]


def objects(s3: Any, bucket: str) -> dict[str, list[dict[str, Any]]]:
    found = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="archive/"):
        for item in page.get("Contents", []):
            if "/.kafka-archive/" in item["Key"]:
                continue
            body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            found[item["Key"]] = [json.loads(line) for line in body.decode().splitlines()]
    return found


NAME = r"(?P<topic>[^/(]+)\((?P<p>\d+)_(?P<o>\d{12})\)\.json$"


@pytest.mark.parametrize(
    ("partitioner", "pattern"),
    [
        ("WITHPARTITIONER = Values", r"^archive/(?P<country>[^/]+)/(?P<kind>[^/]+)/" + NAME),
        # Lenses' default with PARTITIONBY is KeysAndValues.
        ("", r"^archive/country=(?P<country>[^/]+)/kind=(?P<kind>[^/]+)/" + NAME),
    ],
    ids=["values", "keys-and-values-by-default"],
)
def test_records_land_under_their_values_exactly_once_and_verify_passes(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    partitioner: str,
    pattern: str,
) -> None:
    name, bkt = topic(partitions=2), bucket()
    kcql = (
        f"INSERT INTO {bkt}:archive SELECT * FROM {name} PARTITIONBY _header.country, kind "
        f"STOREAS `JSON` {partitioner} WITH_FLUSH_COUNT = 100"
    )
    common = run_args(kcql, broker, s3_endpoint, command=None)
    produce(name, 1200, partitions=2, value=kind, headers=country)

    assert main(["run", *common]) == 0, capsys.readouterr().err
    found = objects(s3_client, bkt)
    key_re = re.compile(pattern)
    seen: list[int] = []
    missing = "(missing)" if partitioner else "__HIVE_DEFAULT_PARTITION__"
    for key, records in found.items():
        match = key_re.match(key)
        assert match, key
        assert match["topic"] == name
        assert 0 < len(records) <= 100
        for record in records:
            i = record["id"]
            assert match["country"] == (COUNTRIES[i % 3] or missing), key
            assert match["kind"] == record["kind"] == KINDS[i % 2]
            assert int(match["p"]) == i % 2
        # The key names the offset of the object's first record (record i is offset i // 2).
        assert int(match["o"]) == records[0]["id"] // 2
        seen.extend(r["id"] for r in records)
    assert sorted(seen) == list(range(1200)), "every record exactly once"
    # 2 partitions x 3 countries x ... kinds: the id parity fixes both partition and kind.
    groups = {(k.rsplit("/", 1)[0]) for k in found}
    assert len(groups) == 6
    capsys.readouterr()

    assert main(["verify", *common]) == 0, capsys.readouterr().out
    assert "verified against Kafka" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("layout", "pattern"),
    [
        ("'layout'='confluent'", r"^archive/{t}/partition=0/{t}\+0\+\d{{12}}\.json$"),
        (
            "'layout'='hive'",
            r"^archive/{t}/year=\d{{4}}/month=\d\d/day=\d\d/hour=\d\d/{t}\+0\+\d{{12}}\.json$",
        ),
        (
            "'layout.template'='{topic}/{date}/{partition}-{offset}.{ext}'",
            r"^archive/{t}/\d{{4}}-\d\d-\d\d/0-\d{{12}}\.json$",
        ),
    ],
    ids=["confluent", "hive", "template"],
)
def test_layouts_chosen_in_kcql_name_the_objects(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    layout: str,
    pattern: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    produce(name, 30, partitions=1, value=kind, headers=country)
    kcql = f"INSERT INTO {bkt}:archive SELECT * FROM {name} PROPERTIES({layout})"
    common = run_args(kcql, broker, s3_endpoint, command=None)
    assert main(["run", *common]) == 0, capsys.readouterr().err
    found = objects(s3_client, bkt)
    assert found and all(re.match(pattern.format(t=re.escape(name)), k) for k in found), found
    assert sorted(r["id"] for records in found.values() for r in records) == list(range(30))
    capsys.readouterr()
    assert main(["verify", *common]) == 0, capsys.readouterr().out


def test_a_template_that_cannot_name_objects_uniquely_is_refused_before_running(
    broker: str,
    s3_endpoint: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    kcql = (
        f"INSERT INTO {bucket()}:archive SELECT * FROM {topic()} "
        "PROPERTIES('layout.template'='{topic}/{offset}.{ext}')"
    )
    code = main(run_args(kcql, broker, s3_endpoint))
    err = capsys.readouterr().err
    assert code == 2 and "partition" in err and "Traceback" not in err


def test_hive_time_layout_from_a_value_field_and_verify_passes(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """'partition.time.field': the event time inside the value, not the Kafka timestamp,
    places each record (a late record lands in its own day); one without it goes to the
    documented missing-value segment; verify recomputes the same places from Kafka."""
    name, bkt = topic(partitions=1), bucket()
    days = ("2024-02-28T23:59:59Z", "2024-02-29T00:00:00Z", "2024-02-28T12:00:00+00:00", None)
    producer = Producer({"bootstrap.servers": broker, "linger.ms": 5})
    for i in range(40):
        value = {"id": i} if days[i % 4] is None else {"id": i, "event": {"at": days[i % 4]}}
        producer.produce(name, value=json.dumps(value).encode(), partition=0)
    assert producer.flush(30) == 0
    kcql = (
        f"INSERT INTO {bkt}:archive SELECT * FROM {name} "
        "PROPERTIES('layout'='hive', 'partition.time.field'='_value.event.at')"
    )
    common = run_args(kcql, broker, s3_endpoint, command=None)
    assert main(["run", *common]) == 0, capsys.readouterr().err
    found = objects(s3_client, bkt)
    by_day: dict[str, list[int]] = {}
    for key, records in found.items():
        hive = r"/year=(\w+)/month=(\w+)/day=(\w+)/hour=(\w+)/"
        match = re.match(f"^archive/{re.escape(name)}{hive}", key)
        assert match, key
        by_day.setdefault("-".join(match.groups()), []).extend(r["id"] for r in records)
    missing = "__HIVE_DEFAULT_PARTITION__"
    assert {day: sorted(ids) for day, ids in by_day.items()} == {
        "2024-02-28-23": list(range(0, 40, 4)),
        "2024-02-29-00": list(range(1, 40, 4)),
        "2024-02-28-12": list(range(2, 40, 4)),
        "-".join([missing] * 4): list(range(3, 40, 4)),
    }
    capsys.readouterr()
    assert main(["verify", *common]) == 0, capsys.readouterr().out


def test_a_lenses_interval_imported_gives_a_backfill_count_sized_objects(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Historical records (one a minute over 10 hours) by a header of 4 values, with
    Lenses' flush.interval 600. Lenses' interval is the wall clock: a backfill read in
    seconds rolls on count and size alone, an object per group. The imported configuration
    writes that ('flush.interval.time'='arrival'); it wrote an object per 10 minutes of record
    time per group (~240, 2.5 records each). Stated as record time (Confluent's
    rotate.interval.ms), each object spans less than the interval of record time."""
    name, bkt = topic(partitions=1), bucket()
    base = 1_700_000_000_000
    regions = ("eu", "us", "ap", "sa")
    produce(
        name,
        [
            {
                "value": json.dumps({"id": i}).encode(),
                "headers": [("region", regions[i % 4].encode())],
                "timestamp": base + i * 60_000,
                "partition": 0,
            }
            for i in range(600)
        ],
    )
    lenses = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": name,
        "connect.s3.kcql": f"INSERT INTO {bkt}:lenses SELECT * FROM {name} "
        "PARTITIONBY _header.region STOREAS `JSON` PROPERTIES('flush.interval'=600)",
    }
    imported = importer.convert(lenses)
    (statement,) = imported.config["kcql"]

    def stored(prefix: str) -> dict[str, list[int]]:
        found = {}
        for page in s3_client.get_paginator("list_objects_v2").paginate(
            Bucket=bkt, Prefix=f"{prefix}/"
        ):
            for item in page.get("Contents", []):
                if "/.kafka-archive/" not in item["Key"]:
                    body = s3_client.get_object(Bucket=bkt, Key=item["Key"])["Body"].read()
                    found[item["Key"]] = [json.loads(line)["id"] for line in body.splitlines()]
        return found

    assert main(run_args(statement, broker, s3_endpoint)) == 0, capsys.readouterr().err
    lenses_objects = stored("lenses")
    assert len(lenses_objects) == 4, len(lenses_objects)  # one per region
    assert sorted(i for ids in lenses_objects.values() for i in ids) == list(range(600))
    record_time = statement.replace("'arrival'", "'record'").replace(":lenses", ":record")
    assert "'record'" in record_time
    assert main(run_args(record_time, broker, s3_endpoint)) == 0, capsys.readouterr().err
    record_objects = stored("record")
    assert sorted(i for ids in record_objects.values() for i in ids) == list(range(600))
    for ids in record_objects.values():
        assert (max(ids) - min(ids)) * 60 < 600, ids  # record time spanned below the interval
    assert len(record_objects) >= 200

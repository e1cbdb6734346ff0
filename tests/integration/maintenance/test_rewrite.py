"""The maintenance engine (issue 38) on archives a real `run` made (Kafka, moto, Spark): many
small objects compacted, erased and expired by the planner and the rewriter into a scratch
prefix, then read back with independent readers (boto3 + json, fastavro, pyarrow, csv):
exactly the records that should be there, in offset order, under keys of their first offset;
and our `cat` seeks into a compacted object by its rebuilt block index."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import cli, run_args
from maintenance_helpers import (
    SUFFIX,
    check_named,
    committed,
    objects_under,
    rows_of,
    scratch,
    store_of,
)

from kafka_archive import kcql
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.plan.maintenance import (
    CommittedObject,
    Compact,
    Erase,
    Expire,
    plan,
)
from kafka_archive.archiver.store.s3 import PreconditionFailed
from kafka_archive.archiver.write.rewrite import (
    drop_before,
    drop_keys,
    rewrite,
)
from kafka_archive.kcql.plan import Route

pytestmark = pytest.mark.integration


def archive(
    capsys: pytest.CaptureFixture[str],
    broker: str,
    endpoint: str,
    bkt: str,
    name: str,
    fmt: str,
    *,
    flush: int = 5,
    properties: str = "",
) -> Route:
    """`run` the topic into ``bkt:arch`` in many small objects; the route it wrote."""
    props = f" PROPERTIES({properties})" if properties else ""
    text = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS {fmt} "
        f"WITH_FLUSH_COUNT = {flush}{props}"
    )
    code, _, err = cli(capsys, *run_args(text, broker, endpoint))
    assert code == 0, err
    return kcql.parse(text).routes[0]


@pytest.mark.parametrize("fmt", ["JSON", "AVRO", "PARQUET", "CSV", "CSV_WITHHEADERS"])
def test_compact_keeps_exactly_the_records_in_offset_order(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
    fmt: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    produce(name, 60, partitions=1, value=lambda i: {"id": i, "name": f"n{i}", "x": i * 1.5})
    route = archive(capsys, broker, s3_endpoint, bkt, name, fmt)
    listed = objects_under(s3_client, bkt, "arch/")
    assert len(listed) == 12
    objs, rows = committed(fmt, listed, enveloped=False)
    target = sum(o.size for o in objs) // 3
    groups = plan(objs, Compact(target_size=target)).rewrites
    assert len(groups) >= 2 and all(g.size <= target for g in groups)

    store = store_of(s3_endpoint)
    tp = TopicPartition(name, 0)
    for group in groups:
        result = rewrite(store, scratch(route), tp, (), group.objects, suffix=SUFFIX)
        # The group's inputs are read from the route's prefix (the scratch route keeps its
        # bucket); its records, in offset order, are exactly the new objects'.
        expected = [row for o in group.objects for row in rows[o.key]]
        got: list[Any] = []
        for new in result.objects:
            body = s3_client.get_object(Bucket=bkt, Key=new.key)["Body"].read()
            found = rows_of(fmt, new.key, body)
            if fmt == "CSV_WITHHEADERS":
                assert found[0] == ["id", "name", "x"]
                found = found[1:]
            got += found
        assert got == expected
        assert result.objects[0].first == group.objects[0].first
        assert result.objects[-1].last == group.objects[-1].last
        assert sum(n.records for n in result.objects) == len(expected)
        assert not result.dropped and result.objects_read == len(group.objects)
        check_named(s3_client, bkt, result, fmt)
    # Nothing was written under the archive's own prefix.
    assert [k for k, _ in objects_under(s3_client, bkt, "arch/")] == [k for k, _ in listed]


@pytest.mark.parametrize("fmt", ["JSON", "AVRO", "PARQUET"])
def test_erase_removes_the_keys_records_and_nothing_else(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
    fmt: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    erased = {7, 8, 33}
    produce(
        name,
        40,
        partitions=1,
        key=lambda i: b"person-1" if i in erased else f"other-{i}".encode(),
    )
    route = archive(capsys, broker, s3_endpoint, bkt, name, fmt, properties="'store.envelope'=true")
    listed = objects_under(s3_client, bkt, "arch/")
    objs, rows = committed(fmt, listed, enveloped=True)
    groups = plan(objs, Erase(frozenset({b"person-1"}))).rewrites
    assert len(groups) == len(objs) == 8

    store, tp = store_of(s3_endpoint), TopicPartition(name, 0)
    kept: dict[int, Any] = {}
    dropped: list[int] = []
    for group in groups:
        result = rewrite(
            store,
            scratch(route),
            tp,
            (),
            group.objects,
            suffix=SUFFIX,
            drop=drop_keys({b"person-1"}),
        )
        dropped += [o for first, last in result.dropped for o in range(first, last + 1)]
        if result.unchanged:  # nothing of the key: the object stays as it is
            assert not result.objects
            sources = rows[group.objects[0].key]
        else:
            check_named(s3_client, bkt, result, fmt)
            sources = [
                row
                for new in result.objects
                for row in rows_of(
                    fmt, new.key, s3_client.get_object(Bucket=bkt, Key=new.key)["Body"].read()
                )
            ]
        for row in sources:
            kept[int(row["metadata"]["offset"])] = row
    assert sorted(dropped) == sorted(erased)
    assert sorted(kept) == [o for o in range(40) if o not in erased]
    # Every other record is as it was, key, value, headers and time included.
    original = {int(r["metadata"]["offset"]): r for rs in rows.values() for r in rs}
    assert all(kept[o] == original[o] for o in kept)
    changed = [g for g in groups if any(o.first <= e <= o.last for o in g.objects for e in erased)]
    assert len(changed) == 2  # the objects of 5..9 and 30..34 only


def test_erase_by_a_key_field_in_the_value(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    produce(name, 20, partitions=1, value=lambda i: {"id": i, "user": f"u{i % 4}"})
    route = archive(capsys, broker, s3_endpoint, bkt, name, "CSV_WITHHEADERS")
    listed = objects_under(s3_client, bkt, "arch/")
    objs, _ = committed("CSV_WITHHEADERS", listed, enveloped=False)
    store, tp = store_of(s3_endpoint), TopicPartition(name, 0)
    got: list[list[str]] = []
    for group in plan(objs, Erase(frozenset({b"u1"}))).rewrites:
        result = rewrite(
            store,
            scratch(route),
            tp,
            (),
            group.objects,
            suffix=SUFFIX,
            drop=drop_keys({b"u1"}, key_field="user"),
        )
        (obj,) = group.objects
        dropped = [(o, o) for o in range(obj.first, obj.last + 1) if o % 4 == 1]
        assert list(result.dropped) == dropped
        for new in result.objects:
            body = s3_client.get_object(Bucket=bkt, Key=new.key)["Body"].read()
            header, *found = rows_of("CSV_WITHHEADERS", new.key, body)
            assert header == ["id", "user"]
            got += found
    assert got == [[str(i), f"u{i % 4}"] for i in range(20) if i % 4 != 1]


@pytest.mark.parametrize("fmt", ["JSON", "AVRO", "PARQUET"])
def test_expire_removes_the_records_before_the_cut_and_nothing_else(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
    fmt: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    base = 1_700_000_000_000
    # Record i at base + i seconds, but record 26 late (before the cut, after later ones).
    produce(
        name,
        [
            {"value": json.dumps({"id": i}).encode(), "partition": 0, "timestamp": base + t * 1000}
            for i, t in enumerate([*range(26), 5, *range(27, 40)])
        ],
    )
    route = archive(capsys, broker, s3_endpoint, bkt, name, fmt, properties="'store.envelope'=true")
    objs, rows = committed(fmt, objects_under(s3_client, bkt, "arch/"), enveloped=True)
    cut = base + 23_500
    result_plan = plan(objs, Expire(cut))
    # 0..19 go whole without being read; 20..24 and 25..29 span the cut; the rest stay.
    assert [o.first for o in result_plan.drops] == [0, 5, 10, 15]
    assert [g.objects[0].first for g in result_plan.rewrites] == [20, 25]

    store, tp = store_of(s3_endpoint), TopicPartition(name, 0)
    kept: list[int] = []
    for group in result_plan.rewrites:
        result = rewrite(
            store, scratch(route), tp, (), group.objects, suffix=SUFFIX, drop=drop_before(cut, tp)
        )
        check_named(s3_client, bkt, result, fmt)
        for new in result.objects:
            body = s3_client.get_object(Bucket=bkt, Key=new.key)["Body"].read()
            for row in rows_of(fmt, new.key, body):
                assert row == next(
                    r for r in rows[group.objects[0].key] if r["metadata"] == row["metadata"]
                )
                kept.append(int(row["metadata"]["offset"]))
        if group.objects[0].first == 20:
            assert result.dropped == ((20, 23),)
        else:
            assert result.dropped == ((26, 26),)
    assert kept == [24, 25, 27, 28, 29]


def test_cat_seeks_into_a_compacted_object_by_its_block_index(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    produce(name, 200, partitions=1, value=lambda i: {"id": i, "pad": "x" * 40})
    blocked = "'store.compression'='gzip', 'store.gzip.block.bytes'='1024'"
    route = archive(capsys, broker, s3_endpoint, bkt, name, "JSON", flush=20, properties=blocked)
    objs, _ = committed("JSON", objects_under(s3_client, bkt, "arch/"), enveloped=False)
    assert len(objs) == 10
    (group,) = plan(objs, Compact()).rewrites
    store, tp = store_of(s3_endpoint), TopicPartition(name, 0)
    result = rewrite(store, scratch(route), tp, (), group.objects, suffix=SUFFIX)
    (new,) = result.objects
    assert new.index is not None and new.key.endswith(".json.gz")
    # Create-only: the same rewrite again finds its key taken, replaces nothing.
    before = s3_client.get_object(Bucket=bkt, Key=new.key)["ETag"]
    with pytest.raises(PreconditionFailed):
        rewrite(store, scratch(route), tp, (), group.objects, suffix=SUFFIX)
    assert s3_client.get_object(Bucket=bkt, Key=new.key)["ETag"] == before
    index = json.loads(s3_client.get_object(Bucket=bkt, Key=new.index)["Body"].read())
    assert len(index["blocks"]) > 5  # a block index rebuilt over the merged object
    assert sum(b["records"] for b in index["blocks"]) == 200

    # The scratch prefix read as a route whose keys carry the suffix (what the read side
    # will be told by the commit log); `cat` seeks to an offset deep inside the object.
    text = (
        f"INSERT INTO {bkt}:scratch SELECT * FROM {name} STOREAS JSON "
        f"PROPERTIES({blocked}, 'key.suffix'='{SUFFIX}')"
    )
    code, out, err = cli(
        capsys,
        "cat",
        "--from",
        f"{bkt}:scratch",
        "--topic",
        name,
        "--partition",
        "0",
        "--offset",
        "137",
        "--count",
        "2",
        "--kcql",
        text,
        "--endpoint-url",
        s3_endpoint,
    )
    assert code == 0, err
    printed = [json.loads(line) for line in out.splitlines()]
    assert [p["offset"] for p in printed] == [137, 138]
    assert [
        json.loads(p["value"])["id"] if isinstance(p["value"], str) else p["value"]["id"]
        for p in printed
    ] == [137, 138]


def committed_enveloped_by_group(listed: list[tuple[str, bytes]]) -> list[Any]:
    """The objects as committed, first offsets from the stored metadata (PARTITIONBY keys
    are not the lenses folder form ``committed`` parses)."""
    out = []
    for key, body in listed:
        offsets = [json.loads(line)["metadata"]["offset"] for line in body.decode().splitlines()]
        out.append(CommittedObject(key, offsets[0], offsets[-1], len(offsets), len(body)))
    return out


def test_compact_merges_within_each_partitionby_folder_only(
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    countries = ("DE", "FR", "FR", "DE", "IT")
    produce(
        name,
        50,
        partitions=1,
        headers=lambda i: [("country", countries[i % 5].encode())],
    )
    text = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} PARTITIONBY _header.country STOREAS JSON "
        "WITH_FLUSH_COUNT = 4 PROPERTIES('store.envelope'=true)"
    )
    code, _, err = cli(capsys, *run_args(text, broker, s3_endpoint))
    assert code == 0, err
    route = kcql.parse(text).routes[0]
    listed = objects_under(s3_client, bkt, "arch/")
    folder = {key: key.split("/")[1].removeprefix("country=") for key, _ in listed}
    objs = [
        dataclasses.replace(o, group=(folder[o.key],)) for o in committed_enveloped_by_group(listed)
    ]
    groups = plan(objs, Compact(offsets_stored=True)).rewrites
    assert sorted(g.group for g in groups) == [("DE",), ("FR",), ("IT",)]
    store, tp = store_of(s3_endpoint), TopicPartition(name, 0)
    for group in groups:
        result = rewrite(store, scratch(route), tp, group.group, group.objects, suffix=SUFFIX)
        (new,) = result.objects
        first = group.objects[0].first
        assert new.key == f"scratch/country={group.group[0]}/{name}(0_{first:012d}){SUFFIX}.json"
        body = s3_client.get_object(Bucket=bkt, Key=new.key)["Body"].read()
        offsets = [json.loads(line)["metadata"]["offset"] for line in body.decode().splitlines()]
        assert offsets == [i for i in range(50) if countries[i % 5] == group.group[0]]

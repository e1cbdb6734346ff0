"""compact's new objects are each attempt's own, as a run's task's are (issue 37's
identical-bytes hole, for the rewrite of issue 38): real broker, moto's S3 server, real
Spark for the run and `verify`.

A fenced writer's object sits at the key compact plans, with the very bytes an unstamped
compact attempt writes there (the replaced objects' records merged, built here by hand);
compact deletes it If-Match and creates its own; then a DELETE If-Match on the planted
object's ETag lands (a straggler's, late). Formats with a place for a stamp (Parquet's file
metadata, the gzip header's FNAME): the new object is at that key with other bytes, so the
late DELETE is refused; the others (JSON): compact wrote at a key of its attempt's own,
``<first>.g1.e<epoch>a<attempt>.json``. Either way every record stays committed once, and
the stamp read back by independent readers (pyarrow, the gzip header, the key) is the one
the object's S3 metadata names.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import re
import time
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq
import pytest
from archive_helpers import cli, run_args

pytestmark = pytest.mark.integration

LOG = "arch/.kafka-archive/log/"
RECORDS = 12


def entries(s3: Any, bucket: str) -> list[dict[str, Any]]:
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=LOG):
        keys += [i["Key"] for i in page.get("Contents", []) if "/checkpoint/" not in i["Key"]]
    return [json.loads(s3.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in sorted(keys)]


def data_keys(s3: Any, bucket: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="arch/"):
        found |= {
            i["Key"]: i["ETag"]
            for i in page.get("Contents", [])
            if "/.kafka-archive/" not in i["Key"]
        }
    return found


def ids_of(body: bytes, key: str, fmt: str) -> list[int]:
    data = gzip.decompress(body) if key.endswith(".gz") else body
    if fmt == "PARQUET":
        return [int(i) for i in pq.read_table(io.BytesIO(data)).column("id").to_pylist()]
    return [json.loads(line)["id"] for line in data.decode().splitlines()]


def gzip_fname(body: bytes) -> str:
    """The FNAME field of a gzip member's header (RFC 1952), "" when absent."""
    assert body[:3] == b"\x1f\x8b\x08", "a gzip member"
    if not body[3] & 0x08:
        return ""
    at = 10 + (2 + int.from_bytes(body[10:12], "little") if body[3] & 0x04 else 0)
    return body[at : body.index(b"\0", at)].decode("latin-1")


def generation_key(key: str) -> str:
    """A run's ``<first>.<ext>`` key (or its attempt's ``<first>.e<N>a<N>.<ext>``) as
    compact plans its first generation: ``<first>.g1.<ext>``."""
    folder, _, name = key.rpartition("/")
    stem, *rest = name.split(".")
    ext = ".".join(part for part in rest if not re.fullmatch(r"e\d+a\d+", part))
    return f"{folder}/{stem}.g1.{ext}"


@pytest.mark.parametrize(
    ("fmt", "props", "stamped"),
    [("JSON", "", False), ("PARQUET", "", True), ("JSON", "'store.compression'='gzip'", True)],
    ids=["json", "parquet", "json-gzip"],
)
def test_a_late_delete_of_a_fenced_writer_s_object_at_a_compact_key_removes_nothing_committed(
    fmt: str,
    props: str,
    stamped: bool,
    monkeypatch: pytest.MonkeyPatch,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")
    name, bkt = topic(partitions=1), bucket()
    extra = f" PROPERTIES({props})" if props else ""
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `{fmt}` WITH_FLUSH_COUNT = 4{extra}"
    )
    produce(name, RECORDS, partitions=1, value=lambda i: {"id": i})
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    log = entries(s3_client, bkt)
    assert [e["kind"] for e in log] == ["claim", "commit"]
    run_writer = log[0]["writer"]
    objects = log[1]["commits"][0]["objects"]
    assert len(objects) == 3

    # compact's claim will be epoch 2, its first try attempt 1: the key it plans.
    planned = generation_key(objects[0]["key"])
    if not stamped:
        folder, _, file = planned.rpartition("/")
        stem, gen, ext = file.split(".", 2)
        planned = f"{folder}/{stem}.{gen}.e{run_writer['epoch'] + 1}a1.{ext}"
    bodies = [s3_client.get_object(Bucket=bkt, Key=o["key"])["Body"].read() for o in objects]
    if fmt == "PARQUET":  # (an unstamped Parquet rewrite's bytes: the first object's will do)
        body = bodies[0]
    else:  # the merged lines, as an unstamped rewrite writes them
        lines = b"".join(gzip.decompress(b) if props else b for b in bodies)
        body = gzip.compress(lines, mtime=0) if props else lines
    meta = {
        "run-id": run_writer["run_id"],
        "epoch": str(run_writer["epoch"]),
        "attempt": "7",
        "route": name,
        "topic": name,
        "partition": "0",
    }
    planted = s3_client.put_object(Bucket=bkt, Key=planned, Body=body, Metadata=meta)

    code, out, err = cli(capsys, "compact", "--kcql", kcql, "--endpoint-url", s3_endpoint)
    assert code == 0, err
    with contextlib.suppress(s3_client.exceptions.ClientError):  # the straggler's late DELETE
        s3_client.delete_object(Bucket=bkt, Key=planned, IfMatch=planted["ETag"])
    log = entries(s3_client, bkt)
    assert [e["kind"] for e in log] == ["claim", "commit", "claim", "rewrite"]
    compactor = log[2]["writer"]
    assert compactor["epoch"] == run_writer["epoch"] + 1
    (rewrite,) = log[3]["rewrites"]
    (new,) = rewrite["objects"]
    body = s3_client.get_object(Bucket=bkt, Key=new["key"])["Body"].read()
    assert ids_of(body, new["key"], fmt) == list(range(RECORDS)), "every record, once"
    head = s3_client.head_object(Bucket=bkt, Key=new["key"])["Metadata"]
    assert (head["run-id"], head["epoch"]) == (compactor["run_id"], str(compactor["epoch"]))
    stamp = f"{compactor['run_id']}.e{compactor['epoch']}a{head['attempt']}"
    if stamped:  # the planned key, the attempt's bytes
        assert new["key"] == planned
        if fmt == "PARQUET":
            found = pq.read_metadata(io.BytesIO(body)).metadata[b"kafka-archive.writer"]
            assert found.decode() == stamp
        else:
            assert gzip_fname(body) == stamp
    else:  # a key of the attempt's own, after the generation
        found_key = re.fullmatch(r".*/(\d+)\.g1\.e(\d+)a(\d+)\.json", new["key"])
        assert found_key is not None, new["key"]
        assert found_key.group(2, 3) == (head["epoch"], head["attempt"])
        assert int(found_key.group(1)) == 0

    # Past the grace, vacuum leaves what the log names; verify and cat agree.
    time.sleep(2.5)
    monkeypatch.setenv("KAFKA_ARCHIVE_LOG_VACUUM_GRACE_SECONDS", "1")
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert set(data_keys(s3_client, bkt)) == {new["key"]}
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, out + err
    cat = ("--from", f"{bkt}:arch", "--topic", name, "--partition", "0", "--offset", "3")
    code, out, err = cli(
        capsys, "cat", *cat, "--count", "4", "--kcql", kcql, "--endpoint-url", s3_endpoint
    )
    assert code == 0, err
    assert [json.loads(line)["offset"] for line in out.splitlines()] == [3, 4, 5, 6]

"""What the maintenance tests share: objects read back by independent readers (boto3 +
json, fastavro, pyarrow, csv), the objects as a commit would name them, the scratch prefix."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import io
import json
import re
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.plan.maintenance import CommittedObject
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.write.rewrite import Rewritten
from kafka_archive.kcql.plan import Route, Target

SUFFIX = "-c1"
_FIRST = re.compile(r"/(\d{12})(?:-c1)?\.[a-z]+(?:\.gz)?$")


def rows_of(fmt: str, key: str, body: bytes) -> list[Any]:
    """The rows of one object, read by an independent reader."""
    data = gzip.decompress(body) if key.endswith(".gz") else body
    if fmt == "JSON":
        return [json.loads(line) for line in data.decode().splitlines()]
    if fmt == "AVRO":
        return list(fastavro.reader(io.BytesIO(data)))
    if fmt == "PARQUET":
        return pq.read_table(pa.BufferReader(data)).to_pylist()
    rows = list(csv.reader(io.StringIO(data.decode(), newline="")))
    return rows  # CSV_WITHHEADERS: the header row first, kept: it must be rewritten too


def objects_under(s3: Any, bucket: str, prefix: str) -> list[tuple[str, bytes]]:
    """Every data object under ``prefix`` (not the runtime's own, nor block indexes), by key."""
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            key = item["Key"]
            if "/.kafka-archive/" in key or key.endswith(".index.json"):
                continue
            out.append((key, s3.get_object(Bucket=bucket, Key=key)["Body"].read()))
    return sorted(out)


def first_of(key: str) -> int:
    found = _FIRST.search(key)
    assert found is not None, key
    return int(found.group(1))


def committed(
    fmt: str, listed: list[tuple[str, bytes]], enveloped: bool
) -> tuple[list[CommittedObject], dict[str, list[Any]]]:
    """The objects as their commit names them (offsets from the stored metadata, or the key
    and the row count), and each object's rows, all by the independent readers."""
    objs, rows = [], {}
    for key, body in listed:
        found = rows_of(fmt, key, body)
        data = found[1:] if fmt == "CSV_WITHHEADERS" else found
        first = first_of(key)
        if enveloped:
            offsets = [int(r["metadata"]["offset"]) for r in data]
            times = [int(r["metadata"]["timestamp"]) for r in data]
            assert offsets[0] == first
            obj = CommittedObject(
                key, first, offsets[-1], len(data), len(body), (), None, min(times), max(times)
            )
        else:
            obj = CommittedObject(key, first, first + len(data) - 1, len(data), len(body))
        objs.append(obj)
        rows[key] = data
    return objs, rows


def scratch(route: Route) -> Route:
    return dataclasses.replace(route, target=Target(route.target.bucket, "scratch"))


def store_of(endpoint: str) -> S3Store:
    return S3Store(S3Settings(endpoint_url=endpoint, region="us-east-1"))


def check_named(s3: Any, bucket: str, result: Rewritten, fmt: str) -> None:
    """Each new object is what the result says: its key names its first offset with the
    suffix, its size and checksum are the stored bytes'."""
    for new in result.objects:
        body = s3.get_object(Bucket=bucket, Key=new.key)["Body"].read()
        assert new.key.startswith("scratch/") and first_of(new.key) == new.first
        assert SUFFIX in new.key
        assert new.size == len(body)
        assert new.checksum == hashlib.sha256(body).hexdigest()[:32]
        stored = rows_of(fmt, new.key, body)
        assert len(stored) - (fmt == "CSV_WITHHEADERS") == new.records

"""The conditional-write probe covers every conditional request the protocol sends, not only
PutObject: a store that honours If-None-Match on PUT but ignores it on
CompleteMultipartUpload (older moto, LocalStack, some gateways) would let a stale run's
object of 16 MiB or more replace a committed one. Such a store is refused (exit 19) with
one line naming the request it does not honour."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import archived_ids, process_env, run_command
from faultproxy import FaultProxy

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.store.s3 import ConditionalWritesIgnored, S3Store

pytestmark = pytest.mark.integration


def _completions_only(method: str, path: str, headers: dict[str, str]) -> set[str]:
    """If-None-Match removed from CompleteMultipartUpload (POST ...?uploadId=) alone."""
    return {"if-none-match"} if method == "POST" and "uploadId=" in path else set()


def _deletes_only(method: str, path: str, headers: dict[str, str]) -> set[str]:
    return {"if-match"} if method == "DELETE" else set()


@pytest.mark.parametrize(
    ("strip", "request_named"),
    [
        (_completions_only, "If-None-Match on CompleteMultipartUpload"),
        (_deletes_only, "If-Match on DeleteObject"),
    ],
    ids=["complete-multipart", "delete"],
)
def test_a_store_that_ignores_one_conditional_request_is_refused(
    strip: Callable[[str, str, dict[str, str]], set[str]],
    request_named: str,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    produce(name, 100, partitions=1)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name}"
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.strip_when = strip
        refused = subprocess.run(
            run_command(kcql, broker, proxy.url),
            env=process_env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert refused.returncode == 19, refused.stderr
    lines = [line for line in refused.stderr.splitlines() if request_named in line]
    assert lines and "does not honour conditional writes" in lines[0], refused.stderr
    assert "Traceback" not in refused.stderr
    assert archived_ids(s3_client, bkt) == []
    left = s3_client.list_objects_v2(Bucket=bkt).get("Contents", [])
    assert left == [], "the probe left its object behind"
    uploads = s3_client.list_multipart_uploads(Bucket=bkt).get("Uploads", [])
    assert uploads == [], "the probe left its multipart upload open"


def test_a_store_that_honours_every_conditional_request_passes_the_probe(
    s3_endpoint: str, s3_client: Any, bucket: Callable[..., str]
) -> None:
    """moto honours them all: the probe passes and leaves nothing behind."""
    bkt = bucket()
    store = S3Store(S3Settings(endpoint_url=s3_endpoint, region="us-east-1"))
    store.probe_conditional_writes(bkt, "arch/.kafka-archive/probe-x.json")
    assert s3_client.list_objects_v2(Bucket=bkt).get("Contents", []) == []
    assert s3_client.list_multipart_uploads(Bucket=bkt).get("Uploads", []) == []
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.strip_when = _completions_only
        stripped = S3Store(S3Settings(endpoint_url=proxy.url, region="us-east-1"))
        with pytest.raises(ConditionalWritesIgnored, match="CompleteMultipartUpload"):
            stripped.probe_conditional_writes(bkt, "arch/.kafka-archive/probe-y.json")

"""The commit protocol's writers (`protocol.writer.Writer`) against real S3 (moto, SeaweedFS)
through the adapter they will run on (`protocol.s3.BucketStore`), in threads: real
interleavings of real requests, not the simulation's.

Three writers share a target: A claims and is then held (its Source blocks) until another
writer has claimed over it; B and C start together and race for claims and entries. The archive
is then read back by hand (boto3 + json: the log's entries folded by ``commit_log_reader``, the
objects' bodies read), never by the protocol's own decoding: every offset below each
partition's committed end is in exactly one committed object, every commit comes from the
holder of the newest claim on its partitions (A, stale, never committed), and after a vacuum
the objects under the prefix are exactly the committed ones. S3 requests are counted by a proxy
in front of the endpoint (tests/integration/faultproxy.py), by type.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from commit_log_reader import CommitLog, read_log
from faultproxy import FaultProxy

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.protocol.log import PartitionRef, entry_key
from kafka_archive.archiver.protocol.s3 import BucketStore
from kafka_archive.archiver.protocol.simworld import Kafka
from kafka_archive.archiver.protocol.steps import drive
from kafka_archive.archiver.protocol.store import Ambiguous, PreconditionFailed
from kafka_archive.archiver.protocol.writer import Writer
from kafka_archive.archiver.store.s3 import S3Store

pytestmark = [pytest.mark.integration, pytest.mark.every_s3]

PREFIX = "arch"
LOG = f"{PREFIX}/.kafka-archive/log/"


@dataclass
class Source(Kafka):
    """The simulation's source (objects of 2 records under PREFIX). `hold`: the first cut
    waits until it is set (a writer paused after its claim, before it writes anything)."""

    size: int = 2
    prefix: str = PREFIX
    hold: threading.Event | None = None
    cuts: int = 0

    def cut(self, ref: PartitionRef, first: int, high: int) -> tuple[str, int, bytes]:
        self.cuts += 1
        if self.hold is not None:
            assert self.hold.wait(timeout=120), "the held writer was never released"
        return super().cut(ref, first, high)


def requests_by_type(proxy: FaultProxy) -> Counter[str]:
    counts: Counter[str] = Counter()
    for method, path, _ in proxy.requests:
        query = urlsplit(path).query
        listing = "list-type" in query or "uploads" in query.split("&")  # keys, or uploads
        counts["LIST" if method == "GET" and listing else method] += 1
    return counts


def check_archive(s3: Any, bucket: str, highs: dict[PartitionRef, int]) -> CommitLog:
    """Every offset below each committed end in exactly one committed object; all archived."""
    log = read_log(s3, bucket, PREFIX)
    for ref, high in highs.items():
        tp = (ref.topic, ref.partition)
        assert log.ends.get(tp) == high, f"{tp}: committed to {log.ends.get(tp)}, not {high}"
        offsets: list[int] = []
        for key in (o["key"] for o in log.objects[tp]):
            doc = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
            assert doc["partition"] == ref.partition
            offsets.extend(doc["offsets"])
        assert offsets == list(range(high)), f"{tp}: offsets not each exactly once"
    return log


def data_keys(s3: Any, bucket: str) -> set[str]:
    keys: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{PREFIX}/"):
        keys.update(o["Key"] for o in page.get("Contents", []) if not o["Key"].startswith(LOG))
    return keys


def conditional_writes(method: str, path: str, headers: dict[str, str]) -> bool:
    return method in ("PUT", "DELETE") and any(
        h.lower() in ("if-match", "if-none-match") for h in headers
    )


@pytest.fixture
def proxied(s3_endpoint: str, s3_implementation: str) -> Iterator[tuple[FaultProxy, S3Store]]:
    """The counting proxy in front of the endpoint; on moto it forwards conditional writes one
    at a time (moto's conditions are not atomic: test_commit_log_store_contract.py)."""
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        if s3_implementation == "moto":
            proxy.serialize = conditional_writes
        yield proxy, S3Store(S3Settings(endpoint_url=proxy.url, region="us-east-1"))


REFS = [PartitionRef("r", "t", p) for p in range(3)]


def run(writer: Writer, store: BucketStore) -> Callable[[], str]:
    """`writer`'s session started in a thread; the returned call joins it (its outcome)."""
    result: list[object] = []

    def target() -> None:
        try:
            result.append(drive(writer.session(), store))
        except BaseException as exc:  # reported by the join
            result.append(exc)

    thread = threading.Thread(target=target, name=writer.run_id, daemon=True)
    thread.start()

    def join() -> str:
        thread.join(timeout=300)
        assert result, f"{writer.run_id} did not finish"
        if isinstance(result[0], BaseException):
            raise result[0]
        return str(result[0])

    return join


def wait_for(s3: Any, bucket: str, key: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            s3.head_object(Bucket=bucket, Key=key)
            return
        except s3.exceptions.ClientError:
            time.sleep(0.05)
    raise AssertionError(f"{key} never appeared")


def test_concurrent_writers_commit_each_offset_once_and_a_stale_one_never(
    s3_client: Any, bucket: Callable[[], str], proxied: tuple[FaultProxy, S3Store]
) -> None:
    proxy, s3store = proxied
    bkt = bucket()
    store = BucketStore(s3store, bkt)
    highs = dict.fromkeys(REFS, 40)

    def writer(name: str, source: Source, grace: float = 3600.0) -> Writer:
        return Writer(
            PREFIX,
            f"{name}-{uuid.uuid4().hex[:6]}",
            REFS,
            source,
            clock=time.time,
            batch_objects=5,
            grace=grace,
        )

    held = threading.Event()
    a = writer("a", Source(highs, hold=held))
    join_a = run(a, store)
    wait_for(s3_client, bkt, entry_key(PREFIX, 1))  # A's claim
    b, c = writer("b", Source(highs)), writer("c", Source(highs))
    joins = [run(b, store), run(c, store)]
    wait_for(s3_client, bkt, entry_key(PREFIX, 2))  # a claim over A's
    held.set()  # A resumes past it, on its stale view
    outcomes = {w.run_id: j() for w, j in [(a, join_a), (b, joins[0]), (c, joins[1])]}
    assert outcomes[a.run_id] == "fenced"
    assert "done" in outcomes.values()
    concurrent = requests_by_type(proxy)

    log = check_archive(s3_client, bkt, highs)
    assert a.run_id not in log.committers, "the stale writer committed"
    named = log.named()

    # A new run finds nothing to write; its vacuum (no grace) removes what fenced writers
    # left: the listing is then exactly the committed objects.
    d = writer("d", Source(highs), grace=0.0)
    assert drive(d.session(), store) == "done"
    assert data_keys(s3_client, bkt) == named
    assert check_archive(s3_client, bkt, highs).objects == log.objects
    print(
        f"\nconcurrent writers: {outcomes}; {len(log.entries)} entries, {len(named)} objects, "
        f"requests {dict(concurrent)} = {concurrent.total() / len(named):.2f}/object"
    )


@pytest.mark.parametrize(("partitions", "per_commit"), [(3, 15), (1, 5)], ids=["15", "5"])
def test_requests_per_object_of_one_writer(
    partitions: int,
    per_commit: int,
    s3_client: Any,
    bucket: Callable[[], str],
    proxied: tuple[FaultProxy, S3Store],
) -> None:
    """One writer's session from an empty log to the end, `per_commit` objects a commit.
    Each object is one PUT, each commit one entry PUT, every 10th entry a checkpoint PUT;
    once a session, a claim and 5 reads (the checkpoints listed, the first entry absent, the
    open uploads listed; for the vacuum the next entry absent and the prefix listed). At most
    1.2 S3 requests per object, session included, from 6 objects a commit; at 5 the entry
    alone makes 6 requests for 5 objects (1.2), with the checkpoint 1.22 (the design's
    figure)."""
    proxy, s3store = proxied
    bkt = bucket()
    refs = REFS[:partitions]
    highs = dict.fromkeys(refs, 120)
    w = Writer(
        PREFIX,
        f"w-{uuid.uuid4().hex[:6]}",
        refs,
        Source(highs),
        clock=time.time,
        batch_objects=per_commit // partitions,
    )
    assert drive(w.session(), BucketStore(s3store, bkt)) == "done"
    counts = requests_by_type(proxy)
    log = check_archive(s3_client, bkt, highs)
    objects = sum(len(v) for v in log.objects.values())
    entries = len(log.entries)
    ratio = counts.total() / objects
    print(f"\n{per_commit}/commit: {objects} objects, {dict(counts)}: {ratio:.3f}/object")
    assert objects == partitions * 60 and entries == 1 + objects // per_commit
    assert counts == {"PUT": objects + entries + entries // 10, "GET": 2, "LIST": 3}
    session = 1 + 5  # the claim and the reads, once a session
    assert (counts.total() - session) / objects <= (per_commit + 1 + 1 / 10) / per_commit
    if per_commit >= 6:
        assert ratio <= 1.2


def test_a_create_whose_answer_is_lost_is_ours_after_botocores_retry(
    s3_client: Any, bucket: Callable[[], str], proxied: tuple[FaultProxy, S3Store]
) -> None:
    """The entry lands, its answer is lost (the proxy hangs up after S3 applied it);
    botocore retries, S3 refuses the retry (412) for our own entry. The adapter answers
    created, with the entry's ETag, not "taken"; a lost answer to a delete is Ambiguous."""
    proxy, s3store = proxied
    bkt = bucket()
    store = BucketStore(s3store, bkt)
    key, body = entry_key(PREFIX, 1), b'{"seq":1}'
    dropped: list[str] = []

    def once(method: str, path: str, headers: dict[str, str]) -> bool:
        if method in ("PUT", "DELETE") and not dropped:
            dropped.append(method)
            return True
        return False

    proxy.drop_response = once
    etag = store.put(key, body, {"writer": "w"}, if_none_match=True)
    assert proxy.dropped == 1
    head = s3_client.head_object(Bucket=bkt, Key=key)
    assert etag == head["ETag"] and head["Metadata"] == {"writer": "w"}
    sent = [(m, p) for m, p, _ in proxy.requests if urlsplit(p).path.endswith(key)]
    assert [m for m, _ in sent] == ["PUT", "PUT", "GET"]  # created, refused for itself, read

    with pytest.raises(PreconditionFailed):  # another writer's create: taken, no read
        store.put(key, b"other", {"writer": "v"}, if_none_match=True)
    dropped.clear()
    with pytest.raises(Ambiguous):
        store.delete(key, if_match=etag)
    assert "Contents" not in s3_client.list_objects_v2(Bucket=bkt)

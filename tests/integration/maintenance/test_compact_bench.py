"""Compaction's cost on a 1,000-object input a real `run` made (make test-full): throughput in
MB/s and S3 requests per object compacted, printed for bench/RESULTS.md, with the Python
memory the rewrite held at its peak; the result read back by an independent reader. The case
and the figures are testbed/compaction_bench.py's, which `make bench BENCH_SHAPE=compact`
measures on the `compact` command as a whole."""

from __future__ import annotations

import concurrent.futures
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from archive_helpers import cli, run_args
from maintenance_helpers import SUFFIX, committed, objects_under, scratch, store_of

from compaction_bench import OBJECTS, PER_OBJECT, Figures, statement, value
from kafka_archive import kcql
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.plan.maintenance import Compact, plan
from kafka_archive.archiver.write.rewrite import READ_AHEAD, rewrite

pytestmark = [pytest.mark.integration, pytest.mark.full]


@pytest.mark.parametrize("fmt", ["JSON", "PARQUET"])
def test_compact_a_thousand_objects(
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
    count = OBJECTS * PER_OBJECT
    produce(name, count, partitions=1, value=value)
    text = statement(bkt, name, fmt)
    code, _, err = cli(capsys, *run_args(text, broker, s3_endpoint))
    assert code == 0, err
    route = kcql.parse(text).routes[0]
    listed = objects_under(s3_client, bkt, "arch/")
    assert len(listed) == OBJECTS
    objs, _ = committed(fmt, listed, enveloped=False)
    (group,) = plan(objs, Compact()).rewrites  # 128 MB: one object
    store = store_of(s3_endpoint)
    # The ceiling: the same 1,000 GETs alone, as many at once as the rewrite sends.
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(READ_AHEAD) as pool:
        list(pool.map(lambda o: store.get_bytes(bkt, o.key), group.objects))
    ceiling = time.perf_counter() - started
    store.requests.reset()
    tp = TopicPartition(name, 0)
    started, cpu = time.perf_counter(), time.process_time()
    result = rewrite(store, scratch(route), tp, (), group.objects, suffix=SUFFIX)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    sent = store.requests.read().by_type()
    # Again, under another suffix, for the memory the rewrite holds (tracemalloc slows it).
    tracemalloc.start()
    rewrite(store, scratch(route), tp, (), group.objects, suffix="-m1")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    (new,) = result.objects
    body = s3_client.get_object(Bucket=bkt, Key=new.key)["Body"].read()
    if fmt == "JSON":
        ids = [json.loads(line)["id"] for line in body.decode().splitlines()]
    else:
        ids = pq.read_table(pa.BufferReader(body)).column("id").to_pylist()
    assert ids == list(range(count))
    figures = Figures(fmt, OBJECTS, result.bytes_read, new.size, seconds, sent)
    with capsys.disabled():
        print(
            f"\n{figures.line()} ({cpu:.2f} CPU s of this process); Python peak"
            f" {peak / 1e6:.1f} MB; the GETs alone {ceiling:.2f} s"
        )
    assert sent["GET"] == OBJECTS and sent["PUT"] <= 4  # one read each, one object created
    assert peak < 64e6  # records stream through: far below the group's 10 MB x Python's cost

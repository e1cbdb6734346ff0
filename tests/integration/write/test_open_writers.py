"""Bounded open writers per task: PARTITIONBY with twice as many distinct values as the
file descriptor limit (2,048 under ``ulimit -n 1024``: a whole `kafka-archive run` process,
JVM and Python workers inheriting the limit) archives every record exactly once, and the
workers' peak memory stays close to a run with 10 values. Without the bound the same run
fails with one line (exit 20). And a writer rolled early keeps the commit cut exact."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, archived_ids, run_args

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.model import TopicPartition, WorkUnit
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.write.chunks import ChunkSet
from kafka_archive.kcql import parse

pytestmark = pytest.mark.integration

LIMIT = 1024  # ulimit -n of the runs: Spark's JVM opens its ~280 jars under it too
RECORDS = 2 * LIMIT  # each its own value: twice as many open objects as descriptors


def keyed(values: int) -> Callable[[int], dict[str, Any]]:
    """Values {"id": i, "k": i % values}."""
    return lambda i: {"id": i, "k": i % values}


def _limit_open_files() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


class WorkerMemory:
    """Peak resident memory of the Python processes (the Spark workers, not the driver)
    under a process session, sampled from /proc."""

    def __init__(self, session: int) -> None:
        self.session = session
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> WorkerMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit() or int(entry.name) == self.session:
                    continue
                try:
                    stat = Path(entry.path, "stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[3]) != self.session:
                        continue  # fields after the name: state ppid pgrp session
                    cmdline = Path(entry.path, "cmdline").read_bytes()
                    status = Path(entry.path, "status").read_text()
                except (OSError, IndexError, ValueError):
                    continue
                if b"java" in cmdline.split(b"\0")[0]:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_kib = max(self.peak_kib, int(line.split()[1]))
            self._stop.wait(0.2)


def run_limited(
    broker: str, endpoint: str, kcql: str, tmp_path: Path, **env: str
) -> tuple[subprocess.CompletedProcess[str], int, float]:
    command = [
        KAFKA_ARCHIVE,
        *run_args(kcql, broker, endpoint),
        "--master",
        "local[1]",
    ]
    environ = {**os.environ, **env}
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_limit_open_files,
    )
    with WorkerMemory(process.pid) as memory:
        try:
            out, err = process.communicate(timeout=1200)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, 9)
    done = subprocess.CompletedProcess(command, process.returncode, out, err)
    return done, memory.peak_kib, time.monotonic() - started


def test_twice_the_fd_limit_of_values_under_ulimit_1024_memory_flat_and_exactly_once(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    tmp_path: Path,
) -> None:
    figures = {}
    for values in (10, RECORDS):
        name, bkt = topic(partitions=1), bucket()
        produce(name, RECORDS, partitions=1, value=keyed(values))
        kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PARTITIONBY k"
        done, peak_kib, seconds = run_limited(broker, s3_endpoint, kcql, tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert archived_ids(s3_client, bkt) == list(range(RECORDS))
        figures[values] = (peak_kib, seconds)
    with open(os.environ.get("OPEN_WRITERS_FIGURES", os.devnull), "a") as out:
        print(f"distinct values -> (worker peak RSS KiB, seconds): {figures}", file=out)
    ten, many = figures[10][0], figures[RECORDS][0]
    assert ten > 0 and many > 0
    # Flat in the open writers: what 2,048 objects add is their bookkeeping until the unit
    # commits (a key and an ObjectWritten each: 10,000 measured +8 to +13 MB), not 2,048
    # writers' buffers (each holds a 64 KiB spool buffer and its encoder's: ~200 MB). The
    # bound is absolute: the workers' base shrank to ~86 MB (it was ~120), so a ratio
    # would move with it.
    assert many - ten <= 20 * 1024, figures


def test_without_the_bound_the_same_run_fails_in_one_line(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    tmp_path: Path,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    produce(name, RECORDS, partitions=1, value=keyed(RECORDS))
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PARTITIONBY k"
    done, _, _ = run_limited(
        broker, s3_endpoint, kcql, tmp_path, KAFKA_ARCHIVE_MAX_OPEN_WRITERS="100000"
    )
    assert done.returncode == 20, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "cannot take another open file (too many open files) (EMFILE)" in last, last
    assert "Traceback" not in done.stderr


def test_a_writer_rolled_early_keeps_the_commit_cut_exact(
    s3_endpoint: str, s3_client: Any, bucket: Callable[..., str], tmp_path: Path
) -> None:
    """Three groups a, b, c with at most two open: a is rolled early when c opens. At the
    end the young objects are held back: the cut lies after every uploaded object and
    before every held-back one, so [start, cut) is archived exactly once."""
    bkt = bucket()
    route = parse(f"INSERT INTO {bkt}:arch SELECT * FROM t PARTITIONBY k").routes[0]
    unit = WorkUnit(
        route_index=0,
        route=route,
        tp=TopicPartition("t", 0),
        start=0,
        stop=6,
        run_id="r",
        job="j",
        group="g",
    )
    store = S3Store(S3Settings(endpoint_url=s3_endpoint, region="us-east-1"))
    chunks = ChunkSet(unit, store, str(tmp_path), max_open=2)
    old, young = 1_000, 10_000
    for offset, (k, ts) in enumerate(
        [("a", old), ("b", old), ("c", young), ("b", old), ("c", young), ("a", young)]
    ):
        chunks.add(Record("t", 0, offset, ts, None, json.dumps({"k": k}).encode(), ()))
    # c (offset 2) evicted a (offset 0); the second a (offset 5) evicted b (offsets 1, 3).
    # Evicted objects are closed and wait to be marked and uploaded together.
    assert chunks.lifecycle.uploaded() == ()
    cut = chunks.finish(6, young_after_ms=5_000)
    # Open at the end: c [2, 4] and a [5, 5], both young. c cannot be held back (b, already
    # rolled, ends at 3 > 2): it is flushed and a held back, so the cut is 5.
    assert cut == 5
    uploaded = [(o.first_offset, o.last_offset) for o in chunks.lifecycle.uploaded()]
    assert uploaded == [(0, 0), (1, 3), (2, 4)]
    assert all(last < cut for _, last in uploaded), (uploaded, cut)
    # Offsets 0..4 in the uploaded objects, each once (a: 0; b: 1, 3; c: 2, 4), 5 held back.
    assert sum(o.records for o in chunks.lifecycle.uploaded()) == cut
    stored = {o["Key"] for o in s3_client.list_objects_v2(Bucket=bkt)["Contents"]}
    assert {o.key for o in chunks.lifecycle.uploaded()} <= stored

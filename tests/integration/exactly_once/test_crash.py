"""The crash test: `kafka-archive run` as a subprocess, SIGKILLed (with its Spark JVM and
Python workers) in every phase of a run in turn — preflight, taking the lease, fencing,
Spark starting and reading, writing an intent marker, mid-upload, between the uploads and
the commit, between two commits, clearing the markers, releasing the lease — then run to
completion; after every trial an independent reader (plain boto3 + json) finds every
produced record exactly once and nothing else.

A kill is placed by the run's own requests, not by the clock: the run writes to S3 through a
proxy (:class:`faultproxy.FaultProxy`) that SIGKILLs the process group when the trial's
request arrives, before forwarding it; which upload, and when in Spark's start-up, is
seeded. What each kill left is read back from S3 (:func:`phase_of`), and every phase of a run
must have been interrupted by some trial, whatever the machine's load.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, run_args
from faultproxy import FaultProxy

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

PER_TRIAL = 3000
PARTITIONS = 3
FLUSH = 50  # objects of a trial: PER_TRIAL // FLUSH
ROOT = "arch/.kafka-archive/"
# What a run has written when it dies, in order (:func:`phase_of`).
PHASES = (
    "start-up",  # nothing: preflight, or the lease not yet taken
    "leased",  # the lease taken, no partition fenced: planning
    "fenced",  # partitions fenced with the run's epoch, no intent marker: Spark, reads
    "marked",  # an intent marker out, none of its objects uploaded
    "uploaded",  # objects uploaded beside their markers, not committed
    "committed",  # a partition's state advanced; the run not finished
    "finished",  # every partition committed to the end and the markers cleared
)


class Killed(Exception):
    """Raised in the proxy's handler: the request is never forwarded."""


@dataclass
class KillPoint:
    """Where a trial kills: at the ``nth`` request of ``kind`` (:func:`Requests.kind_of`), or
    ``delay`` seconds after the last partition was fenced (Spark starting, tasks reading), at
    the latest at the first marker (a fast machine: before any upload all the same)."""

    name: str
    kind: str = ""
    nth: int = 1
    delay: float | None = None


def schedule(rng: random.Random) -> list[KillPoint]:
    """One trial per kill point, the seeded ones drawn from ``rng``."""
    return [
        KillPoint("preflight", "any"),
        KillPoint("taking the lease", "lease"),
        KillPoint("fencing", "state"),
        KillPoint("spark", delay=rng.uniform(0.0, 1.5)),
        KillPoint("writing the marker", "marker"),
        KillPoint("first upload", "data"),
        KillPoint("mid-upload", "data", rng.randint(2, PER_TRIAL // FLUSH)),
        KillPoint("before the commit", "commit"),
        KillPoint("between commits", "commit", 2),
        KillPoint("clearing the markers", "clear"),
        KillPoint("releasing the lease", "release"),
    ]


class Requests:
    """Counts the run's requests by kind; a data PUT, a marker and a commit are told apart by
    key, a fence from a commit by whether a marker was written before."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def kind_of(self, method: str, path: str) -> str:
        key = path.split("?", 1)[0].split("/", 2)[-1]  # path style: /bucket/key
        marked = self.seen.get("marker", 0) > 0
        if method == "POST" and "delete" in path.split("?", 1)[-1]:
            return "clear"
        if method != "PUT":
            return "other"
        if not key.startswith(ROOT):
            return "data"
        if key.startswith(f"{ROOT}pending/"):
            return "marker"
        if key.startswith(f"{ROOT}state/"):
            return "commit" if marked else "state"
        if key == f"{ROOT}lock.json":
            return "release" if self.seen.get("clear") else "lease"
        return "other"

    def count(self, method: str, path: str) -> tuple[str, int]:
        kind = self.kind_of(method, path)
        self.seen[kind] = self.seen.get(kind, 0) + 1
        self.seen["any"] = self.seen.get("any", 0) + 1
        return kind, self.seen[kind]


@dataclass
class Snapshot:
    """What a run has written under the target, from one listing (states read on change)."""

    lock: str | None = None  # the lease's ETag
    states: dict[str, tuple[int, int]] = field(default_factory=dict)  # key: (epoch, next)
    markers: int = 0
    data: int = 0


class Watcher:
    """Lists the archive and reads the states that changed (boto3 and json only)."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self.s3, self.bucket = s3, bucket
        self._states: dict[str, tuple[str, tuple[int, int]]] = {}  # key: (etag, state)

    def snapshot(self) -> Snapshot:
        snap = Snapshot()
        for page in self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix="arch/"
        ):
            for item in page.get("Contents", []):
                key, etag = item["Key"], item["ETag"]
                if not key.startswith(ROOT):
                    snap.data += 1
                elif key == f"{ROOT}lock.json":
                    snap.lock = etag
                elif key.startswith(f"{ROOT}pending/"):
                    snap.markers += 1
                elif key.startswith(f"{ROOT}state/"):
                    snap.states[key] = self._state(key, etag)
        return snap

    def _state(self, key: str, etag: str) -> tuple[int, int]:
        known = self._states.get(key)
        if known is None or known[0] != etag:
            body = json.loads(self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read())
            known = (etag, (int(body["epoch"]), int(body["next_offset"])))
            self._states[key] = known
        return known[1]


def phase_of(before: Snapshot, now: Snapshot, produced: int) -> str:
    """The last phase the run reached, by what it wrote since ``before``."""
    ends = [n for _, n in now.states.values()]
    if ends == [produced // PARTITIONS] * PARTITIONS and not now.markers:
        return "finished"
    if any(now.states[k][1] > before.states.get(k, (0, 0))[1] for k in now.states):
        return "committed"
    if now.markers and now.data > before.data:
        return "uploaded"
    if now.markers:
        return "marked"
    epoch = max((e for e, _ in before.states.values()), default=0)
    if any(e > epoch for e, _ in now.states.values()):
        return "fenced"
    if now.lock != before.lock:
        return "leased"
    return "start-up"


def ids_of(s3: Any, bucket: str, bodies: dict[tuple[str, str], bytes]) -> list[int]:
    """Every record id in the data objects (bodies cached by key and ETag across trials)."""
    ids: list[int] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="arch/"):
        for item in page.get("Contents", []):
            if item["Key"].startswith(ROOT):
                continue
            known = (item["Key"], item["ETag"])
            if known not in bodies:
                bodies[known] = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            ids.extend(json.loads(line)["id"] for line in bodies[known].splitlines())
    return ids


class Trial:
    """One run through the proxy, killed at ``point``."""

    def __init__(self, point: KillPoint, command: list[str], env: dict[str, str]) -> None:
        self.point, self.requests = point, Requests()
        self.killed = threading.Event()
        self._timer: threading.Timer | None = None
        self.process = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def kill(self) -> None:
        if not self.killed.is_set():
            self.killed.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def on_request(self, method: str, path: str, headers: dict[str, str]) -> bool:
        if self.killed.is_set():
            raise Killed(path)
        kind, nth = self.requests.count(method, path)
        point = self.point
        if point.delay is not None and kind == "state" and nth == PARTITIONS:
            self._timer = threading.Timer(point.delay, self.kill)
            self._timer.start()
        if (
            (kind, nth) == (point.kind, point.nth)
            or (point.kind == "any" and nth == 1)
            or (point.delay is not None and kind == "marker")
        ):
            self.kill()
            raise Killed(path)
        return False

    def wait(self) -> None:
        try:
            self.process.wait(timeout=600)
        finally:
            if self._timer is not None:
                self._timer.cancel()
            with contextlib.suppress(ProcessLookupError):  # what the kill left of the group
                os.killpg(self.process.pid, signal.SIGKILL)


def test_sigkill_in_every_phase_of_a_run_never_loses_or_duplicates_a_record(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    rng = random.Random(20261123)
    name, bkt = topic(partitions=PARTITIONS), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = {FLUSH}"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    watcher, bodies = Watcher(s3_client, bkt), dict[tuple[str, str], bytes]()
    produced = 0
    hit: list[tuple[str, str]] = []  # (the kill point, the phase it interrupted)
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        command = [KAFKA_ARCHIVE, *run_args(kcql, broker, proxy.url), "--master", "local[2]"]
        for point in schedule(rng):
            produce(name, PER_TRIAL, first=produced, partitions=PARTITIONS)
            produced += PER_TRIAL
            before = watcher.snapshot()
            trial = Trial(point, command, env)
            proxy.drop_response = trial.on_request
            trial.wait()
            assert trial.killed.is_set(), f"{point}: the run ended before its kill point"
            hit.append((point.name, phase_of(before, watcher.snapshot(), produced)))

            code = main(run_args(kcql, broker, s3_endpoint))
            assert code == 0, (hit[-1], capsys.readouterr().err)
            capsys.readouterr()
            ids = ids_of(s3_client, bkt, bodies)
            assert len(ids) == len(set(ids)), f"{hit[-1]}: duplicates"
            assert sorted(ids) == list(range(produced)), f"{hit[-1]}: records missing or extra"
            assert watcher.snapshot().markers == 0, f"{hit[-1]}: markers left after a clean run"
    with capsys.disabled():
        print(f"\ncrash trials (kill point, phase interrupted): {hit}")
    # Every phase interrupted by some kill: the schedule covers what it says it covers.
    missed = set(PHASES) - {phase for _, phase in hit}
    assert not missed, f"no kill landed in {sorted(missed)}: {hit}"

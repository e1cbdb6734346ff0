"""A straggler in a follow session: a task attempt of an earlier batch (a speculative copy, or
an attempt on an executor the scheduler gave up on) still running while a later batch
archives the same partition. It belongs to the same run, epoch and lease as the session, so
the lease cannot stop it; what it planned from must.

Apache Kafka, moto's S3 server behind two of our proxies (the session's and the
straggler's, each holding chosen requests), real Spark; the archive is read with boto3 +
json."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from archive_helpers import archived_ids
from faultproxy import FaultProxy

from kafka_archive.archiver.commands import session
from kafka_archive.archiver.config.load import load_settings
from kafka_archive.archiver.core.errors import ArchiveError
from kafka_archive.archiver.core.model import UnitResult, WorkUnit
from kafka_archive.archiver.spark import driver
from kafka_archive.archiver.spark.progress import NullProgress
from kafka_archive.archiver.write.task import UnitFailure, archive_unit
from kafka_archive.kcql import parse

pytestmark = pytest.mark.integration

DAYS_AGO = int(time.time() * 1000) - 3 * 86_400_000  # old records: no tail is held back
WAIT = 60.0


class _Holds:
    """A proxy's ``drop_response`` hook: requests it picks wait for an event (then go on),
    or are applied with their responses lost (``lose``)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.lose_markers = False
        self.hold_data = threading.Event()  # set: data PUTs wait for ``data_go``
        self.data_go = threading.Event()
        self.data_held = threading.Event()
        self.hold_commit = threading.Event()  # set: state PUTs wait for ``commit_go``
        self.commit_go = threading.Event()
        self.commit_held = threading.Event()
        self.arm_commit_on_data = False  # the first data PUT sets hold_commit
        self.data_puts = 0

    def __call__(self, method: str, path: str, headers: dict[str, str]) -> bool:
        if method != "PUT":
            return False
        if "/.kafka-archive/pending/" in path:
            return self.lose_markers
        if "/.kafka-archive/state/" in path:
            if self.hold_commit.is_set():
                self.commit_held.set()
                self.commit_go.wait(WAIT)
            return False
        if f"/arch/{self.topic}/" in path:
            self.data_puts += 1
            if self.arm_commit_on_data:
                self.hold_commit.set()
            if self.hold_data.is_set():
                self.data_held.set()
                self.data_go.wait(WAIT)
        return False


@contextlib.contextmanager
def _proxy(upstream: str, holds: _Holds) -> Iterator[FaultProxy]:
    with FaultProxy(upstream, rate=0.0, seed=1) as proxy:
        proxy.drop_response = holds
        yield proxy


@dataclasses.dataclass
class _Scene:
    """A follow session whose batch N failed while another attempt of its unit (the
    straggler) is held at its first upload; batch N+1 is started by :meth:`next_batch`."""

    name: str
    bucket: str
    ours: _Holds  # the session's proxy (driver and Spark tasks)
    its: _Holds  # the straggler's
    archiver: session.Session
    produce: Callable[..., None]
    outcome: list[UnitResult | UnitFailure]
    straggler: threading.Thread
    batch_error: list[BaseException] = dataclasses.field(default_factory=list)

    def next_batch(self) -> threading.Thread:
        """Batch N+1 in a thread, once 150 more records arrived: [0, 400)."""
        self.produce(self.name, 150, first=250, partitions=1, timestamp=DAYS_AGO + 250)

        def run() -> None:
            try:
                self.archiver.batch(hold_tails=True).unwrap()
            except BaseException as exc:  # asserted by the test
                self.batch_error.append(exc)

        later = threading.Thread(target=run, daemon=True)
        later.start()
        return later


@contextlib.contextmanager
def _scene(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[_Scene]:
    """Batch N plans partition 0 as [0, 250) (flush.count 100: objects at 0, 100, 200) and
    its attempt fails on S3 (its intent marker's responses lost, every retry); the
    straggler, another attempt of that unit, runs in a thread through its own proxy and is
    held at its first upload (and at its commit, should it get there)."""
    name, bkt = topic(partitions=1), bucket()
    produce(name, 250, partitions=1, timestamp=DAYS_AGO)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.count'=100)"
    ours, its = _Holds(name), _Holds(name)
    with _proxy(s3_endpoint, ours) as proxy, _proxy(s3_endpoint, its) as straggler_proxy:
        flags = {"bootstrap_servers": broker, "endpoint_url": proxy.url}
        settings = load_settings(None, {"KAFKA_ARCHIVE_S3_MAX_ATTEMPTS": "2"}, flags).settings
        settings = dataclasses.replace(settings, master="local[2]")
        elsewhere = dataclasses.replace(
            settings, s3=dataclasses.replace(settings.s3, endpoint_url=straggler_proxy.url)
        )
        planned: list[list[WorkUnit]] = []
        real_map_units = driver.map_units

        def spy(spark: Any, units: Any, *args: Any, **kwargs: Any) -> Any:
            planned.append(list(units))
            return real_map_units(spark, units, *args, **kwargs)

        monkeypatch.setattr(driver, "map_units", spy)
        with session.session(settings, parse(kcql), NullProgress()) as archiver:
            ours.lose_markers = True
            with pytest.raises(ArchiveError):
                archiver.batch(hold_tails=True).unwrap()
            ours.lose_markers = False
            (unit,) = planned[-1]
            assert (unit.start, unit.stop) == (0, 250)

            its.hold_data.set()
            its.hold_commit.set()
            outcome: list[UnitResult | UnitFailure] = []
            straggler = threading.Thread(
                target=lambda: outcome.append(archive_unit(unit, elsewhere)), daemon=True
            )
            straggler.start()
            assert its.data_held.wait(WAIT), "the straggler did not reach its upload"
            scene = _Scene(name, bkt, ours, its, archiver, produce, outcome, straggler)
            try:
                yield scene
            finally:
                for event in (ours.data_go, ours.commit_go, its.data_go, its.commit_go):
                    event.set()
                straggler.join(WAIT)
            archiver.batch(hold_tails=True).unwrap()  # what the next batch repairs


def test_a_straggler_of_a_failed_batch_cannot_replace_what_a_later_batch_commits(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Batch N+1 plans [0, 400) from the state batch N planned from, uploads objects at the
    same keys (0, 100, 200, and 300) and sends its commit (held). The straggler is let go
    before that commit lands: its object at 200 holds [200, 250) only. Before the fix it
    found the later batch's object there, proved nothing but its lease and the state it
    planned from (both unchanged), deleted it and created its own; the later commit then
    covered offsets 250..299 that no object held. It must be refused instead (FencedError),
    and every record is archived exactly once."""
    with _scene(broker, produce, s3_endpoint, topic, bucket, monkeypatch) as scene:
        ours, its = scene.ours, scene.its
        ours.arm_commit_on_data = True
        later = scene.next_batch()
        assert ours.commit_held.wait(WAIT), "the later batch did not reach its commit"
        assert ours.data_puts == 4, "the later batch uploads 0, 100, 200 and 300"
        its.data_go.set()
        deadline = time.monotonic() + WAIT
        while scene.straggler.is_alive() and not its.commit_held.is_set():
            assert time.monotonic() < deadline, "the straggler neither failed nor committed"
            time.sleep(0.1)
        # The later batch's commit lands, then the straggler's (if it sent one).
        ours.arm_commit_on_data = False
        ours.hold_commit.clear()
        ours.commit_go.set()
        later.join(WAIT)
        assert not scene.batch_error, scene.batch_error
        its.commit_go.set()
        scene.straggler.join(WAIT)
    assert archived_ids(s3_client, scene.bucket) == list(range(400)), "every record once"
    assert isinstance(scene.outcome[0], UnitFailure), scene.outcome
    assert scene.outcome[0].failure.kind == "FencedError", scene.outcome


def test_a_later_batch_replaces_what_a_straggler_created_at_its_keys_whole(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other order: the straggler creates its objects (0, 100, and 200 holding
    [200, 250)) after batch N+1 planned, before its uploads. The later batch finds them at
    its keys, proves the partition unchanged since it planned, deletes each and sends its
    own again: whole (an object sent again from memory was empty before the fix, and the
    commit covered 300 records no object held). The straggler's commit is refused."""
    with _scene(broker, produce, s3_endpoint, topic, bucket, monkeypatch) as scene:
        ours, its = scene.ours, scene.its
        ours.hold_data.set()
        later = scene.next_batch()
        assert ours.data_held.wait(WAIT), "the later batch did not reach its upload"
        its.data_go.set()
        assert its.commit_held.wait(WAIT), "the straggler did not reach its commit"
        ours.data_go.set()
        later.join(WAIT)
        assert not scene.batch_error, scene.batch_error
        its.commit_go.set()
        scene.straggler.join(WAIT)
    assert archived_ids(s3_client, scene.bucket) == list(range(400)), "every record once"
    assert isinstance(scene.outcome[0], UnitFailure), scene.outcome

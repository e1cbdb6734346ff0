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

from kafka_archive.archiver import driver, session
from kafka_archive.archiver.errors import ArchiveError
from kafka_archive.archiver.model import UnitResult, WorkUnit
from kafka_archive.archiver.settings import load_settings
from kafka_archive.archiver.task import UnitFailure, archive_unit
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
    """Batch N plans partition 0 as [0, 250) and its attempt fails (its intent marker's
    responses are lost: an S3 error), while another attempt of the same unit (the
    straggler) is held in S3. Batch N+1 plans [0, 400) from the same state, uploads objects
    at the same keys (0, 100, 200 with flush.count 100) and sends its commit. The straggler
    is let go before that commit lands: its object at 200 holds [200, 250) only. Before the
    fix it found the later batch's object there, proved nothing but its lease and the state
    it planned from (both unchanged), deleted it and created its own; the later commit then
    covered offsets 250..299 that no object held. The straggler must be refused instead,
    and every record is archived exactly once."""
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
        with session.session(settings, parse(kcql), driver.NullProgress()) as archiver:
            # Batch N: its attempt fails on S3 (the marker's responses lost, every retry).
            ours.lose_markers = True
            with pytest.raises(ArchiveError):
                archiver.batch(hold_tails=True)
            ours.lose_markers = False
            (unit,) = planned[-1]
            assert (unit.start, unit.stop) == (0, 250)

            # The straggler: another attempt of batch N's unit, held at its first upload.
            its.hold_data.set()
            outcome: list[UnitResult | UnitFailure] = []
            straggler = threading.Thread(
                target=lambda: outcome.append(archive_unit(unit, elsewhere)), daemon=True
            )
            straggler.start()
            assert its.data_held.wait(WAIT), "the straggler did not reach its upload"

            # Batch N+1: [0, 400), its commit held once its objects are uploaded.
            produce(name, 150, first=250, partitions=1, timestamp=DAYS_AGO + 250)
            ours.arm_commit_on_data = True
            batch_error: list[BaseException] = []

            def next_batch() -> None:
                try:
                    archiver.batch(hold_tails=True)
                except BaseException as exc:  # reported below
                    batch_error.append(exc)

            later = threading.Thread(target=next_batch, daemon=True)
            later.start()
            assert ours.commit_held.wait(WAIT), "the later batch did not reach its commit"
            assert ours.data_puts == 4, "the later batch uploads 0, 100, 200 and 300"

            # The straggler goes on (its own commit held, should it get that far) ...
            its.hold_commit.set()
            its.data_go.set()
            deadline = time.monotonic() + WAIT
            while straggler.is_alive() and not its.commit_held.is_set():
                assert time.monotonic() < deadline, "the straggler neither failed nor committed"
                time.sleep(0.1)
            # ... then the later batch's commit lands, then the straggler's.
            ours.hold_commit.clear()
            ours.commit_go.set()
            later.join(WAIT)
            its.commit_go.set()
            straggler.join(WAIT)
            assert not batch_error, batch_error
            ours.arm_commit_on_data = False
            archiver.batch(hold_tails=True)  # what a next batch would repair
    assert archived_ids(s3_client, bkt) == list(range(400)), "every record exactly once"
    assert isinstance(outcome[0], UnitFailure), outcome
    assert outcome[0].error_type == "FencedError", outcome

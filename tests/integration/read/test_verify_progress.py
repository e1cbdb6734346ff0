"""`verify` shows live progress like `run`: one unit per partition, each reporting as its
Spark task compares, and ending done with the offsets, records and objects it read."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from kafka_archive import kcql
from kafka_archive.archiver.commands import api
from kafka_archive.archiver.config.load import load_settings
from kafka_archive.archiver.spark.progress import UnitProgress

pytestmark = pytest.mark.integration


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: list[UnitProgress] = []
        self.updates: list[UnitProgress] = []
        self.ended = 0

    def step(self, message: str) -> None:
        return None

    def units_started(self, units: Sequence[UnitProgress]) -> None:
        self.started = list(units)

    def unit_update(self, update: UnitProgress) -> None:
        with self.lock:
            self.updates.append(update)

    def units_ended(self) -> None:
        self.ended += 1


def test_verify_reports_each_partition_as_it_is_compared(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 40, partitions=2)
    plan = kcql.parse(f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 7")
    settings = load_settings(None, {}, {"bootstrap_servers": broker, "endpoint_url": s3_endpoint})
    api.run(settings.settings, plan).unwrap()

    recorder = Recorder()
    result = api.verify(settings.settings, plan, offline=False, progress=recorder)
    assert result.clean
    assert [(u.partition, u.start, u.stop) for u in recorder.started] == [(0, 0, 20), (1, 0, 20)]
    assert recorder.ended == 1
    done = {u.partition: u for u in recorder.updates if u.done}
    assert sorted(done) == [0, 1]
    for unit in done.values():
        assert not unit.failed
        assert (unit.offset, unit.records, unit.objects) == (20, 20, 3)
        assert unit.size > 0

"""S3 faults between the archiver and the endpoint (faultproxy.py): intermittent 503
SlowDown, 500, connection resets and stalls are retried and the run is exactly once; faults
beyond the retry budget fail the run cleanly, and the next run resumes exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import archived_ids, run_args
from faultproxy import FaultProxy

from kafka_archive.cli import main

pytestmark = pytest.mark.integration


@pytest.mark.every_s3
def test_intermittent_faults_are_retried_and_the_archive_is_exactly_once(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 1000)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 50"
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_MAX_ATTEMPTS", "10")
    with FaultProxy(s3_endpoint, rate=0.2, seed=7, stall_seconds=0.5) as proxy:
        code = main(run_args(kcql, broker, proxy.url))
        assert code == 0, capsys.readouterr().err
    assert all(proxy.injected[f] > 0 for f in ("503", "500", "reset")), proxy.injected
    assert archived_ids(s3_client, bkt) == list(range(1000))


def test_faults_beyond_the_budget_fail_cleanly_and_the_next_run_resumes_exactly(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name, bkt = topic(partitions=2), bucket()
    produce(name, 400)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} WITH_FLUSH_COUNT = 50"
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_MAX_ATTEMPTS", "2")
    with FaultProxy(s3_endpoint, rate=0.0, seed=1) as proxy:
        proxy.fail_all = True
        code = main(run_args(kcql, broker, proxy.url))
    err = capsys.readouterr().err
    assert code in (5, 12), err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("kafka-archive: error: "), err
    monkeypatch.setenv("KAFKA_ARCHIVE_S3_MAX_ATTEMPTS", "8")
    produce(name, 100, first=400)
    assert main(run_args(kcql, broker, s3_endpoint)) == 0
    assert archived_ids(s3_client, bkt) == list(range(500))

"""``run --follow`` through what a production broker does between batches, on Apache Kafka
(whole process, its own process group): a transaction left open holds the partition at its
last stable offset, batch after batch, without failing or blocking the session (said once,
not at every batch), and its
records are archived once it commits; a broker restart fails batches while it is down and
the session carries on after it. Every record once, compared with a plain ``read_committed``
consumer (the JSON envelope keeps offsets). ``full``: about a minute."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, process_group, run_args
from confluent_kafka import Producer
from kafka_broker import KafkaBroker
from test_kafka_semantics import archived, in_kafka, record, transactional

pytestmark = [pytest.mark.integration, pytest.mark.full]


def test_follow_waits_out_an_open_transaction_and_a_broker_restart_exactly_once(
    kafka: KafkaBroker,
    broker: str,
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    plain = Producer({"bootstrap.servers": broker})
    for i in range(3):
        record(plain, name, i)
    assert plain.flush(30) == 0
    open_tx = transactional(broker, f"tx-follow-{name}")
    open_tx.begin_transaction()
    for i in range(10, 14):
        record(open_tx, name, i)
    open_tx.flush(30)
    for i in range(3, 6):  # behind the open transaction: not stable until it ends
        record(plain, name, i)
    assert plain.flush(30) == 0
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` "
        "PROPERTIES('store.envelope'=true, 'flush.interval'=1)"
    )
    command = [KAFKA_ARCHIVE, *run_args(kcql, broker, s3_endpoint, "--master", "local[1]")]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}

    def ids() -> list[int]:
        return sorted(r[3]["id"] for r in archived(s3_client, bkt) if r[3] is not None)

    with process_group([*command, "--follow", "--poll-interval", "0.5"], env) as process:

        def wait_for(wanted: list[int]) -> None:
            deadline = time.monotonic() + 120
            while ids() != wanted:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, ids()
                time.sleep(0.3)

        wait_for([0, 1, 2])
        time.sleep(3)  # batches go on at the last stable offset
        assert ids() == [0, 1, 2] and process.poll() is None
        open_tx.commit_transaction(30)
        wait_for([0, 1, 2, 3, 4, 5, 10, 11, 12, 13])
        try:
            kafka.stop()
            time.sleep(5)  # batches fail while it is down
        finally:
            kafka.start()
        after = Producer({"bootstrap.servers": broker})
        for i in range(20, 25):
            record(after, name, i)
        assert after.flush(60) == 0
        wait_for([0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 20, 21, 22, 23, 24])
        os.kill(process.pid, signal.SIGTERM)
        _, err = process.communicate(timeout=90)
    assert process.returncode == 0, err
    assert "Traceback" not in err
    # Said once, not at every batch the transaction stayed open.
    assert err.count("an open transaction holds offsets") == 1, err
    assert archived(s3_client, bkt) == in_kafka(broker, name)

"""A topic deleted and re-created while a ``run --follow`` batch is archiving it, on Apache
Kafka: after the batch's plan confirmed the topic's id and before its Spark task read the
partition. The driver's check (test_topic_recreated) cannot see it; the task confirms the
id before it marks or commits anything, so the batch refuses with exit 17 and neither the
new topic's records nor a state reach the archive."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, archived_ids, process_group, produce_to, run_args
from confluent_kafka.admin import AdminClient, NewTopic
from test_topic_recreated import _recreate

pytestmark = pytest.mark.integration

# Imported by the driver first (its plan checks), then by the Spark worker that runs the
# first unit: there the import waits while the file ``hold`` exists, after saying so.
_GATED_TRANSFORM = """
import os, time
from pathlib import Path

_GATE = Path({gate!r})
_first = _GATE / "first"
if not _first.exists():
    _first.write_text(str(os.getpid()))
elif _first.read_text() != str(os.getpid()):
    (_GATE / "blocked").touch()
    _until = time.monotonic() + 120
    while (_GATE / "hold").exists() and time.monotonic() < _until:
        time.sleep(0.1)


def keep(records):
    return records
"""


def _wait_for(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_topic_re_created_while_a_follow_batch_reads_it_is_refused_by_the_task(
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    s3_client: Any,
    bucket: Callable[..., str],
    tmp_path: Path,
) -> None:
    name, bkt = f"rcf-{time.time_ns() % 10**10}", bucket()
    module = f"gated_{name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(_GATED_TRANSFORM.format(gate=str(tmp_path)))
    (tmp_path / "hold").touch()
    admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(30)
    produce_to(broker, name, 10, partitions=1)
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} "
        f"PROPERTIES('flush.count'=5, 'transform'='{module}:keep')"
    )
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": str(tmp_path),
    }
    args = run_args(kcql, broker, s3_endpoint, "--follow", "--poll-interval", "1")
    with process_group([KAFKA_ARCHIVE, *args], env) as follow:
        _wait_for(lambda: (tmp_path / "blocked").exists(), 120, "the first unit's task")
        # The batch planned offsets 0..9 of the old topic; the new one has 25 records.
        _recreate(admin, name)
        produce_to(broker, name, 25, first=100, partitions=1)
        (tmp_path / "hold").unlink()
        _, err = follow.communicate(timeout=120)
    assert follow.returncode == 17, err
    last = err.strip().splitlines()[-1]
    assert f"topic '{name}' was deleted" in last and "Traceback" not in err, err
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bkt).get("Contents", [])]
    assert not [k for k in keys if "/.kafka-archive/" not in k], f"nothing archived: {keys}"
    assert not [k for k in keys if "/pending/" in k], keys
    state = s3_client.get_object(Bucket=bkt, Key=f"arch/.kafka-archive/state/{name}/0.json")
    assert json.loads(state["Body"].read())["next_offset"] == 0, "fenced, nothing committed"


def test_a_topic_deleted_during_a_follow_session(
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    s3_client: Any,
    bucket: Callable[..., str],
) -> None:
    """FROM `*` no longer matches a deleted topic: the session leaves it out and archives the
    others on (every batch failed on its offsets before, the others' records included); a
    topic a statement names ends the session with exit 4, as a run would refuse it."""
    stem, bkt = f"del{time.time_ns() % 10**10}", bucket()
    kept, deleted = f"{stem}.kept", f"{stem}.gone"
    for name in (kept, deleted):
        admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(30)
        produce_to(broker, name, 3, partitions=1)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    star = f"INSERT INTO {bkt}:arch SELECT * FROM `*` PROPERTIES('flush.interval'=1)"
    args = run_args(star, broker, s3_endpoint, "--follow", "--poll-interval", "1")
    with process_group([KAFKA_ARCHIVE, *args, "--topics-regex", f"{stem}\\..*"], env) as follow:
        _wait_for(lambda: len(archived_ids(s3_client, bkt)) == 6, 120, "the first records")
        admin.delete_topics([deleted])[deleted].result(30)
        produce_to(broker, kept, 3, first=3, partitions=1)
        _wait_for(
            lambda: archived_ids(s3_client, bkt, f"arch/{kept}/") == list(range(6)),
            120,
            "the kept topic's new records",
        )
        follow.send_signal(signal.SIGTERM)
        _, err = follow.communicate(timeout=120)
    assert follow.returncode == 0, err
    assert f"{deleted}: the topic was deleted; FROM `*` archives it no more" in err, err

    named = f"INSERT INTO {bkt}:named SELECT * FROM {kept} PROPERTIES('flush.interval'=1)"
    args = run_args(named, broker, s3_endpoint, "--follow", "--poll-interval", "1")
    with process_group([KAFKA_ARCHIVE, *args], env) as follow:
        _wait_for(lambda: len(archived_ids(s3_client, bkt, "named/")) == 6, 120, "named")
        admin.delete_topics([kept])[kept].result(30)
        _, err = follow.communicate(timeout=120)
    assert follow.returncode == 4, err
    last = err.strip().splitlines()[-1]
    assert f"topic '{kept}' was deleted while this session archived it" in last, err

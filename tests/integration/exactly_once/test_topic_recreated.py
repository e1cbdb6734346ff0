"""A topic deleted and re-created under its name, on Apache Kafka: its offsets start again at
0, so the archive's states (``archived up to N``) are another topic's. When the new topic has
grown past N, offsets alone cannot tell (test_kafka_semantics covers the one that has not):
the topic id recorded beside the states does. ``run``, ``run --follow``, ``status`` and
``verify`` refuse with exit 17 and one line (``status`` and ``verify`` after reporting every
route, that one marked); nothing is skipped or written; ``verify
--offline`` (no Kafka) still checks the archive; ``--reset-state`` does not open the prefix to
the new topic (the old objects stay); a new prefix archives the new topic whole.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, archived_ids, cli, produce_to, run_args
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from iceberg_helpers import kcql_for, reader_table, table_ids

pytestmark = pytest.mark.integration


def _kafka_id(admin: AdminClient, name: str) -> str:
    """The topic's id as Kafka's tools print it (Uuid.toString: URL-safe base64 of the 16
    bytes, no padding), computed from the id's two longs, not from its text."""
    deadline = time.monotonic() + 30
    while True:  # a topic just created may not be known to the broker's metadata yet
        try:
            uuid = admin.describe_topics(TopicCollection([name]))[name].result(30).topic_id
            break
        except KafkaException:
            assert time.monotonic() < deadline, "the topic cannot be described"
            time.sleep(0.5)
    data = b"".join(
        (bits % 2**64).to_bytes(8, "big")
        for bits in (uuid.get_most_significant_bits(), uuid.get_least_significant_bits())
    )
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _recreate(admin: AdminClient, name: str) -> None:
    admin.delete_topics([name])[name].result(30)
    deadline = time.monotonic() + 60
    while True:  # deletion completes asynchronously
        try:
            admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(30)
            return
        except Exception:
            assert time.monotonic() < deadline, "the topic was not deleted"
            time.sleep(0.5)


def test_a_re_created_topic_past_the_archived_offset_is_refused_by_every_command(
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = f"rc-{time.time_ns() % 10**10}", bucket()
    other = f"{name}-other"
    for created in (name, other):
        admin.create_topics([NewTopic(created, num_partitions=1)])[created].result(30)
    produce_to(broker, name, 10, partitions=1)
    produce_to(broker, other, 5, partitions=1)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name}"
    both = f"{kcql}; INSERT INTO {bkt}:other SELECT * FROM {other}"
    code, _, err = cli(capsys, *run_args(both, broker, s3_endpoint))
    assert code == 0, err
    before = {o["Key"] for o in s3_client.list_objects_v2(Bucket=bkt)["Contents"]}
    assert f"arch/.kafka-archive/topics/{name}/topic.json" in before

    old_id = _kafka_id(admin, name)
    _recreate(admin, name)
    new_id = _kafka_id(admin, name)
    # The new topic's records 100..114 at offsets 0..14: past the archive's next offset 10.
    produce_to(broker, name, 15, first=100, partitions=1)
    for command in ("status", "verify", "run"):
        code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command=command))
        assert code == 17, (command, out, err)
        lines = err.strip().splitlines()
        assert f"topic '{name}' was deleted and re-created" in lines[-1], (command, err)
        # The ids as kafka-topics.sh --describe prints them (it printed standard base64).
        assert f"(topic id {old_id}, now {new_id})" in lines[-1], (command, err, old_id)
        assert "new prefix" in lines[-1] and "Traceback" not in err
    # status and verify show every route, the re-created one's rows marked, then exit 17.
    code, out, err = cli(capsys, *run_args(both, broker, s3_endpoint, command="status"))
    assert code == 17 and "re-created" in err.strip().splitlines()[-1], (out, err)
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:4]}
    assert rows[f"{other}-0"][1:4] == ["5", "5", "0"] and "RE-CREATED" not in rows[f"{other}-0"]
    # archived 10 (the old topic's), end 15, every record of the new topic is lag.
    assert rows[f"{name}-0"][1:4] == ["10", "15", "15"] and rows[f"{name}-0"][-1] == "RE-CREATED"
    assert f"{name}: RE-CREATED: topic '{name}' was deleted and re-created" in out, out
    code, out, err = cli(
        capsys, *run_args(both, broker, s3_endpoint, "--output", "json", command="status")
    )
    assert code == 17, err
    by_topic = {row["topic"]: row for row in json.loads(out)["partitions"]}
    assert by_topic[other]["recreated"] is None and by_topic[other]["lag"] == 0
    assert "deleted and re-created" in by_topic[name]["recreated"], by_topic
    code, out, err = cli(
        capsys, *run_args(both, broker, s3_endpoint, "--output", "json", command="verify")
    )
    assert code == 17 and "re-created" in err.strip().splitlines()[-1], (out, err)
    verdicts = {v["topic"]: v for v in json.loads(out)["partitions"]}
    assert verdicts[other]["recreated"] is None and verdicts[other]["checked_to"] == 5
    assert "deleted and re-created" in verdicts[name]["recreated"]
    # The re-created route's archive is checked offline only: clean, nothing compared.
    assert verdicts[name]["checked_from"] is None and verdicts[name]["discrepancies"] == []
    assert verdicts[name]["records"] == 10
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    follow = subprocess.run(
        [KAFKA_ARCHIVE, *run_args(kcql, broker, s3_endpoint, "--follow", "--poll-interval", "1")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert follow.returncode == 17, follow.stderr
    assert "re-created" in follow.stderr.strip().splitlines()[-1]
    after = {o["Key"] for o in s3_client.list_objects_v2(Bucket=bkt)["Contents"]}
    assert after == before, "nothing written, nothing deleted"
    assert archived_ids(s3_client, bkt) == list(range(10))

    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, "--offline", command="verify"))
    assert code == 0, err
    # --reset-state keeps the old objects, and the record of whose they are.
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, "--reset-state", "--yes"))
    assert code == 17 and "re-created" in err.strip().splitlines()[-1], err
    assert archived_ids(s3_client, bkt) == list(range(10))
    new_kcql = f"INSERT INTO {bkt}:arch2 SELECT * FROM {name}"
    code, _, err = cli(capsys, *run_args(new_kcql, broker, s3_endpoint))
    assert code == 0, err
    assert archived_ids(s3_client, bkt, "arch2/") == list(range(100, 115)), "whole, from 0"


def test_an_iceberg_route_of_a_re_created_topic_is_refused(
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    spark: Any,
    catalog_uri: str,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An Iceberg table's snapshot holds the offsets archived: the same hazard, the same
    refusal, and no commit."""
    name, bkt = f"rc-{time.time_ns() % 10**10}", bucket()
    admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(30)
    produce_to(broker, name, 10, partitions=1)
    args = run_args(kcql_for(name, bkt, 100), broker, s3_endpoint)
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    _recreate(admin, name)
    produce_to(broker, name, 15, first=100, partitions=1)
    code, _, err = cli(capsys, *args)
    assert code == 17 and "re-created" in err.strip().splitlines()[-1], err
    table = reader_table(catalog_uri, s3_endpoint)
    assert table_ids(table) == list(range(10)) and len(table.snapshots()) == 1

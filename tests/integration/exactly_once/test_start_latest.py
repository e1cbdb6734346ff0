"""``--start latest`` means "from the job's first run on": every record produced after it is
archived, on Apache Kafka. Where the first run found nothing to pin above offset 0 (an empty
topic), and where FROM `*` matches a topic created after its first run, the records that
came before the next run were skipped (that run chose `latest` again)."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, archived_ids, cli, process_group, produce_to, run_args
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration


def _topic(admin: AdminClient, name: str) -> str:
    admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(30)
    return name


@pytest.mark.parametrize("protocol", ["states", "log"])
def test_a_topic_empty_at_the_first_run_is_archived_from_its_first_record(
    protocol: str,
    monkeypatch: pytest.MonkeyPatch,
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each commit protocol pins the empty partition at 0 (states: a state at 0; the commit
    log: its claim names the partition, which then begins at 0 though nothing committed)."""
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", protocol)
    name, bkt = _topic(admin, f"empty-{time.time_ns() % 10**10}"), bucket()
    args = run_args(f"INSERT INTO {bkt}:arch SELECT * FROM {name}", broker, s3_endpoint)
    code, _, err = cli(capsys, *args, "--start", "latest")
    assert code == 0, err
    produce_to(broker, name, 5, partitions=1)
    code, _, err = cli(capsys, *args, "--start", "latest")  # as a cron line repeats it
    assert code == 0, err
    assert archived_ids(s3_client, bkt) == list(range(5))


def test_a_topic_from_star_matches_after_its_first_run_is_archived_from_its_first_record(
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    stem, bkt = f"star{time.time_ns() % 10**10}", bucket()
    old = _topic(admin, f"{stem}.old")
    produce_to(broker, old, 3, partitions=1)
    args = run_args(f"INSERT INTO {bkt}:arch SELECT * FROM `*`", broker, s3_endpoint)
    regex = ("--topics-regex", f"{stem}\\..*", "--start", "latest")
    code, _, err = cli(capsys, *args, *regex)
    assert code == 0, err
    assert archived_ids(s3_client, bkt) == [], "the backlog at the first run is left out"

    new = _topic(admin, f"{stem}.new")
    produce_to(broker, new, 4, first=100, partitions=1)
    produce_to(broker, old, 2, first=3, partitions=1)
    code, _, err = cli(capsys, *args, *regex)
    assert code == 0, err
    assert archived_ids(s3_client, bkt, f"arch/{old}/") == [3, 4]
    assert archived_ids(s3_client, bkt, f"arch/{new}/") == [100, 101, 102, 103]
    assert "matches since its first run; from its first record" in err

    # A named statement added to the job still begins where --start says.
    named = _topic(admin, f"other{time.time_ns() % 10**10}")
    produce_to(broker, named, 2, partitions=1)
    both = (
        f"INSERT INTO {bkt}:arch SELECT * FROM `*`; INSERT INTO {bkt}:named SELECT * FROM {named}"
    )
    code, _, err = cli(capsys, *run_args(both, broker, s3_endpoint), *regex)
    assert code == 0, err
    assert archived_ids(s3_client, bkt, "named/") == []


def test_a_follow_session_takes_in_a_topic_its_regex_matches_from_its_first_record(
    broker: str,
    admin: AdminClient,
    s3_endpoint: str,
    s3_client: Any,
    bucket: Callable[..., str],
) -> None:
    """FROM `*` with --topics-regex under --follow: a topic created during the session joins
    it (it was archived only after a restart), from its first record under --start latest."""
    stem, bkt = f"fstar{time.time_ns() % 10**10}", bucket()
    old = _topic(admin, f"{stem}.old")
    produce_to(broker, old, 3, partitions=1)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM `*` PROPERTIES('flush.interval'=1)"
    args = run_args(kcql, broker, s3_endpoint, "--follow", "--poll-interval", "1")
    args += ["--topics-regex", f"{stem}\\..*", "--start", "latest"]
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    pinned = f"arch/.kafka-archive/state/{old}/0.json"

    def listed() -> list[str]:
        found = s3_client.list_objects_v2(Bucket=bkt).get("Contents", [])
        return [o["Key"] for o in found]

    with process_group([KAFKA_ARCHIVE, *args], env) as follow:
        _wait(lambda: pinned in listed(), "the first batch's pin")
        new = _topic(admin, f"{stem}.new")
        produce_to(broker, new, 4, first=100, partitions=1)
        produce_to(broker, old, 2, first=3, partitions=1)
        _wait(
            lambda: (
                archived_ids(s3_client, bkt, f"arch/{new}/") == [100, 101, 102, 103]
                and archived_ids(s3_client, bkt, f"arch/{old}/") == [3, 4]
            ),
            "the new topic's records",
        )
        follow.send_signal(signal.SIGTERM)
        _, err = follow.communicate(timeout=120)
    assert follow.returncode == 0, err
    assert f"{new}: FROM `*` matches it now; it joins the session" in err


def _wait(predicate: Callable[[], bool], what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)

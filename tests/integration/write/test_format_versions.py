"""Format versions on a real broker, S3 and Spark: a partition state or an intent marker in a
newer format than this version reads (as a newer kafka-archive would leave it before a
downgrade) makes ``run`` and ``status`` stop with one line and exit 24, changing nothing;
the same documents without a version field (as versions before the field wrote them) are
read as today's. Read back with plain boto3 + json."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import archived_ids, cli, run_args

pytestmark = pytest.mark.integration


def own_objects(s3: Any, bucket: str) -> dict[str, str]:
    """Key -> ETag of every object in the bucket but the lease (each run takes and releases
    it)."""
    page = s3.list_objects_v2(Bucket=bucket)
    return {
        item["Key"]: item["ETag"]
        for item in page.get("Contents", [])
        if not item["Key"].endswith("/lock.json")
    }


def test_a_newer_format_of_state_or_marker_is_refused_and_changes_nothing(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    produce(name, 20, partitions=1)
    args = run_args(f"INSERT INTO {bkt}:arch SELECT * FROM {name}", broker, s3_endpoint)
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    state_key = f"arch/.kafka-archive/state/{name}/0.json"
    state = json.loads(s3_client.get_object(Bucket=bkt, Key=state_key)["Body"].read())
    assert state["version"] == 1 and state["next_offset"] == 20

    # A state a newer version wrote: run and status refuse it, in one line.
    produce(name, 10, first=20, partitions=1)
    s3_client.put_object(Bucket=bkt, Key=state_key, Body=json.dumps({**state, "version": 2}))
    before = own_objects(s3_client, bkt)
    for command in (args, ["status", *args[1:]]):
        code, _, err = cli(capsys, *command)
        assert code == 24, err
        lines = err.strip().splitlines()
        assert lines[-1].startswith("kafka-archive: error: the partition state "), err
        assert f"s3://{bkt}/{state_key} is in format version 2" in lines[-1]
        assert "or a newer one" in lines[-1] and "Traceback" not in err
    assert own_objects(s3_client, bkt) == before

    # A marker a newer version wrote, naming an object beyond the committed offset (an
    # older reader would delete it as an orphan, or misread what else it names).
    s3_client.put_object(Bucket=bkt, Key=state_key, Body=json.dumps(state))
    orphan = f"arch/{name}/0/{20:012d}.json"
    marker = f"arch/.kafka-archive/pending/{name}/0/{20:020d}-0123456789abcdef.json"
    s3_client.put_object(Bucket=bkt, Key=orphan, Body=b'{"id": 20}\n')
    body = {"key": orphan, "start": 20, "run": "r", "epoch": 0, "job": "j"}
    s3_client.put_object(Bucket=bkt, Key=marker, Body=json.dumps({**body, "version": 2}))
    before = own_objects(s3_client, bkt)
    code, _, err = cli(capsys, *args)
    assert code == 24, err
    assert f"the intent marker s3://{bkt}/{marker} is in format version 2" in err
    assert own_objects(s3_client, bkt) == before

    # The same marker without a version (as versions before the field wrote it) is read:
    # recovery deletes the object it names, and the run archives every record once.
    s3_client.put_object(Bucket=bkt, Key=marker, Body=json.dumps(body))
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    assert archived_ids(s3_client, bkt) == list(range(30))
    assert marker not in own_objects(s3_client, bkt)

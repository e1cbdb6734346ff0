"""PROPERTIES('transform'=...) through `run` on Spark: the sample PII transform archives
scrubbed records (read back with boto3 + json), a transform that raises is a bad record
under every error policy, and a transform that is not deterministic fails the run."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from archive_helpers import KAFKA_ARCHIVE, run_args

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

SAMPLES = Path(__file__).parents[3] / "samples" / "transforms"

TEST_MODULE = """
import dataclasses
import json
import time


def fail_on_poison(records):
    out = []
    for r in records:
        if json.loads(r.value).get("poison"):
            raise ValueError("cannot handle this one")
        out.append(r)
    return out


def stamp_time(records):
    now = str(time.perf_counter_ns()).encode()
    return [dataclasses.replace(r, key=now) for r in records]
"""


def objects(s3: Any, bucket: str, prefix: str = "arch/") -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if "/.kafka-archive/" not in f"/{item['Key']}":
                found[item["Key"]] = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
    return found


def headers(i: int) -> list[tuple[str, bytes]]:
    return [("x-user-email", b"a@example.com"), ("n", str(i).encode())]


def test_the_sample_pii_transform_archives_scrubbed_records(
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
    # The driver imports pii from samples/transforms; the Spark workers do not have it on
    # their path and import it from the directory the driver found it in.
    monkeypatch.syspath_prepend(str(SAMPLES))
    name, bkt = topic(partitions=1), bucket()
    values = [
        {
            "id": i,
            "email": f"u{i}@example.com",
            "user": {"name": f"n{i}", "phone": "555"},
            **({"test": True} if i % 10 == 9 else {}),
        }
        for i in range(250)
    ]
    produce(name, len(values), partitions=1, value=values.__getitem__, headers=headers)
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` "
        "PROPERTIES('transform'='pii:drop_pii', 'flush.count'=100, "
        "'store.envelope'=true)"
    )
    code = main(run_args(kcql, broker, s3_endpoint))
    out, err = capsys.readouterr()
    assert code == 0, err
    found = objects(s3_client, bkt)
    assert sorted(found) == [f"arch/{name}/0/{o:012d}.json" for o in (0, 111, 222)]
    documents = [json.loads(line) for key in sorted(found) for line in found[key].splitlines()]
    kept = [i for i in range(250) if i % 10 != 9]
    assert [d["metadata"]["offset"] for d in documents] == kept
    assert [d["value"] for d in documents] == [{"id": i, "user": {"name": f"n{i}"}} for i in kept]
    assert all(d["headers"] == [{"name": "n", "value": d["metadata"]["offset"]}] for d in documents)
    assert "total: 225 records" in out


@pytest.fixture
def test_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"xform_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(TEST_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.mark.parametrize("policy", ["fail", "skip", "dead-letter"])
def test_a_transform_that_raises_is_a_bad_record_under_the_error_policy(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    test_module: str,
    policy: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    produce(
        name, 40, partitions=1, value=lambda i: {"id": i, "poison": i in (12, 31)}, headers=headers
    )
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` "
        f"PROPERTIES('transform'='{test_module}:fail_on_poison', 'flush.count'=10, "
        f"'error.policy'='{policy}')"
    )
    code = main(run_args(kcql, broker, s3_endpoint))
    out, err = capsys.readouterr()
    found = objects(s3_client, bkt)
    data = {k: v for k, v in found.items() if "/_dead-letter/" not in k}
    ids = sorted(json.loads(line)["id"] for body in data.values() for line in body.splitlines())
    if policy == "fail":
        assert code == 10, err
        (line,) = [n for n in err.splitlines() if n.startswith("kafka-archive: error:")]
        assert f"{name}-0 offset 12: cannot store the record as JSON: " in line
        assert f"transform {test_module}:fail_on_poison raised ValueError at " in line
        assert "cannot handle" not in err  # the exception's text is never shown
        assert ids == list(range(12))  # what came before the bad record is archived
        # The unit's progress line names the bad record's offset too (it said offset 0).
        assert f"{name}[0]: stopped at offset 12 (the error follows)" in err, err
        return
    assert code == 0, err
    assert ids == [i for i in range(40) if i not in (12, 31)]
    letters = {k: v for k, v in found.items() if "/_dead-letter/" in k}
    if policy == "skip":
        assert "2 record(s)" in out and letters == {}
    else:
        (body,) = letters.values()
        documents = [json.loads(line) for line in body.splitlines()]
        assert [d["metadata"]["offset"] for d in documents] == [12, 31]
        assert all("raised ValueError" in d["error"] for d in documents)


def test_a_transform_that_is_not_deterministic_fails_the_run(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    test_module: str,
) -> None:
    name, bkt = topic(partitions=1), bucket()
    produce(name, 20, partitions=1, headers=headers)
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` "
        f"PROPERTIES('transform'='{test_module}:stamp_time', 'store.envelope'=true)"
    )
    code = main(run_args(kcql, broker, s3_endpoint))
    err = capsys.readouterr().err
    assert code == 22, err
    assert "is not deterministic" in err and "offset 0" in err
    assert objects(s3_client, bkt) == {}


def test_the_readme_transform_command_runs_as_written_from_the_samples_directory(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """README, Transforms: `cd samples/transforms && kafka-archive run --kcql "INSERT INTO
    bkt:orders SELECT * FROM orders PROPERTIES('transform'='pii:drop_pii')" …`, through the
    installed console script (which, unlike `python -m`, does not put the working directory
    on sys.path), with the Spark workers importing the module too."""
    name, bkt = topic(partitions=1), bucket()
    produce(name, 20, partitions=1, value=lambda i: {"id": i, "email": f"u{i}@example.com"})
    kcql = f"INSERT INTO {bkt}:orders SELECT * FROM {name} PROPERTIES('transform'='pii:drop_pii')"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    done = subprocess.run(
        [KAFKA_ARCHIVE, *run_args(kcql, broker, s3_endpoint), "--master", "local[1]"],
        cwd=SAMPLES,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    found = objects(s3_client, bkt, prefix="orders/")
    assert found and all(key.endswith(".json") for key in found), sorted(found)
    values = [json.loads(line) for key in sorted(found) for line in found[key].splitlines()]
    assert values == [{"id": i} for i in range(20)]

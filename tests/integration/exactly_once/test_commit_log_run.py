"""`run` with commit_protocol=log (issue 37's wiring, experimental): real broker, real S3
endpoint, real Spark.

Every check reads the archive independently: the log's entries listed with boto3 and folded
from their JSON by ``commit_log_reader.read_log`` (never our log codec), the objects they name
read with json or pyarrow (never our decoder). Record ``i`` of a topic of ``P`` partitions is
at offset ``i // P`` of partition ``i % P`` (``produce``), so each record's offset is known
from its id.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import signal
import time
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq
import pytest
from archive_helpers import cli, run_args, wait_presence_expired
from commit_log_reader import CommitLog, entry_keys, read_log
from faultproxy import FaultProxy
from put_trigger import Trigger, log_mode_run

from kafka_archive.archiver.commands import session
from kafka_archive.archiver.config.load import load_settings
from kafka_archive.archiver.spark.progress import NullProgress
from kafka_archive.kcql import parse

pytestmark = pytest.mark.integration

P = 3
LOG = "arch/.kafka-archive/log/"


@pytest.fixture
def log_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")


def ids_in(body: bytes, fmt: str) -> list[int]:
    if fmt == "PARQUET":
        return [int(i) for i in pq.read_table(io.BytesIO(body)).column("id").to_pylist()]
    return [json.loads(line)["id"] for line in body.decode().splitlines()]


def data_keys(s3: Any, bucket: str) -> set[str]:
    keys: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="arch/"):
        keys |= {i["Key"] for i in page.get("Contents", []) if "/.kafka-archive/" not in i["Key"]}
    return keys


def assert_exactly_once(s3: Any, bucket: str, topic: str, produced: int, fmt: str) -> CommitLog:
    """Every produced record in exactly one object the log names, inside the object's range;
    each partition committed to its end; no object under the route the log does not name."""
    folded = read_log(s3, bucket)
    seen: list[int] = []
    for (t, partition), objects in folded.objects.items():
        assert t == topic
        for o in objects:
            ids = ids_in(s3.get_object(Bucket=bucket, Key=o["key"])["Body"].read(), fmt)
            assert o.get("imported") or len(ids) == o["records"]  # (states keep no counts)
            for i in ids:
                assert i % P == partition and o["first"] <= i // P <= o["last"], (o, i)
            seen += ids
    assert sorted(seen) == list(range(produced)), "every record exactly once"
    assert folded.ends == {(topic, p): len(range(p, produced, P)) for p in range(P)}
    named = {o["key"] for objects in folded.objects.values() for o in objects}
    assert data_keys(s3, bucket) == named, "no object the log does not name"
    return folded


def listing(s3: Any, bucket: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        found.update({i["Key"]: i["ETag"] for i in page.get("Contents", [])})
    return found


@pytest.mark.parametrize("fmt", ["JSON", "PARQUET"])
def test_log_mode_runs_twice_over_growing_topics_then_a_noop_writes_one_claim(
    fmt: str,
    log_mode: None,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `{fmt}` WITH_FLUSH_COUNT = 7"
    value = lambda i: {"id": i, "k": i % 2}  # noqa: E731

    produce(name, 60, partitions=P, value=value)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    folded = assert_exactly_once(s3_client, bkt, name, 60, fmt)
    assert folded.kinds == ["claim", "commit"]
    assert not any("/.kafka-archive/state/" in k for k in listing(s3_client, bkt))

    produce(name, 45, first=60, partitions=P, value=value)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert read_log(s3_client, bkt).kinds == ["claim", "commit", "claim", "commit"]
    assert_exactly_once(s3_client, bkt, name, 105, fmt)

    before = listing(s3_client, bkt)
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        code, _, err = cli(capsys, *run_args(kcql, broker, proxy.url))
        requests = list(proxy.requests)
    assert code == 0, err
    # Vacuum lists the target's objects at most once a grace period (3,600 s here): the
    # sessions within it do not list them again (a listing a thousand objects a page).
    listed = [p for m, p, _ in requests if m == "GET" and "list-type" in p]
    assert not [p for p in listed if "prefix=arch%2F&" in f"{p}&"], listed
    after = listing(s3_client, bkt)
    added = sorted(set(after) - set(before))
    assert added == [f"{LOG}{5:020d}.json"], "a no-op rerun writes its claim and nothing else"
    assert {k: after[k] for k in before} == before
    assert read_log(s3_client, bkt).kinds[-1] == "claim"


def test_sigkill_mid_job_then_a_rerun_is_exactly_once_and_vacuums_the_leftovers(
    log_mode: None,
    monkeypatch: pytest.MonkeyPatch,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = "
    produce(name, 600, partitions=P)
    trigger = Trigger(signal.SIGKILL, nth=6)
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.drop_response = trigger.on_request
        with log_mode_run(kcql + "10", broker, proxy.url) as process:
            trigger.process = process
            process.wait(timeout=600)
    assert trigger.fired.is_set(), "the run ended before its 6th object"
    assert read_log(s3_client, bkt).kinds == ["claim"], "killed in its Spark job: nothing committed"
    leftovers = data_keys(s3_client, bkt)
    assert len(leftovers) >= 5

    # The rerun cuts other objects (another flush count), so most leftovers are at keys it
    # never writes: only vacuum removes them (a grace of 1 s, by the store's clock).
    time.sleep(2)
    monkeypatch.setenv("KAFKA_ARCHIVE_LOG_VACUUM_GRACE_SECONDS", "1")
    code, _, err = cli(capsys, *run_args(kcql + "13", broker, s3_endpoint))
    assert code == 0, err
    folded = assert_exactly_once(s3_client, bkt, name, 600, "JSON")
    assert folded.kinds == ["claim", "claim", "commit"]
    named = {o["key"] for objects in folded.objects.values() for o in objects}
    assert leftovers - named, "some leftovers were at keys the rerun did not write"
    assert not (leftovers - named) & data_keys(s3_client, bkt), "vacuumed"


def test_a_stale_writer_resumed_after_another_run_committed_exits_18_and_commits_nothing(
    log_mode: None,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 10"
    produce(name, 600, partitions=P)
    trigger = Trigger(signal.SIGSTOP, nth=3)
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.drop_response = trigger.on_request
        # (A short ttl: the frozen run's presence expires, and the next run takes it over.)
        with log_mode_run(kcql, broker, proxy.url, KAFKA_ARCHIVE_LOCK_TTL_SECONDS="6") as stale:
            trigger.process = stale
            assert trigger.fired.wait(300), "the first run never wrote its 3rd object"
            assert read_log(s3_client, bkt).kinds == ["claim"]
            wait_presence_expired(s3_client, bkt)

            code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
            assert code == 0, err
            committed = read_log(s3_client, bkt)
            assert committed.kinds == ["claim", "claim", "commit"]

            os.killpg(stale.pid, signal.SIGCONT)
            assert stale.wait(timeout=300) == 18, stale.stderr.read() if stale.stderr else ""
            assert stale.stderr is not None
            err = stale.stderr.read().decode()
    assert "Traceback" not in err
    folded = read_log(s3_client, bkt)
    assert folded.kinds == ["claim", "claim", "commit"], "the stale run never commits"
    seen: list[int] = []
    for objects in folded.objects.values():
        for o in objects:
            seen += ids_in(s3_client.get_object(Bucket=bkt, Key=o["key"])["Body"].read(), "JSON")
    assert sorted(seen) == list(range(600)), "no record twice, none lost"


def by_type(requests: list[tuple[str, str, str | None]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for method, path, _ in requests:
        query = path.split("?", 1)[1] if "?" in path else ""
        kind = "LIST" if method == "GET" and "list-type" in query else method
        kind = "DeleteObjects" if method == "POST" and "delete" in query else kind
        counts[kind] = counts.get(kind, 0) + 1
    return counts


@pytest.mark.parametrize(
    ("partitions", "records", "bound"),
    [(P, 1200, 1.2), (24, 240, None)],  # 40 objects a partition; one object a partition
    ids=["deep", "wide"],
)
def test_requests_per_object_log_mode_against_states_mode(
    partitions: int,
    records: int,
    bound: float | None,
    monkeypatch: pytest.MonkeyPatch,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same input archived by each protocol through a counting proxy: S3 requests per
    object written, session included, by type (printed for the report)."""
    name = topic(partitions=partitions)
    produce(name, records, partitions=partitions)
    per_object: dict[str, float] = {}
    for protocol in ("states", "log"):
        monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", protocol)
        bkt = bucket()
        kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 10"
        with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
            code, _, err = cli(capsys, *run_args(kcql, broker, proxy.url))
            requests = list(proxy.requests)
        assert code == 0, err
        objects = len(data_keys(s3_client, bkt))
        assert objects == records // 10
        # The log session's presence (politeness, not the protocol): a create and a delete,
        # and no renewal in a run shorter than lock_ttl_seconds/3; counted apart.
        presence = [r for r in requests if r[1].split("?")[0].endswith("/presence.json")]
        assert (protocol, sorted(r[0] for r in presence)) in (
            ("states", []),
            ("log", ["DELETE", "PUT"]),
        ), presence
        per_object[protocol] = (len(requests) - len(presence)) / objects
        with capsys.disabled():
            print(
                f"\n{protocol}: {len(requests)} requests ({len(presence)} of the presence), "
                f"{objects} objects, {per_object[protocol]:.3f} per object without them, "
                f"{sorted(by_type(requests).items())}"
            )
    if bound is not None:
        assert per_object["log"] <= bound
    assert per_object["log"] < per_object["states"]


def test_a_log_mode_run_over_an_archive_of_states_migrates_it_and_carries_on_exactly_once(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    monkeypatch: pytest.MonkeyPatch,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 4"
    value = lambda i: {"id": i}  # noqa: E731
    produce(name, 30, partitions=P, value=value)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert not entry_keys(s3_client, bkt), "today's protocol writes no log"

    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")
    produce(name, 21, first=30, partitions=P, value=value)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    folded = assert_exactly_once(s3_client, bkt, name, 51, "JSON")
    assert folded.kinds == ["claim", "import", "claim", "commit"]

    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "states")
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 24, err  # the migrated marker: today's protocol never writes beside the log
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2
    assert_exactly_once(s3_client, bkt, name, 51, "JSON")


DAYS_AGO = int(time.time() * 1000) - 3 * 86_400_000  # (no tail is young: none held back)


def test_a_follow_session_in_log_mode_claims_once_commits_one_entry_a_batch_keeps_runs_out(
    log_mode: None,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 7"
    flags = {"bootstrap_servers": broker, "endpoint_url": s3_endpoint, "master": "local[2]"}
    settings = load_settings(None, dict(os.environ), flags).settings
    assert settings.commit_protocol == "log"
    with session.session(settings, parse(kcql), NullProgress()) as archiver:
        produce(name, 60, partitions=P, timestamp=DAYS_AGO)
        archiver.batch(hold_tails=True).unwrap()
        produce(name, 30, first=60, partitions=P, timestamp=DAYS_AGO)
        archiver.batch(hold_tails=True).unwrap()
        before = listing(s3_client, bkt)
        archiver.batch(hold_tails=True).unwrap()  # nothing new: nothing written
        assert listing(s3_client, bkt) == before
        assert read_log(s3_client, bkt).kinds == ["claim", "commit", "commit"]
        assert_exactly_once(s3_client, bkt, name, 90, "JSON")

        # Another run of the target stops at the session's presence (exit 8), claiming
        # nothing; the session carries on. (A claim fences a session whose presence expired:
        # test_commit_log_presence.py.)
        produce(name, 15, first=90, partitions=P, timestamp=DAYS_AGO)
        code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
        assert code == 8, err
        archiver.batch(hold_tails=True).unwrap()
    assert read_log(s3_client, bkt).kinds == ["claim", "commit", "commit", "commit"]
    assert_exactly_once(s3_client, bkt, name, 105, "JSON")


def test_states_mode_refuses_a_target_that_holds_a_commit_log(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    monkeypatch: pytest.MonkeyPatch,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Back in the default mode, a target archived in log mode has no states: a run would
    start every partition again and write its objects a second time. Refused, exit 2."""
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 7"
    produce(name, 30, partitions=P)
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    before = listing(s3_client, bkt)
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "states")
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 2, err
    assert "holds a commit log" in err and "Traceback" not in err
    assert_exactly_once(s3_client, bkt, name, 30, "JSON")
    after = listing(s3_client, bkt)
    assert {k: v for k, v in after.items() if "/.kafka-archive/lock" not in k} == before


def first_of(key: str) -> str:
    """The key up to the end of its first offset (what `cat` seeks by)."""
    folder, _, name = key.rpartition("/")
    return f"{folder}/{name.split('.')[0]}"


def read_ids(body: bytes, key: str, fmt: str) -> list[int]:
    return ids_in(gzip.decompress(body) if key.endswith(".gz") else body, fmt)


@pytest.mark.parametrize(
    ("fmt", "props", "stamped"),
    [("JSON", "", False), ("PARQUET", "", True), ("JSON", "'store.compression'='gzip'", True)],
    ids=["json", "parquet", "json-gzip"],
)
def test_a_late_delete_of_a_fenced_writer_s_object_never_removes_what_the_rerun_committed(
    fmt: str,
    props: str,
    stamped: bool,
    log_mode: None,
    monkeypatch: pytest.MonkeyPatch,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 37's identical-bytes hole. A fenced writer's objects sit at the keys the next
    run plans, with the very bytes an unstamped attempt writes there (a states-mode run's,
    into another bucket); the run deletes them If-Match and creates its own; then a DELETE
    If-Match on each old ETag lands (the late one of a straggler). Stamped formats: the
    run's object at that key has another ETag, the DELETE is refused; the others: the run
    wrote at keys of its attempt's own. Either way every record stays committed once."""
    name, bkt, reference = topic(partitions=P), bucket(), bucket()
    extra = f" PROPERTIES({props})" if props else ""
    statement = "INSERT INTO {} SELECT * FROM {} STOREAS `{}` WITH_FLUSH_COUNT = 5{}"
    kcql = statement.format(f"{bkt}:arch", name, fmt, extra)

    # The fenced writer: a run that claimed the (empty) partitions and wrote nothing yet.
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert read_log(s3_client, bkt).kinds == ["claim"]
    first = json.loads(
        s3_client.get_object(Bucket=bkt, Key=entry_keys(s3_client, bkt)[0])["Body"].read()
    )
    fenced = first["writer"]

    produce(name, 30, partitions=P, value=lambda i: {"id": i})
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "states")
    code, _, err = cli(
        capsys,
        *run_args(statement.format(f"{reference}:arch", name, fmt, extra), broker, s3_endpoint),
    )
    assert code == 0, err
    planted: dict[str, str] = {}
    for key in data_keys(s3_client, reference):
        body = s3_client.get_object(Bucket=reference, Key=key)["Body"].read()
        partition = read_ids(body, key, fmt)[0] % P
        meta = {
            "run-id": fenced["run_id"],
            "epoch": str(fenced["epoch"]),
            "attempt": "7",
            "route": name,
            "topic": name,
            "partition": str(partition),
        }
        put = s3_client.put_object(Bucket=bkt, Key=key, Body=body, Metadata=meta)
        planted[key] = put["ETag"]
    assert len(planted) == 6

    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    folded = read_log(s3_client, bkt)
    assert folded.kinds == ["claim", "claim", "commit"]
    named = {o["key"]: o for objects in folded.objects.values() for o in objects}
    etags = listing(s3_client, bkt)
    for key, etag in planted.items():  # the late DELETEs, judged on the fenced writer's objects
        with contextlib.suppress(s3_client.exceptions.ClientError):
            s3_client.delete_object(Bucket=bkt, Key=key, IfMatch=etag)
    seen: list[int] = []
    for key, o in named.items():
        ids = read_ids(s3_client.get_object(Bucket=bkt, Key=key)["Body"].read(), key, fmt)
        assert len(ids) == o["records"]
        assert all(o["first"] <= i // P <= o["last"] for i in ids)
        seen += ids
    assert sorted(seen) == list(range(30)), "every record in exactly one committed object"
    assert data_keys(s3_client, bkt) == set(named), "what is left is what the log names"

    if stamped:  # the same keys, other bytes
        assert set(named) == set(planted)
        assert all(etags[k] != planted[k] for k in planted), "each attempt's bytes its own"
    else:  # the attempt's own keys, each starting with the first offset the planned one has
        assert not set(named) & set(planted)
        assert {first_of(k) for k in named} == {first_of(k) for k in planted}

    # `cat` finds an offset from the log's objects (the first offset their keys start with).
    code, out, err = cli(
        capsys,
        "cat",
        "--from",
        f"{bkt}:arch",
        "--topic",
        name,
        "--partition",
        "1",
        "--offset",
        "6",
        "--count",
        "2",
        "--kcql",
        kcql,
        "--endpoint-url",
        s3_endpoint,
    )
    assert code == 0, err
    printed = [json.loads(line) for line in out.splitlines()]
    assert [p["offset"] for p in printed] == [6, 7]

    # `verify` finds each object the log names in the listing (no hole, no leftover).
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, out + err


def test_a_run_over_a_log_of_a_newer_format_stops_with_one_line_and_exit_24(
    log_mode: None,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A newer kafka-archive wrote the target's log in a format this one does not read: a
    log-mode run says so (exit 24, "upgrade it") and writes nothing, as `status` does."""
    name, bkt = topic(partitions=P), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `JSON` WITH_FLUSH_COUNT = 7"
    produce(name, 30, partitions=P)
    claim = {
        "version": 99,
        "seq": 1,
        "kind": "claim",
        "writer": {"run_id": "newer", "epoch": 1},
        "claims": [{"route": name, "topic": name, "partition": 0}],
        "commits": [],
    }
    s3_client.put_object(Bucket=bkt, Key=f"{LOG}{1:020d}.json", Body=json.dumps(claim).encode())
    before = listing(s3_client, bkt)
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 24, out + err
    assert "format version 99" in err and "upgrade it" in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) <= 2, err
    assert {k: v for k, v in listing(s3_client, bkt).items() if "/probe" not in k} == before

"""What a run costs per partition on the driver, counted (cheap enough for CI): a no-op run
of N and of 2N partitions makes the same S3 requests and the same Kafka lookups (listings,
the state index, one batched offsets lookup: nothing per partition), and a job's first run
reads no state (the listing shows there is none); ``status`` and ``verify`` learn the states
the same way and write nothing. The state index is a cache, never the truth: a stale or
damaged one changes no outcome, only what is read."""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from archive_helpers import archived_ids, cli, run_args
from faultproxy import FaultProxy

from kafka_archive.archiver.kafka.admin import KafkaAdmin

pytestmark = pytest.mark.integration

# The driver's Kafka lookups (KafkaAdmin's methods that send requests).
KAFKA_CALLS = (
    "topic_names",
    "partitions",
    "watermarks",
    "offsets",
    "offset_for_time",
    "group_offset",
    "commit_group",
)


def partition_rows(status: str) -> list[list[str]]:
    """The archived and end columns of each partition row of ``status``'s table (after the
    job and header lines, before its S3 requests line)."""
    return [line.split()[1:3] for line in status.splitlines()[2:] if not line.startswith("S3:")]


@pytest.fixture
def kafka_calls(monkeypatch: pytest.MonkeyPatch) -> collections.Counter[str]:
    """Counts the calls of each of KafkaAdmin's lookups in this process."""
    counts: collections.Counter[str] = collections.Counter()
    for name in KAFKA_CALLS:
        original = getattr(KafkaAdmin, name)

        def counted(*args: Any, _name: str = name, _call: Any = original, **kwargs: Any) -> Any:
            counts[_name] += 1
            return _call(*args, **kwargs)

        monkeypatch.setattr(KafkaAdmin, name, functools.wraps(original)(counted))
    return counts


@pytest.fixture
def proxy(s3_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as counting:
        yield counting


def kind(method: str, path: str) -> str:
    """A request as ``METHOD what``: what the driver's requests are about, not their keys."""
    key, _, query = path.partition("?")
    if "list-type" in query:
        return f"{method} listing"
    if "uploads" in query:
        return f"{method} uploads"
    if "/.kafka-archive/" not in key:
        return f"{method} {'object' if key.count('/') > 1 else 'bucket'}"
    what = key.split("/.kafka-archive/", 1)[1]
    for name in ("state", "pending", "lock", "index", "probe"):
        if what.startswith(name):
            return f"{method} {name}"
    return f"{method} other"


def requests(proxy: FaultProxy) -> collections.Counter[str]:
    return collections.Counter(kind(method, path) for method, path, _ in proxy.requests)


WRITES = ("PUT", "POST", "DELETE")


def test_a_no_op_run_status_and_verify_cost_the_same_for_twice_the_partitions(
    capsys: pytest.CaptureFixture[str],
    broker: str,
    proxy: FaultProxy,
    kafka_calls: collections.Counter[str],
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
) -> None:
    noop: list[tuple[collections.Counter[str], collections.Counter[str]]] = []
    reading: list[tuple[collections.Counter[str], collections.Counter[str]]] = []
    for partitions in (3, 6):
        names = [topic(partitions=partitions) for _ in range(2)]
        for name in names:
            produce(name, partitions, partitions=partitions)
        bkt = bucket()
        kcql = ";".join(f"INSERT INTO {bkt}:arch SELECT * FROM {name}" for name in names)
        args = run_args(kcql, broker, proxy.url, "--master", "local[2]")
        proxy.requests.clear()
        code, _, err = cli(capsys, *args)
        assert code == 0, err
        first = requests(proxy)
        assert first["GET state"] == 0, first  # the listing shows there is no state yet
        assert first["PUT index"] == 1, first
        assert archived_ids(s3_client, bkt) == sorted(i for _ in names for i in range(partitions))
        proxy.requests.clear()
        kafka_calls.clear()
        code, out, err = cli(capsys, *args)
        assert code == 0, err
        assert f"nothing new to archive ({2 * partitions} partition(s) up to date)" in out
        noop.append((requests(proxy), collections.Counter(kafka_calls)))
        # status and verify: the states from the listing and the index, nothing written.
        proxy.requests.clear()
        code, out, err = cli(capsys, *run_args(kcql, broker, proxy.url, command="status"))
        assert code == 0, err
        rows = partition_rows(out)
        assert rows == [["1", "1"]] * 2 * partitions, out  # archived, end: one record each
        status = requests(proxy)
        proxy.requests.clear()
        verify = [*run_args(kcql, broker, proxy.url, "--master", "local[2]", command="verify")]
        code, out, err = cli(capsys, *verify)
        assert code == 0, (out, err)
        assert f"clean: {2 * partitions} partition(s)" in out, out
        verified = requests(proxy)
        # verify reads each archived object (in its tasks): what grows with the archive.
        assert verified.pop("GET object") == 2 * partitions, verified
        reading.append((status, verified))
        for counted in (status, verified):
            assert counted["GET state"] == 0 and counted["GET index"] == 1, counted
            assert not [k for k in counted if k.split()[0] in WRITES], counted
    (small_s3, small_kafka), (large_s3, large_kafka) = noop
    assert small_s3 == large_s3, (small_s3, large_s3)
    assert small_kafka == large_kafka, (small_kafka, large_kafka)
    # Nothing per partition: no state read, no index rewritten, one offsets lookup.
    assert large_s3["GET state"] == 0 and large_s3["PUT index"] == 0, large_s3
    assert large_s3["GET index"] == 1, large_s3
    assert large_kafka["offsets"] == 1 and large_kafka["partitions"] == 1, large_kafka
    assert reading[0] == reading[1], reading


def test_a_stale_or_damaged_index_is_read_past(
    capsys: pytest.CaptureFixture[str],
    broker: str,
    proxy: FaultProxy,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    produce: Callable[..., None],
) -> None:
    name, bkt = topic(partitions=2), bucket()
    args = run_args(f"INSERT INTO {bkt}:arch SELECT * FROM {name}", broker, proxy.url)
    index_key = "arch/.kafka-archive/index.json"
    produce(name, 10)
    assert cli(capsys, *args)[0] == 0
    stale = s3_client.get_object(Bucket=bkt, Key=index_key)["Body"].read()
    produce(name, 10, first=10)
    assert cli(capsys, *args)[0] == 0
    # The index as the first run left it: both states have moved on since.
    s3_client.put_object(Bucket=bkt, Key=index_key, Body=stale)
    proxy.requests.clear()
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    assert "nothing new to archive (2 partition(s) up to date)" in out
    assert requests(proxy)["GET state"] == 2  # read again: their ETags changed
    s3_client.put_object(Bucket=bkt, Key=index_key, Body=stale)  # (the run wrote it anew)
    proxy.requests.clear()
    code, out, err = cli(
        capsys,
        *run_args(
            f"INSERT INTO {bkt}:arch SELECT * FROM {name}", broker, proxy.url, command="status"
        ),
    )
    assert code == 0, err
    assert partition_rows(out) == [["10", "10"]] * 2, out
    assert requests(proxy)["GET state"] == 2  # status reads past the stale index too
    assert s3_client.get_object(Bucket=bkt, Key=index_key)["Body"].read() == stale
    produce(name, 10, first=20)
    s3_client.put_object(Bucket=bkt, Key=index_key, Body=b"{not json")
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    assert archived_ids(s3_client, bkt) == list(range(30))
    # A state changed behind the index's back (another writer under the lease's rules, or
    # an edit): the listing shows the new ETag, so the state is read, not taken from it.
    state_key = f"arch/.kafka-archive/state/{name}/0.json"
    body = s3_client.get_object(Bucket=bkt, Key=state_key)["Body"].read()
    s3_client.put_object(Bucket=bkt, Key=state_key, Body=body.replace(b'"run_id"', b'"run_id" '))
    proxy.requests.clear()
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    assert requests(proxy)["GET state"] == 1
    assert archived_ids(s3_client, bkt) == list(range(30))

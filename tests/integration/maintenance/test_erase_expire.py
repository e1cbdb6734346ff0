"""`kafka-archive erase` and `kafka-archive expire` on commit-log archives (issue 38): real
broker, moto's S3 server, real Spark for the runs and `verify`.

Every check reads the archive independently: the log's entries listed with boto3 and folded
here by hand from their JSON (claims, commits, rewrites with their removed ranges; never our
log codec), the objects they name read with json or pyarrow (never our decoder). Record
``i`` of a topic of ``P`` partitions is at offset ``i // P`` of partition ``i % P``, has key
``user-<i % 7>`` and time ``BASE + i`` ms.
"""

from __future__ import annotations

import io
import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from archive_helpers import cli, kafka_records, run_args, wait_presence_expired
from faultproxy import FaultProxy
from put_trigger import Trigger, log_mode_process

pytestmark = pytest.mark.integration

P = 3
LOG = "arch/.kafka-archive/log/"
BASE = 1_700_000_000_000
ERASED = ("user-2", "user-5")


def key_of(i: int) -> bytes:
    return f"user-{i % 7}".encode()


@pytest.fixture
def log_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")


@dataclass
class Folded:
    """The log folded by hand: entry kinds (and raw bodies), each partition's end, named
    objects and removed ranges (first, last, reason)."""

    kinds: list[str] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    ends: dict[int, int] = field(default_factory=dict)
    objects: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    removed: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)

    def removed_offsets(self, partition: int, reason: str) -> set[int]:
        return {
            o
            for first, last, why in self.removed.get(partition, [])
            if why == reason
            for o in range(first, last + 1)
        }


def fold(s3: Any, bucket: str) -> Folded:
    """Entries 1..n in order, each checked as a correct log must be; a rewrite replaces
    consecutive named objects (exactly as named) by objects that, with the offsets it
    removes, hold the replaced span."""
    out, holders, epoch = Folded(), {}, 0
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=LOG):
        keys += [i["Key"] for i in page.get("Contents", []) if "/checkpoint/" not in i["Key"]]
    for n, key in enumerate(sorted(keys), start=1):
        assert key == f"{LOG}{n:020d}.json"
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        doc = json.loads(body)
        out.bodies.append(body)
        writer = (doc["writer"]["run_id"], doc["writer"]["epoch"])
        out.kinds.append(doc["kind"])
        if doc["kind"] == "claim":
            assert writer[1] > epoch
            epoch = writer[1]
            for c in doc["claims"]:
                holders[c["partition"]] = writer
        elif doc["kind"] == "commit":
            for c in doc["commits"]:
                p = c["partition"]
                assert holders.get(p) == writer and c["start"] == out.ends.get(p, 0)
                at = c["start"]
                for o in c["objects"]:
                    assert o["first"] == at
                    at = o["last"] + 1
                assert at == c["end"]
                out.ends[p] = c["end"]
                out.objects.setdefault(p, []).extend(c["objects"])
        else:
            assert doc["kind"] == "rewrite", doc["kind"]
            for rw in doc["rewrites"]:
                p = rw["partition"]
                assert holders.get(p) == writer, "a rewrite by the claim's holder"
                objs = out.objects[p]
                i = objs.index(rw["replaced"][0])
                assert objs[i : i + len(rw["replaced"])] == rw["replaced"], "as named"
                removed = [(r["first"], r["last"], r["reason"]) for r in rw["removed"]]
                assert all(isinstance(r["at"], float | int) for r in rw["removed"])
                gone = {o for a, b, _ in removed for o in range(a, b + 1)}
                span = set(range(rw["replaced"][0]["first"], rw["replaced"][-1]["last"] + 1))
                held = {o for x in rw["objects"] for o in range(x["first"], x["last"] + 1)}
                assert held | gone >= span and not (held - span), "the span held or removed"
                out.removed.setdefault(p, []).extend(removed)
                out.objects[p] = objs[:i] + rw["objects"] + objs[i + len(rw["replaced"]) :]
    return out


def id_of(row: dict[str, Any]) -> int:
    value = row["value"]
    if isinstance(value, str | bytes):
        value = json.loads(value)
    return int(value["id"])


def rows_in(body: bytes, fmt: str) -> list[dict[str, Any]]:
    if fmt == "PARQUET":
        return list(pq.read_table(io.BytesIO(body)).to_pylist())
    return [json.loads(line) for line in body.decode().splitlines()]


def assert_exactly(s3: Any, bucket: str, fmt: str, expected: set[int], ends: int) -> Folded:
    """Exactly the records ``expected`` (ids), each in one object the log names, at its
    offset, and the offsets of the others recorded as removed; ``ends`` records produced."""
    folded = fold(s3, bucket)
    seen: list[int] = []
    for partition, objects in folded.objects.items():
        gone = {o for a, b, _ in folded.removed.get(partition, []) for o in range(a, b + 1)}
        for o in objects:
            rows = rows_in(s3.get_object(Bucket=bucket, Key=o["key"])["Body"].read(), fmt)
            assert len(rows) == o["records"]
            for row in rows:
                i, offset = id_of(row), int(row["metadata"]["offset"])
                assert i % P == partition and offset == i // P and offset not in gone
                assert o["first"] <= offset <= o["last"]
                seen.append(i)
        held = {i // P for i in seen if i % P == partition}
        assert held | gone == set(range(folded.ends[partition])), "held or removed, no hole"
    assert sorted(seen) == sorted(expected), "every kept record exactly once"
    assert folded.ends == {p: len(range(p, ends, P)) for p in range(P)}, "ends unmoved"
    return folded


def kcql_of(bkt: str, name: str, fmt: str) -> str:
    return (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `{fmt}` WITH_FLUSH_COUNT = 4 "
        "PROPERTIES('store.envelope'=true)"
    )


def args(command: str, kcql: str, endpoint: str, *extra: str) -> list[str]:
    return [command, "--kcql", kcql, "--endpoint-url", endpoint, *extra]


def cat_offsets(capsys: pytest.CaptureFixture[str], bkt: str, name: str, endpoint: str) -> dict:
    found = {}
    for p in range(P):
        code, out, err = cli(
            capsys,
            *["cat", "--from", f"{bkt}:arch", "--topic", name, "--partition", str(p)],
            *["--offset", "0", "--count", "1000", "--endpoint-url", endpoint],
        )
        assert code == 0, err
        found[p] = [json.loads(line)["offset"] for line in out.splitlines()]
    return found


CASES = {
    # command, its arguments, the reason, which ids go
    "erase": (["--key", ERASED[0], "--key", ERASED[1]], "erased", lambda i: i % 7 in (2, 5)),
    "expire": (["--before", "2023-11-14T22:13:20.045Z"], "expired", lambda i: i < 45),
}


@pytest.mark.parametrize("fmt", ["JSON", "PARQUET"])
@pytest.mark.parametrize("command", ["erase", "expire"])
def test_every_reader_agrees_and_a_later_run_archives_only_new_records(
    command: str,
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
    tmp_path: Path,
) -> None:
    extra, reason, gone = CASES[command]
    endpoint = ["--endpoint-url", s3_endpoint]
    assert BASE + 45 == 1_700_000_000_045  # the cut of --before above
    name, bkt = topic(partitions=P), bucket()
    kcql = kcql_of(bkt, name, fmt)
    produce(name, 90, partitions=P, key=key_of, timestamp=BASE)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert_exactly(s3_client, bkt, fmt, set(range(90)), 90)

    report = tmp_path / "report.json"
    code, out, err = cli(capsys, *args(command, kcql, s3_endpoint, *extra, "--report", str(report)))
    assert code == 0, err
    kept = {i for i in range(90) if not gone(i)}
    folded = assert_exactly(s3_client, bkt, fmt, kept, 90)
    assert folded.kinds == ["claim", "commit", "claim", "rewrite"], "one rewrite entry"
    for p in range(P):
        expected = {i // P for i in range(p, 90, P) if gone(i)}
        assert folded.removed_offsets(p, reason) == expected, p
    assert not any(k.encode() in body for k in ERASED for body in folded.bodies), "no key logged"
    dropped = 90 - len(kept)
    assert f"{dropped} record(s) {reason}" in out and "S3:" in out and "GET" in out, out
    document = json.loads(report.read_text())
    assert document["records_dropped"] == dropped and document["s3_requests"]["GET"] > 0

    # verify: clean, and names the offsets removed; cat never returns them; status shows them.
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, out + err
    assert f": {reason} by kafka-archive {command}" in out + err, out + err
    assert "hole" not in (out + err).replace("not a hole", ""), out + err
    offsets = cat_offsets(capsys, bkt, name, s3_endpoint)
    assert offsets == {p: sorted(i // P for i in kept if i % P == p) for p in range(P)}
    restored = topic(partitions=P)
    where = ["--from", f"{bkt}:arch", "--topic", name, "--to-topic", restored]
    code, _, err = cli(capsys, "restore", *where, "--bootstrap-servers", broker, *endpoint)
    assert code == 0, err
    back = kafka_records(broker, restored, P)
    assert sorted(json.loads(r.value or b"")["id"] for r in back) == sorted(kept)
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="status"))
    assert code == 0, err
    assert all(f"{name}-{p}: {reason} offsets" in out for p in range(P)), out

    # The same command again finds nothing; a later run archives only the new records.
    code, out, err = cli(capsys, *args(command, kcql, s3_endpoint, *extra))
    assert code == 0 and "nothing to" in out, out + err
    produce(name, 30, first=90, partitions=P, key=key_of, timestamp=BASE)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    assert_exactly(s3_client, bkt, fmt, kept | set(range(90, 120)), 120)
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, out + err


@pytest.mark.parametrize("nth", [1, 3])
def test_erase_sigkilled_at_its_nth_put_then_rerun_is_exactly_once(
    nth: int,
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
    """Killed while creating its new objects (the nth data PUT of about 12), then run again:
    the erased keys' records are gone, every other one is there exactly once."""
    name, bkt = topic(partitions=P), bucket()
    kcql = kcql_of(bkt, name, "JSON")
    produce(name, 72, partitions=P, key=key_of, timestamp=BASE)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    erase = ["--key", ERASED[0], "--key", ERASED[1]]
    trigger = Trigger(signal.SIGKILL, nth)
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.drop_response = trigger.on_request
        with log_mode_process(args("erase", kcql, proxy.url, *erase)) as process:
            trigger.process = process
            process.wait(timeout=300)
    assert trigger.fired.is_set(), "erase ended before its nth PUT"
    assert "rewrite" not in fold(s3_client, bkt).kinds, "killed before its entry"
    assert_exactly(s3_client, bkt, "JSON", set(range(72)), 72)

    code, _out, err = cli(capsys, *args("erase", kcql, s3_endpoint, *erase))
    assert code == 0, err
    kept = {i for i in range(72) if i % 7 not in (2, 5)}
    folded = assert_exactly(s3_client, bkt, "JSON", kept, 72)
    assert folded.kinds == ["claim", "commit", "claim", "claim", "rewrite"]
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, out + err


def test_erase_by_a_key_field_of_parquet_without_the_envelope(
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
    name, bkt = topic(partitions=1), bucket()
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} STOREAS `PARQUET` WITH_FLUSH_COUNT = 5"
    produce(name, 30, partitions=1, value=lambda i: {"id": i, "user": f"u{i % 4}"})
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err

    code, _, err = cli(capsys, *args("erase", kcql, s3_endpoint, "--key", "u1"))
    assert code == 2 and "--key-field" in err and "Traceback" not in err, err
    code, _, err = cli(capsys, *args("expire", kcql, s3_endpoint, "--older-than", "90d"))
    assert code == 2 and "no record times" in err and "Traceback" not in err, err
    assert fold(s3_client, bkt).kinds == ["claim", "commit"], "nothing written"

    code, out, err = cli(
        capsys, *args("erase", kcql, s3_endpoint, "--key", "u1", "--key-field", "user")
    )
    assert code == 0, err
    folded = fold(s3_client, bkt)
    ids = [
        int(i)
        for o in folded.objects[0]
        for i in pq.read_table(
            io.BytesIO(s3_client.get_object(Bucket=bkt, Key=o["key"])["Body"].read())
        )
        .column("id")
        .to_pylist()
    ]
    assert sorted(ids) == [i for i in range(30) if i % 4 != 1]
    assert folded.removed_offsets(0, "erased") == {i for i in range(30) if i % 4 == 1}
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, out + err


@pytest.mark.parametrize("command", ["erase", "expire"])
def test_a_target_of_states_exits_2_and_nothing_is_written(
    command: str,
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
    kcql = kcql_of(bkt, name, "JSON")
    produce(name, 12, partitions=1, key=key_of, timestamp=BASE)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))  # states (the default)
    assert code == 0, err
    listed = {
        i["Key"]: i["ETag"] for i in s3_client.list_objects_v2(Bucket=bkt).get("Contents", [])
    }
    code, _out, err = cli(capsys, *args(command, kcql, s3_endpoint, *CASES[command][0]))
    assert code == 2, err
    assert "commit_protocol=log" in err and len(err.strip().splitlines()) <= 2, err
    assert "Traceback" not in err
    after = s3_client.list_objects_v2(Bucket=bkt).get("Contents", [])
    assert {i["Key"]: i["ETag"] for i in after} == listed, "nothing written"


def test_a_run_that_claims_meanwhile_fences_erase_exit_18_nothing_swapped(
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
    """erase held at its first new object while a log-mode run of the same target claims
    the partitions: erase stops with exit 18, the log has no rewrite, the run's archive is
    whole (the records of the keys still there: erase again)."""
    name, bkt = topic(partitions=P), bucket()
    kcql = kcql_of(bkt, name, "JSON")
    produce(name, 36, partitions=P, key=key_of, timestamp=BASE)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.hold = lambda method, path, _: method == "PUT" and "/.kafka-archive/" not in path
        erase = args("erase", kcql, proxy.url, "--key", ERASED[0])
        # (A short ttl: erase's presence expires once it is frozen.)
        with log_mode_process(erase, KAFKA_ARCHIVE_LOCK_TTL_SECONDS="6") as process:
            assert proxy.held.wait(120), "erase never created an object"
            produce(name, 9, first=36, partitions=P, key=key_of, timestamp=BASE)
            # Live, erase keeps the run out (its presence); frozen past its ttl, it is
            # taken over, and the run's claim fences it.
            code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
            assert code == 8 and "erase is writing" in err, err
            os.killpg(process.pid, signal.SIGSTOP)
            wait_presence_expired(s3_client, bkt)
            code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
            assert code == 0, err
            proxy.release.set()
            os.killpg(process.pid, signal.SIGCONT)
            assert process.wait(timeout=120) == 18
            assert process.stderr is not None
            lines = process.stderr.read().decode().strip().splitlines()
    assert "newer run claimed" in lines[-1] and not any("Traceback" in x for x in lines)
    folded = assert_exactly(s3_client, bkt, "JSON", set(range(45)), 45)
    assert folded.kinds == ["claim", "commit", "claim", "claim", "commit"]


def test_expire_reads_only_the_objects_spanning_the_cut(
    log_mode: None,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """30 objects (3 partitions of 10, 4 records each, record i at BASE + i ms); the log names
    each one's record-time bounds, so expire at BASE + 45 drops the 9 objects wholly before
    the cut without reading them, leaves the 18 wholly after it unread, and reads only the 3
    that span it (offsets 12..15 of each partition): 3 data GETs, not 30."""
    name, bkt = topic(partitions=P), bucket()
    kcql = kcql_of(bkt, name, "JSON")
    produce(name, 120, partitions=P, key=key_of, timestamp=BASE)
    code, _, err = cli(capsys, *run_args(kcql, broker, s3_endpoint))
    assert code == 0, err
    folded = assert_exactly(s3_client, bkt, "JSON", set(range(120)), 120)
    assert sum(len(v) for v in folded.objects.values()) == 30
    for p, objects in folded.objects.items():
        for o in objects:  # the bounds the run named: its records' times
            ids = [i for i in range(p, 120, P) if o["first"] <= i // P <= o["last"]]
            assert (o["min_time_ms"], o["max_time_ms"]) == (BASE + ids[0], BASE + ids[-1]), o
    by_partition = {p: list(v) for p, v in folded.objects.items()}
    before = {o["key"]: o for v in by_partition.values() for o in v}

    report = tmp_path / "report.json"
    cut = ["--before", "2023-11-14T22:13:20.045Z", "--report", str(report)]
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        code, out, err = cli(capsys, *args("expire", kcql, proxy.url, *cut))
        sent = list(proxy.requests)
    assert code == 0, err
    gets = [p for method, p, _ in sent if method == "GET" and "list-type" not in p]
    lists = [p for method, p, _ in sent if method == "GET" and "list-type" in p]
    data_gets = [path for path in gets if "/.kafka-archive/" not in path]
    spanning = {o["key"] for o in before.values() if o["first"] == 12}
    assert len(spanning) == 3
    assert sorted(p.split("?")[0].split(f"/{bkt}/", 1)[1] for p in data_gets) == sorted(spanning)
    document = json.loads(report.read_text())
    assert document["s3_requests"]["GET"] == len(gets), (document, sent)
    assert document["s3_requests"]["LIST"] == len(lists), (document, sent)
    assert f"{len(gets)} GET" in out, out

    kept = set(range(45, 120))
    folded = assert_exactly(s3_client, bkt, "JSON", kept, 120)
    assert folded.kinds == ["claim", "commit", "claim", "rewrite"]
    for p in range(P):
        assert folded.removed_offsets(p, "expired") == set(range(15)), p
        after = {o["key"]: o for o in folded.objects[p]}
        untouched = [o for o in by_partition[p] if o["first"] >= 16]
        assert len(untouched) == 6 and all(after.get(o["key"]) == o for o in untouched)
        (new,) = [o for o in folded.objects[p] if o["key"] not in before]
        assert (new["first"], new["last"], new["records"]) == (15, 15, 1)
        assert new["min_time_ms"] == new["max_time_ms"] == BASE + 45 + p, new
    code, out, err = cli(capsys, *run_args(kcql, broker, s3_endpoint, command="verify"))
    assert code == 0, out + err
    assert ": expired by kafka-archive expire" in out + err and "0..14" in out + err, out + err

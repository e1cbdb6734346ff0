"""``erase``, ``expire`` and ``compact`` on Iceberg routes (issue 38) under
commit_protocol=log: a real broker, moto's S3, Spark for the runs and a SQL catalog on SQLite.

The table is read back ONLY with pyiceberg's scan (to pyarrow) and its metadata (snapshot
summaries, properties, files); the values are parsed with json: never our decoding code.
Record ``i`` of a topic of 2 partitions is at offset ``i // 2`` of partition ``i % 2``, has
the value ``{"id": i}``, key ``k<i % 10>`` and time ``BASE + i`` ms; the route keeps the
envelope (key, value, headers, metadata), so an id names one (partition, offset).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from archive_helpers import (
    KAFKA_ARCHIVE,
    cli,
    process_env,
    process_group,
    run_args,
    wait_presence_expired,
)
from faultproxy import FaultProxy
from iceberg_helpers import data_keys, kcql_for, reader_table, referenced

from kafka_archive.cli import main

pytestmark = pytest.mark.integration

P = 2
# A day ago (no record is held back), 100 ms before a whole second: record 100's time is a
# whole second, a cut that ISO-8601 states exactly.
BASE = (int(time.time()) - 86_400) * 1000 - 100
OFFSETS = "kafka-archive.offsets."
REMOVED = "kafka-archive.removed."
LOG_MODE = {"KAFKA_ARCHIVE_COMMIT_PROTOCOL": "log"}


@pytest.fixture
def log_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_ARCHIVE_COMMIT_PROTOCOL", "log")


def key_of(i: int) -> bytes:
    return f"k{i % 10}".encode()


def kcql(name: str, bkt: str, flush: int) -> str:
    return kcql_for(name, bkt, flush).replace(")", ", 'store.envelope'=true)")


def rows(table: Any) -> list[tuple[int, int, int]]:
    """(id, partition, offset) of every row, duplicates kept, sorted (pyiceberg's scan)."""
    found = table.scan(selected_fields=("value", "metadata")).to_arrow().to_pylist()
    return sorted(
        (json.loads(r["value"])["id"], r["metadata"]["partition"], r["metadata"]["offset"])
        for r in found
    )


def expected(ids: list[int]) -> list[tuple[int, int, int]]:
    return sorted((i, i % P, i // P) for i in ids)


def ours(table: Any) -> dict[str, str]:
    """The current snapshot's summary (it must be one of ours)."""
    return dict(table.current_snapshot().summary.additional_properties)


def removed(table: Any, name: str, partition: int) -> list[tuple[int, int, str]]:
    """The removed ranges the table property records for ``partition``: (first, last, why)."""
    text = table.properties.get(f"{REMOVED}{name}.{partition}")
    return [] if text is None else [(a, b, why) for a, b, why, _ in json.loads(text)]


def offsets_in(ranges: list[tuple[int, int, str]], why: str) -> set[int]:
    return {o for a, b, r in ranges if r == why for o in range(a, b + 1)}


def command(verb: str, text: str, broker: str, endpoint: str, *extra: str) -> list[str]:
    return [verb, *run_args(text, broker, endpoint, command=None), *extra]


def test_erase_expire_then_run_on_a_table(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    log_mode: None,
) -> None:
    """erase 2 keys: every other record once, theirs gone, in one snapshot of ours keeping the
    offsets and the claim's epoch, the offsets recorded erased (a table property; status lists
    them); expire: the records before the cut gone; a run then archives only new records."""
    name, bkt = topic(partitions=P), bucket()
    text = kcql(name, bkt, 50)
    produce(name, 400, partitions=P, key=key_of, timestamp=BASE)
    assert main(run_args(text, broker, s3_endpoint)) == 0, capsys.readouterr().err
    table = reader_table(catalog_uri, s3_endpoint)
    assert rows(table) == expected(list(range(400)))
    snapshots = len(table.snapshots())

    code, out, err = cli(
        capsys, *command("erase", text, broker, s3_endpoint, "--key", "k2", "--key", "k7")
    )
    assert code == 0, err
    assert "80 record(s) erased" in out, out
    table = reader_table(catalog_uri, s3_endpoint)
    gone = {i for i in range(400) if i % 10 in (2, 7)}
    assert rows(table) == expected([i for i in range(400) if i not in gone])
    # The fence at the claim, then ONE overwrite snapshot of ours: the offsets kept.
    assert len(table.snapshots()) == snapshots + 2
    summary = ours(table)
    assert summary["kafka-archive.maintenance"] == "erase"
    assert table.current_snapshot().summary.operation.value == "overwrite"
    assert {k: v for k, v in summary.items() if k.startswith(OFFSETS)} == {
        f"{OFFSETS}{name}.0": "200",
        f"{OFFSETS}{name}.1": "200",
    }
    assert summary["kafka-archive.epoch"] == "2"  # the run's claim was 1
    assert "k2" not in json.dumps(dict(table.properties)) + json.dumps(summary)
    for p in range(P):
        want = {i // P for i in gone if i % P == p}
        assert offsets_in(removed(table, name, p), "erased") == want, p

    code, out, err = cli(
        capsys, "status", *run_args(text, broker, s3_endpoint, command=None), "--output", "json"
    )
    assert code == 0, err
    listed = {r["partition"]: r for r in json.loads(out)["partitions"]}
    for p in range(P):
        shown = {o for a, b in listed[p]["erased"] for o in range(a, b + 1)}
        assert shown == {i // P for i in gone if i % P == p}
        assert listed[p]["archived_offset"] == 200

    cut = BASE + 100  # records 0..99 are before it
    code, out, err = cli(
        capsys, *command("expire", text, broker, s3_endpoint, "--before", iso(cut))
    )
    assert code == 0, err
    table = reader_table(catalog_uri, s3_endpoint)
    kept = [i for i in range(100, 400) if i not in gone]
    assert rows(table) == expected(kept)
    expired = {i for i in range(100) if i not in gone}
    for p in range(P):
        assert offsets_in(removed(table, name, p), "expired") == {
            i // P for i in expired if i % P == p
        }
        assert offsets_in(removed(table, name, p), "erased") == {i // P for i in gone if i % P == p}

    # A rerun of the same erase: nothing left to erase, nothing changed.
    code, out, err = cli(capsys, *command("erase", text, broker, s3_endpoint, "--key", "k2"))
    assert code == 0 and "nothing to erase" in out, (out, err)
    assert rows(reader_table(catalog_uri, s3_endpoint)) == expected(kept)

    produce(name, 100, first=400, partitions=P, key=key_of, timestamp=BASE)
    assert main(run_args(text, broker, s3_endpoint)) == 0, capsys.readouterr().err
    table = reader_table(catalog_uri, s3_endpoint)
    assert rows(table) == expected(kept + list(range(400, 500)))
    assert data_keys(s3_client, bkt) <= referenced(table, bkt)


def iso(ms: int) -> str:
    assert ms % 1000 == 0, ms
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))


def test_compact_merges_small_files_keeping_rows_and_offsets(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    spark: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    log_mode: None,
) -> None:
    """Many small files (flush.count 10, two runs): compact --older-than 1h leaves them (all
    young); compact merges them into one file a partition, same rows, offsets kept."""
    name, bkt = topic(partitions=P), bucket()
    text = kcql(name, bkt, 10)
    produce(name, 200, partitions=P, key=key_of, timestamp=BASE)
    assert main(run_args(text, broker, s3_endpoint)) == 0, capsys.readouterr().err
    produce(name, 40, first=200, partitions=P, key=key_of, timestamp=BASE)
    assert main(run_args(text, broker, s3_endpoint)) == 0, capsys.readouterr().err
    table = reader_table(catalog_uri, s3_endpoint)
    before = table.inspect.files().num_rows
    assert before >= 24, before

    code, out, err = cli(
        capsys, *command("compact", text, broker, s3_endpoint, "--older-than", "1h")
    )
    assert code == 0 and "nothing to compact" in out, (out, err)
    assert reader_table(catalog_uri, s3_endpoint).inspect.files().num_rows == before

    code, out, err = cli(
        capsys, *command("compact", text, broker, s3_endpoint, "--target-size", "1MB")
    )
    assert code == 0, err
    table = reader_table(catalog_uri, s3_endpoint)
    assert table.inspect.files().num_rows == P, out
    assert rows(table) == expected(list(range(240)))
    summary = ours(table)
    assert summary["kafka-archive.maintenance"] == "compact"
    assert summary[f"{OFFSETS}{name}.0"] == "120" and summary[f"{OFFSETS}{name}.1"] == "120"
    # Compacted again: nothing to merge.
    code, out, err = cli(capsys, *command("compact", text, broker, s3_endpoint))
    assert code == 0 and "nothing to compact" in out, (out, err)
    produce(name, 20, first=240, partitions=P, key=key_of, timestamp=BASE)
    assert main(run_args(text, broker, s3_endpoint)) == 0, capsys.readouterr().err
    assert rows(reader_table(catalog_uri, s3_endpoint)) == expected(list(range(260)))


@contextlib.contextmanager
def killed_at_new_file(args: list[str], s3: Any, bucket: str) -> Iterator[None]:
    """``kafka-archive *args`` SIGKILLed (its process group) as soon as a new data file is
    in S3 (the command's first write of one: mid-rewrite, before its commit)."""
    before = data_keys(s3, bucket)
    process = subprocess.Popen(
        [KAFKA_ARCHIVE, *args],
        env=process_env(**LOG_MODE),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not data_keys(s3, bucket) - before:
            assert process.poll() is None, "the command ended before writing a file"
            assert time.monotonic() < deadline, "the command never wrote a file"
            time.sleep(0.01)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)


@pytest.mark.parametrize("verb", ["erase", "compact"])
def test_a_command_killed_before_its_commit_is_finished_by_a_rerun(
    verb: str,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    log_mode: None,
) -> None:
    """SIGKILL at the command's first new data file: the table is as before (the commit never
    happened); a rerun removes the killed command's files and finishes: every record that
    should be there once, no file left that no snapshot references."""
    name, bkt = topic(partitions=P), bucket()
    text = kcql(name, bkt, 10)
    produce(name, 200, partitions=P, key=key_of, timestamp=BASE)
    assert main(run_args(text, broker, s3_endpoint)) == 0, capsys.readouterr().err
    extra = ("--key", "k3") if verb == "erase" else ()
    args = command(verb, text, broker, s3_endpoint, *extra)
    with killed_at_new_file(args, s3_client, bkt):
        pass
    table = reader_table(catalog_uri, s3_endpoint)
    assert rows(table) == expected(list(range(200)))  # not committed
    assert data_keys(s3_client, bkt) - referenced(table, bkt), "the kill left no file"
    code, _, err = cli(capsys, *args)
    assert code == 0, err
    table = reader_table(catalog_uri, s3_endpoint)
    want = [i for i in range(200) if verb != "erase" or i % 10 != 3]
    assert rows(table) == expected(want)
    assert data_keys(s3_client, bkt) == referenced(table, bkt), "orphans left"
    if verb == "compact":
        assert table.inspect.files().num_rows == P
    produce(name, 20, first=200, partitions=P, key=key_of, timestamp=BASE)
    assert main(run_args(text, broker, s3_endpoint)) == 0, capsys.readouterr().err
    assert rows(reader_table(catalog_uri, s3_endpoint)) == expected(want + list(range(200, 220)))


def test_an_erase_killed_inside_its_commit_is_finished_by_a_rerun(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    log_mode: None,
) -> None:
    """SIGKILL of erase's process group at its first write under ``metadata/`` after its new
    data files (every file written, the commit begun, the catalog not yet moved): the table
    as before; a rerun finishes, each record that should stay once, no orphan left."""
    name, bkt = topic(partitions=P), bucket()
    text = kcql(name, bkt, 50)
    produce(name, 200, partitions=P, key=key_of, timestamp=BASE)
    assert main(run_args(text, broker, s3_endpoint)) == 0, capsys.readouterr().err
    wrote, entered, release = threading.Event(), threading.Event(), threading.Event()

    def hold(method: str, path: str, headers: dict[str, str]) -> bool:
        if method in ("PUT", "POST") and "/tables/orders/data/" in path:
            wrote.set()
        elif (
            method in ("PUT", "POST")
            and "/tables/orders/metadata/" in path
            and wrote.is_set()
            and not entered.is_set()
        ):
            entered.set()
            release.wait(120)
        return False

    with FaultProxy(s3_endpoint, rate=0.0, seed=1) as proxy:
        proxy.drop_response = hold
        args = [KAFKA_ARCHIVE, *command("erase", text, broker, proxy.url, "--key", "k5")]
        with process_group(args, process_env(**LOG_MODE)) as erase:
            assert entered.wait(180), erase.communicate()
            os.killpg(erase.pid, signal.SIGKILL)
            erase.wait(timeout=60)
            release.set()
    table = reader_table(catalog_uri, s3_endpoint)
    assert rows(table) == expected(list(range(200)))
    assert data_keys(s3_client, bkt) - referenced(table, bkt), "the kill left no file"
    code, _, err = cli(capsys, *command("erase", text, broker, s3_endpoint, "--key", "k5"))
    assert code == 0, err
    table = reader_table(catalog_uri, s3_endpoint)
    assert rows(table) == expected([i for i in range(200) if i % 10 != 5])
    assert data_keys(s3_client, bkt) == referenced(table, bkt), "orphans left"


def test_an_erase_a_newer_run_claims_over_stops_with_exit_18(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    catalog_uri: str,
    topic: Callable[..., str],
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    log_mode: None,
) -> None:
    """erase frozen (SIGSTOP of its process group) at its first write under ``metadata/``
    after its new data files (inside its commit); a run claims (a higher epoch), fences the
    table, removes the erase's files and commits new records; erase thawed: exit 18, one
    line, and the table holds every record once (nothing erased)."""
    name, bkt = topic(partitions=P), bucket()
    text = kcql(name, bkt, 50)
    produce(name, 200, partitions=P, key=key_of, timestamp=BASE)
    assert main(run_args(text, broker, s3_endpoint)) == 0, capsys.readouterr().err
    produce(name, 20, first=200, partitions=P, key=key_of, timestamp=BASE)

    wrote, entered, release = threading.Event(), threading.Event(), threading.Event()

    def hold(method: str, path: str, headers: dict[str, str]) -> bool:
        if method in ("PUT", "POST") and "/tables/orders/data/" in path:
            wrote.set()
        elif (
            method in ("PUT", "POST")
            and "/tables/orders/metadata/" in path
            and wrote.is_set()
            and not entered.is_set()
        ):
            entered.set()
            release.wait(120)
        return False

    with FaultProxy(s3_endpoint, rate=0.0, seed=1) as proxy:
        proxy.drop_response = hold
        args = [KAFKA_ARCHIVE, *command("erase", text, broker, proxy.url, "--key", "k4")]
        # (A short ttl: erase's presence expires once it is frozen.)
        env = process_env(**LOG_MODE, KAFKA_ARCHIVE_LOCK_TTL_SECONDS="6")
        with process_group(args, env) as erase:
            assert entered.wait(180), erase.communicate()
            # Live, erase keeps the run out (its presence); frozen past its ttl, it is
            # taken over, and the run's claim fences it.
            assert main(run_args(text, broker, s3_endpoint)) == 8
            live_err = capsys.readouterr().err
            assert "erase of job" in live_err and "is writing" in live_err, live_err
            os.killpg(erase.pid, signal.SIGSTOP)
            release.set()
            wait_presence_expired(s3_client, bkt, "tables/orders")
            run_code = main(run_args(text, broker, s3_endpoint))
            run_err = capsys.readouterr().err
            os.killpg(erase.pid, signal.SIGCONT)
            _, erase_err = erase.communicate(timeout=180)
    assert run_code == 0, run_err
    assert erase.returncode == 18, erase_err[-2000:]
    assert "newer run" in erase_err and "Traceback" not in erase_err, erase_err[-2000:]
    table = reader_table(catalog_uri, s3_endpoint)
    assert rows(table) == expected(list(range(220)))
    assert "kafka-archive.maintenance" not in ours(table)
    assert not [k for k in table.properties if k.startswith(REMOVED)]
    # The table references no file the run removed (the erase's, of a lower epoch).
    current = table.inspect.files().column("file_path").to_pylist()
    assert max(Counter(current).values()) == 1
    assert referenced(table, bkt) <= data_keys(s3_client, bkt)


def test_refused_with_one_line_and_exit_2_before_anything_is_written(
    s3_endpoint: str,
    s3_client: Any,
    catalog_uri: str,
    bucket: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A table whose rows carry no offsets (no envelope) cannot record what erase removes; a
    target without a commit log (commit_protocol=states, or never archived) is refused."""
    bkt = bucket()
    bare = kcql_for("orders", bkt, 10)
    cases = [
        (
            command("erase", bare, "127.0.0.1:1", s3_endpoint, "--key", "a", "--key-field", "id"),
            "do not carry their partition and offset",
        ),
        (
            command(
                "expire", kcql("orders", bkt, 10), "127.0.0.1:1", s3_endpoint, "--older-than", "1d"
            ),
            "has no commit log",
        ),
        (
            command("compact", kcql("orders", bkt, 10), "127.0.0.1:1", s3_endpoint),
            "has no commit log",
        ),
    ]
    for args, why in cases:
        code, out, err = cli(capsys, *args)
        assert code == 2, (args[0], out, err)
        assert why in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) <= 2, err  # the line and its hint
    assert "Contents" not in s3_client.list_objects_v2(Bucket=bkt)

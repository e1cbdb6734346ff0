"""Fencing: runs of one job that overlap in time — a run frozen longer than its lease while a
second run takes over, a lease renewal whose response is lost, two hosts with one hostname,
an endpoint that ignores conditional headers, crashes between upload and commit, dead
letters past the commit cut — never lose or duplicate a record.

Every run a fault hits is a whole ``kafka-archive`` process (its Spark JVM and Python workers
in one process group, frozen with SIGSTOP and thawed with SIGCONT); the next run of the job,
which finds what the fault left, runs to its end in this process on the session's Spark
(:func:`_run_here`: no JVM to start); afterwards an independent reader (plain boto3 + json)
finds every produced record exactly once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from archive_helpers import (
    archived_ids,
    process_env,
    process_group,
    run_command,
    run_here,
    wait_lease_expired,
)
from faultproxy import FaultProxy

pytestmark = pytest.mark.integration

DAYS_AGO = int(time.time() * 1000) - 3 * 86_400_000
TTL = 6  # seconds of lease: the driver renews every TTL/6, a frozen run loses it in TTL


def _env(**extra: str) -> dict[str, str]:
    return process_env(**{"KAFKA_ARCHIVE_LOCK_TTL_SECONDS": str(TTL), **extra})


_command = run_command


def _run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A whole run, to its end."""
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _run_here(command: list[str], **env: str) -> int:
    """:func:`archive_helpers.run_here` with :func:`_env`'s lease unless ``env`` says."""
    return run_here(command, **{"KAFKA_ARCHIVE_LOCK_TTL_SECONDS": str(TTL), **env})


def _finish(process: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def _pending(s3: Any, bucket: str) -> list[str]:
    page = s3.list_objects_v2(Bucket=bucket, Prefix="arch/.kafka-archive/")
    return [i["Key"] for i in page.get("Contents", []) if "/pending/" in i["Key"]]


def _committed(s3: Any, bucket: str) -> int:
    """The sum of every partition's committed next offset."""
    total = 0
    page = s3.list_objects_v2(Bucket=bucket, Prefix="arch/.kafka-archive/")
    for item in page.get("Contents", []):
        if "/state/" in item["Key"]:
            body = json.loads(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
            total += int(body["next_offset"])
    return total


def _wait(
    predicate: Callable[[], bool], what: str, timeout: float = 180, *, fail: bool = True
) -> None:
    """Until ``predicate`` holds; past ``timeout`` the test fails (or, ``fail=False``, goes
    on)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            assert not fail, f"timed out waiting for {what}"
            return
        time.sleep(0.02)


def _group_alive(process: subprocess.Popen[str]) -> bool:
    """Whether any process of ``process``'s group (its Spark JVM, Python workers) is left."""
    process.poll()  # the leader reaped once it exited: a zombie would still count
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return True


@contextlib.contextmanager
def _started(
    command: list[str], env: dict[str, str], until: Callable[[], bool], what: str
) -> Iterator[subprocess.Popen[str]]:
    """A run (see :func:`_process`), once ``until`` holds or the run ended."""
    with process_group(command, env) as process:
        _wait(lambda: until() or process.poll() is not None, what)
        yield process


def _archived_once(s3: Any, bucket: str, command: list[str], expected: list[int]) -> None:
    """A whole run to its end (in this process); then the archive holds the ``expected`` ids,
    each once."""
    assert _run_here(command) == 0
    ids = archived_ids(s3, bucket)
    assert len(ids) == len(set(ids)), "records archived twice"
    assert ids == expected, "records lost"


@pytest.mark.every_s3(ids=["bounded"])
@pytest.mark.parametrize(
    ("follow", "flush_b"),
    [(False, 1000), (True, 1000), (False, 700)],
    ids=["bounded", "follow", "bounded-B-with-another-flush-count"],
)
def test_a_run_frozen_past_its_lease_neither_loses_nor_duplicates_a_record(
    follow: bool,
    flush_b: int,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """Run A is frozen (SIGSTOP of its process group) just after it starts uploading; once
    its lease expired, run B takes over, archives further (more records were produced
    meanwhile) and commits; then A is thawed. A must not overwrite or delete what B
    committed, nor commit anything: it stops with exit 18 (fenced)."""
    name, bkt = topic(partitions=2), bucket()
    first = 40_500  # not a multiple of the flush count: each run's last object is cut short
    produce(name, first, timestamp=DAYS_AGO)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.count'=1000)"
    kcql_b = kcql.replace("=1000", f"={flush_b}")
    follow_args = ("--follow", "--poll-interval", "1") if follow else ()
    command = _command(kcql, broker, s3_endpoint, *follow_args)
    command_b = _command(kcql_b, broker, s3_endpoint, *follow_args)
    with _started(
        command, _env(), lambda: bool(_pending(s3_client, bkt)), "run A to start uploading"
    ) as run_a:
        os.killpg(run_a.pid, signal.SIGSTOP)
        assert run_a.poll() is None, "run A finished before it could be frozen"
        produce(name, 3_000, first=first, timestamp=DAYS_AGO + first)
        wait_lease_expired(s3_client, bkt)  # A's lease runs out while it is frozen
        with process_group(command_b, _env()) as run_b:
            if follow:
                _wait(lambda: _committed(s3_client, bkt) == first + 3_000, "run B to commit")
                run_b.send_signal(signal.SIGTERM)
            code_b, _, err_b = _finish(run_b)
            assert code_b == 0, err_b
        assert _committed(s3_client, bkt) == first + 3_000
        os.killpg(run_a.pid, signal.SIGCONT)
        if follow:
            # Time to do harm, were it able to: until every process of A is gone (it stops
            # by itself, fenced), at most three leases; then it is told to stop (and exits
            # 0: the test fails).
            _wait(lambda: not _group_alive(run_a), "A to stop", timeout=3 * TTL, fail=False)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run_a.pid, signal.SIGTERM)
        code_a, _, err_a = _finish(run_a)
    # The next run of the job finds nothing to repair and nothing new.
    _archived_once(
        s3_client, bkt, _command(kcql_b, broker, s3_endpoint), list(range(first + 3_000))
    )
    assert code_a == 18, err_a
    assert "lease" in err_a.lower(), err_a


def _lock_key(s3: Any, bucket: str) -> str:
    page = s3.list_objects_v2(Bucket=bucket, Prefix="arch/.kafka-archive/")
    keys = [str(i["Key"]) for i in page.get("Contents", []) if i["Key"].endswith("/lock.json")]
    assert len(keys) == 1, keys
    return keys[0]


@pytest.mark.every_s3
def test_a_renewal_whose_response_is_lost_keeps_the_lease_and_releases_it(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """The first lease renewal reaches S3 and is applied, but its response is lost: the SDK
    retries, gets 412 (the lock's ETag moved — by our own renewal). The run reads the lock,
    sees its own renewal, and goes on renewing its lease (before, it stopped renewing and
    ran on with a lease that expired under it); at the end it releases it (before, it left
    the lock held), so the next run — from any host — starts at once."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 4000)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.count'=500)"
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:

        def first_renewal(method: str, path: str, headers: dict[str, str]) -> bool:
            conditional = any(k.lower() == "if-match" for k in headers)
            return (
                method == "PUT"
                and path.split("?")[0].endswith("/lock.json")
                and conditional
                and proxy.dropped == 0
            )

        proxy.drop_response = first_renewal
        first = _run(_command(kcql, broker, proxy.url), _env())
    assert proxy.dropped == 1, "no renewal was sent through the proxy"
    assert first.returncode == 0, first.stderr
    lock_puts = [
        i
        for i, (method, path, _) in enumerate(proxy.requests)
        if method == "PUT" and path.split("?")[0].endswith("/lock.json")
    ]
    # Acquisition, the renewal whose answer was lost, its retry (412), then the renewals
    # went on (the run kept its lease) and the release.
    assert len(lock_puts) >= 5, proxy.requests
    lock = json.loads(
        s3_client.get_object(Bucket=bkt, Key=_lock_key(s3_client, bkt))["Body"].read()
    )
    produce(name, 1000, first=4000)
    second = _run_here(_command(kcql, broker, s3_endpoint))
    assert second == 0  # not 8: the lease was released
    assert lock.get("released") is True and lock["renewal"] >= 2, lock
    assert archived_ids(s3_client, bkt) == list(range(5000))


@pytest.mark.parametrize("same_kernel", [False, True], ids=["other-container", "this-kernel"])
def test_a_live_lease_of_another_process_with_our_hostname_is_not_stolen(
    same_kernel: bool,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """A lease held under this host name by a pid that does not exist here: from another
    container with its own PID namespace (host networking shares the name) it is live and
    must be waited out (exit 8); only a holder of this very kernel instance — same boot id
    and PID namespace — is provably dead, and its lease is taken over at once."""
    name, bkt = topic(partitions=1), bucket()
    produce(name, 1000, partitions=1)
    gone = subprocess.Popen(["true"])
    gone.wait()
    with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as file:
        boot_id = file.read().strip()
    pid_ns = os.readlink("/proc/self/ns/pid")
    expires = int(time.time() * 1000) + 600_000
    held = {
        "job": "fence-host",
        "run_id": "elsewhere",
        "epoch": 7,
        "host": socket.gethostname(),
        "boot_id": boot_id if same_kernel else "another-boot-id",
        "pid_ns": pid_ns if same_kernel else "pid:[4026532999]",
        "pid": gone.pid,
        "renewal": 3,
        "expires_at_ms": expires,
        "expires_at": "2099-01-01T00:00:00Z",
        "released": False,
    }
    s3_client.put_object(
        Bucket=bkt, Key="arch/.kafka-archive/fence-host/lock.json", Body=json.dumps(held).encode()
    )
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name}"
    run = _run(_command(kcql, broker, s3_endpoint, "--job-name", "fence-host"), _env())
    if same_kernel:
        assert run.returncode == 0, run.stderr
        assert archived_ids(s3_client, bkt) == list(range(1000))
    else:
        assert run.returncode == 8, run.stderr
        assert "already running" in run.stderr
        assert archived_ids(s3_client, bkt) == []


# Not every_s3: the proxy strips headers the request's SigV4 signature covers, which moto
# does not check and SeaweedFS refuses (403, exit 7) before it could ignore a condition.
def test_an_endpoint_that_ignores_conditional_writes_is_refused(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """A store that drops If-None-Match / If-Match (older MinIO, some gateways) would
    silently remove every fence: the run refuses it (exit 19) before it writes anything,
    unless the user states the risk with the loudly named setting."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 2000)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name}"
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.strip_headers = {"if-none-match", "if-match"}
        refused = _run(_command(kcql, broker, proxy.url), _env())
        assert refused.returncode == 19, refused.stderr
        assert "does not honour conditional writes" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert archived_ids(s3_client, bkt) == []
        unsafe = _env(KAFKA_ARCHIVE_UNSAFE_SINGLE_WRITER_WITHOUT_CONDITIONAL_WRITES="true")
        accepted = _run(_command(kcql, broker, proxy.url), unsafe)
    assert accepted.returncode == 0, accepted.stderr
    assert "UNSAFE" in accepted.stderr
    assert archived_ids(s3_client, bkt) == list(range(2000))


@pytest.mark.every_s3(ids=["changed-flush"])
@pytest.mark.parametrize("flush_after", [100, 70], ids=["same-flush", "changed-flush"])
def test_a_crash_between_upload_and_commit_is_repaired_exactly_once(
    flush_after: int,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """SIGKILL of the run once objects are uploaded and not committed; the next run (with
    the same flush count, or another one: other object boundaries) removes them and
    archives everything once."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 6_500)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.count'=100)"

    def uploaded() -> bool:
        page = s3_client.list_objects_v2(Bucket=bkt, Prefix=f"arch/{name}/")
        return bool(page.get("Contents"))

    with _started(_command(kcql, broker, s3_endpoint), _env(), uploaded, "the first upload") as run:
        os.killpg(run.pid, signal.SIGKILL)
    assert _pending(s3_client, bkt), "the kill did not land between upload and commit"
    assert _committed(s3_client, bkt) < 6_500
    again = kcql.replace("=100", f"={flush_after}")
    _archived_once(s3_client, bkt, _command(again, broker, s3_endpoint), list(range(6_500)))
    assert not _pending(s3_client, bkt)


def _dead_letter_offsets(s3: Any, bucket: str) -> list[int]:
    offsets: list[int] = []
    page = s3.list_objects_v2(Bucket=bucket, Prefix="arch/_dead-letter/")
    for item in page.get("Contents", []):
        body = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        offsets.extend(json.loads(line)["metadata"]["offset"] for line in body.splitlines())
    return sorted(offsets)


def test_dead_letters_past_the_commit_cut_are_written_once(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """--follow holds back the young tail (the commit cut lies before it): the records it
    refuses past the cut are read again by the next batch and run, so only those before the
    cut may be written as dead letters by this batch, or they are archived twice.

    A loaded machine can leave the driver unscheduled for seconds while its task writes (the
    lease is renewed by the driver, proved by the task before each write): here the driver
    is frozen for 5 s while the task's dead letters are on their way. Nothing in this test
    is about losing the lease, so its lease outlasts that (with the module's 6 s lease the
    task's next proof fails and the run stops, exit 18)."""
    name, bkt = topic(partitions=1), bucket()
    bad = {100, 500, 1100, 1200}
    now = int(time.time() * 1000)
    produce(
        name,
        (
            {
                "value": f"not json {i}".encode() if i in bad else json.dumps({"id": i}).encode(),
                "partition": 0,
                "timestamp": (DAYS_AGO + i) if i < 1000 else now,
            }
            for i in range(1300)
        ),
    )
    kcql = (
        f"INSERT INTO {bkt}:arch SELECT * FROM {name} "
        "PROPERTIES('flush.count'=1000, 'error.policy'='dead-letter')"
    )
    env = _env(KAFKA_ARCHIVE_LOCK_TTL_SECONDS="120")
    with FaultProxy(s3_endpoint, rate=0.0, seed=0) as proxy:
        proxy.hold = lambda method, path, _: method == "PUT" and "/_dead-letter/" in path
        command = _command(kcql, broker, proxy.url, "--follow", "--poll-interval", "1")
        with process_group(command, env) as service:
            _wait(lambda: proxy.held.is_set() or service.poll() is not None, "dead letters")
            os.kill(service.pid, signal.SIGSTOP)  # the driver alone: its task goes on
            time.sleep(5)
            proxy.release.set()  # the task commits while the driver is still frozen
            _wait(lambda: _committed(s3_client, bkt) >= 1000, "the old records to be committed")
            os.kill(service.pid, signal.SIGCONT)
            assert _committed(s3_client, bkt) < 1300, "the young tail was not held back"
            time.sleep(8)  # several more micro-batches read the held-back tail again
            service.send_signal(signal.SIGTERM)
            code, _, err = _finish(service)
    assert code == 0, err
    assert _run_here(_command(kcql, broker, s3_endpoint), KAFKA_ARCHIVE_LOCK_TTL_SECONDS="120") == 0
    ids = archived_ids(s3_client, bkt)
    assert ids == [i for i in range(1300) if i not in bad], "records lost or archived twice"
    assert _dead_letter_offsets(s3_client, bkt) == sorted(bad)


def _state_of(s3: Any, bucket: str, name: str, partition: int) -> tuple[str, dict[str, Any]]:
    key = f"arch/.kafka-archive/state/{name}/{partition}.json"
    return key, json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())


def test_a_following_run_never_commits_over_a_state_written_between_its_batches(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """A follow session keeps the states of partitions that had nothing new instead of
    reading them each batch. Another writer stamps partition 0's state between two batches
    (as a run with a newer lease fences it) while the session's lease looks intact; when
    records arrive, the session's commit of partition 0 is refused (exit 18), nothing of it
    is committed, and the next run archives every record once."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 1_000, timestamp=DAYS_AGO)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.count'=100)"
    command = _command(kcql, broker, s3_endpoint, "--follow", "--poll-interval", "1")
    env = _env(KAFKA_ARCHIVE_LOCK_TTL_SECONDS="120")  # the lease stays provable throughout
    with process_group(command, env) as run:
        _wait(lambda: _committed(s3_client, bkt) == 1_000 or run.poll() is not None, "a commit")
        time.sleep(3)  # batches with nothing new: the session keeps both states
        key, state = _state_of(s3_client, bkt, name, 0)
        stamped = {**state, "epoch": state["epoch"] + 1, "run_id": "another-run"}
        s3_client.put_object(Bucket=bkt, Key=key, Body=json.dumps(stamped).encode())
        produce(name, 200, first=1_000, timestamp=DAYS_AGO + 1_000)
        code, _, err = _finish(run, timeout=120)
    assert code == 18, err
    assert "refused" in err and "Traceback" not in err, err
    assert _state_of(s3_client, bkt, name, 0)[1] == stamped, "partition 0 was committed over"
    _archived_once(s3_client, bkt, _command(kcql, broker, s3_endpoint), list(range(1_200)))
    assert not _pending(s3_client, bkt)


@pytest.mark.full
def test_a_following_run_frozen_between_batches_past_its_lease_stops_when_thawed(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    spark: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """Run A follows and has committed; frozen between batches (SIGSTOP) past its lease, run
    B takes over, archives what arrived meanwhile and exits. Thawed, A's kept states are
    stale: it must neither write nor delete anything, and stops with exit 18."""
    name, bkt = topic(partitions=2), bucket()
    produce(name, 1_000, timestamp=DAYS_AGO)
    kcql = f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.count'=100)"
    follow = _command(kcql, broker, s3_endpoint, "--follow", "--poll-interval", "1")
    with process_group(follow, _env()) as run_a:
        _wait(lambda: _committed(s3_client, bkt) == 1_000 or run_a.poll() is not None, "A")
        time.sleep(2)  # a batch or two with nothing new
        os.killpg(run_a.pid, signal.SIGSTOP)
        assert run_a.poll() is None, "run A ended before it could be frozen"
        produce(name, 300, first=1_000, timestamp=DAYS_AGO + 1_000)
        time.sleep(TTL + 2)
        after_b = _run(_command(kcql, broker, s3_endpoint), _env())
        assert after_b.returncode == 0, after_b.stderr
        assert _committed(s3_client, bkt) == 1_300
        states = [_state_of(s3_client, bkt, name, p)[1] for p in (0, 1)]
        produce(name, 100, first=1_300, timestamp=DAYS_AGO + 1_300)
        os.killpg(run_a.pid, signal.SIGCONT)
        code_a, _, err_a = _finish(run_a, timeout=120)
    assert code_a == 18, err_a
    assert "lease" in err_a.lower(), err_a
    assert [_state_of(s3_client, bkt, name, p)[1] for p in (0, 1)] == states
    _archived_once(s3_client, bkt, _command(kcql, broker, s3_endpoint), list(range(1_400)))

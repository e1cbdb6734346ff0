"""The pure fencing decisions: epochs only grow, who may take a lease over, whether a lease
is still a run's, a renewal whose response was lost, commit ranges, dead letters at a cut."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.errors import FencedError
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.state import lease
from kafka_archive.archiver.state.checkpoint import append_commit, committed_by
from kafka_archive.archiver.write.deadletter import DeadLetters

HERE = lease.Identity(host="node-1", boot_id="boot-a", pid_ns="pid:[4026531836]", pid=100)
NOW = 1_800_000_000_000


def _held(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "run_id": "other",
        "epoch": 5,
        "host": "node-1",
        "boot_id": "boot-a",
        "pid_ns": "pid:[4026531836]",
        "pid": 42,
        "expires_at_ms": NOW + 60_000,
        "renewal": 1,
        "released": False,
    }
    body.update(fields)
    return body


@given(st.one_of(st.none(), st.integers(0, 2**62)), st.integers(0, 2**62))
def test_a_new_epoch_is_above_the_previous_one(previous: int | None, now: int) -> None:
    epoch = lease.next_epoch(previous, now)
    assert previous is None or epoch > previous
    assert epoch >= now


def test_a_live_lease_is_never_taken_over_for_a_shared_hostname_alone() -> None:
    alive = {42: False}.get  # pid 42 does not exist in *our* namespace
    other_ns = _held(pid_ns="pid:[4026532999]")
    other_boot = _held(boot_id="boot-b")
    no_identity = {k: v for k, v in _held().items() if k not in ("boot_id", "pid_ns")}
    for body in (other_ns, other_boot, no_identity, _held(host="node-2")):
        assert not lease.may_take_over(body, NOW, HERE, alive=lambda pid: bool(alive(pid)))
    # The same kernel instance, pid gone: provably dead.
    assert lease.may_take_over(_held(), NOW, HERE, alive=lambda pid: False)
    # ... but not while the pid lives, nor when it is our own pid.
    assert not lease.may_take_over(_held(), NOW, HERE, alive=lambda pid: True)
    assert not lease.may_take_over(_held(pid=100), NOW, HERE, alive=lambda pid: False)
    # Without a readable identity of our own nothing is provable.
    blind = lease.Identity("node-1", "", "", 100)
    assert not lease.may_take_over(_held(), NOW, blind, alive=lambda pid: False)


@given(st.integers(-(10**6), 10**6), st.booleans())
def test_expired_or_released_leases_are_taken_over(offset_ms: int, released: bool) -> None:
    body = _held(host="elsewhere", expires_at_ms=NOW + offset_ms, released=released)
    assert lease.may_take_over(body, NOW, HERE, alive=lambda pid: True) == (
        released or offset_ms <= 0
    )


def test_a_lock_of_the_older_format_expires_by_its_text_time() -> None:
    body = {"run_id": "dead", "host": "h", "pid": 1, "expires_at": "2000-01-01T00:00:00Z"}
    assert lease.expires_ms(body) == 946_684_800_000
    assert lease.may_take_over(body, NOW, HERE)
    assert lease.expires_ms({"expires_at": "garbage"}) == 0


@given(st.integers(0, 120_000), st.integers(0, 60_000))
def test_a_lease_proves_itself_only_beyond_its_safety_margin(left: int, margin: int) -> None:
    body = _held(run_id="me", epoch=9, expires_at_ms=NOW + left)
    status = lease.lease_status(body, "me", 9, NOW, margin)
    assert status.ok == (left > margin)
    assert status.remaining_ms == (left - margin if left > margin else 0)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (None, "gone"),
        (_held(run_id="newer", epoch=10), "took the job's lease over"),
        (_held(run_id="me", epoch=8), "took the job's lease over"),  # our run id, old epoch
        (_held(run_id="me", epoch=9, released=True), "released"),
    ],
)
def test_a_lease_of_another_run_or_epoch_is_not_ours(body: Any, reason: str) -> None:
    status = lease.lease_status(body, "me", 9, NOW, 1000)
    assert not status.ok and reason in status.reason


def test_a_renewal_applied_with_its_response_lost_is_recognised() -> None:
    mine = _held(run_id="me", epoch=9, renewal=4)
    assert lease.renewal_applied(mine, "me", 9, 4)
    assert not lease.renewal_applied(mine, "me", 9, 5)  # not applied: someone else's ETag
    assert not lease.renewal_applied(_held(run_id="b", epoch=10, renewal=4), "me", 9, 4)
    assert not lease.renewal_applied(None, "me", 9, 4)


def test_the_lease_view_reads_the_lock_once_per_lease_and_stops_when_it_is_gone() -> None:
    reads: list[int] = []
    lock: dict[str, Any] = _held(run_id="me", epoch=9, expires_at_ms=lease.now_ms() + 600_000)

    def read() -> dict[str, Any]:
        reads.append(1)
        return lock

    view = lease.LeaseView(read, "me", 9, ttl_seconds=900)
    for _ in range(100):
        view.check()
    assert len(reads) == 1
    lock.update(run_id="newer", epoch=10)
    view.check()  # still within the proof of the last reading
    with pytest.raises(FencedError, match="took the job's lease over"):
        view.check(force=True)


@given(st.lists(st.tuples(st.integers(1, 50), st.integers(1, 4)), min_size=1, max_size=60))
def test_commit_ranges_name_the_epoch_that_committed_each_offset(
    runs: list[tuple[int, int]],
) -> None:
    """Consecutive commits (length, epoch) from offset 0: every offset of the last ranges
    kept is owned by the epoch that committed it; offsets older than the history: unknown."""
    commits: tuple[tuple[int, int], ...] = ()
    owner: dict[int, int] = {}
    start = 0
    for length, epoch in runs:
        commits = append_commit(commits, start, epoch)
        for offset in range(start, start + length):
            owner[offset] = epoch
        start += length
    assert len(commits) <= 32
    assert all(a[0] < b[0] and a[1] != b[1] for a, b in itertools.pairwise(commits))
    for offset, epoch in owner.items():
        found = committed_by(commits, offset)
        assert found == (epoch if offset >= commits[0][0] else None)


def test_dead_letters_keep_only_the_records_before_the_cut() -> None:
    letters = DeadLetters()
    for offset in (3, 7, 12):
        letters.add(Record("t", 0, offset, None, None, b"x"), "bad")
    kept = letters.below(10)
    assert kept.offsets == [3, 7] and kept.first_offset == 3 and len(kept.lines) == 2
    assert letters.below(3).first_offset is None and letters.below(3).body() == b""

"""The presence's pure decision (:func:`presence.judge`): who may take a target over in
commit_protocol=log, by the store's clock."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.commands import presence
from kafka_archive.archiver.commands.presence import Seen, Verdict, judge
from kafka_archive.archiver.state.lease import Identity
from kafka_archive.kcql.plan import Target

HERE = Identity("host-a", "boot-1", "pid:[4026531836]", 100)
ELSEWHERE = {"host": "host-b", "boot_id": "boot-9", "pid_ns": "pid:[1]", "pid": 7}


def body(run_id: str = "other", ttl: Any = 60, **where: Any) -> dict[str, Any]:
    return {"run_id": run_id, "ttl_seconds": ttl, **(where or ELSEWHERE)}


def never(pid: int) -> bool:
    raise AssertionError("a holder on another kernel is never probed")


@given(
    age=st.floats(min_value=-1000, max_value=1000, allow_nan=False),
    ttl=st.integers(min_value=1, max_value=3600),
    modified=st.floats(min_value=0, max_value=2e9, allow_nan=False),
)
def test_another_host_s_presence_is_live_exactly_while_younger_than_its_ttl(
    age: float, ttl: int, modified: float
) -> None:
    seen = Seen(body(ttl=ttl), modified, modified + age)
    verdict = judge(seen, "me", 900, HERE, never)
    assert verdict is (Verdict.EXPIRED if age >= ttl else Verdict.LIVE)


@given(age=st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_our_own_presence_is_ours_whatever_its_age(age: float) -> None:
    assert judge(Seen(body(run_id="me"), 1000.0, 1000.0 + age), "me", 60, HERE, never) is (
        Verdict.OURS
    )


def test_the_holder_s_ttl_decides_not_the_newcomer_s() -> None:
    seen = Seen(body(ttl=10), 1000.0, 1030.0)
    assert judge(seen, "me", 900, HERE, never) is Verdict.EXPIRED
    assert judge(Seen(body(ttl=900), 1000.0, 1030.0), "me", 10, HERE, never) is Verdict.LIVE


def test_an_unreadable_ttl_is_the_newcomer_s() -> None:
    for ttl in (None, "60", True, 0, -5):
        seen = Seen(body(ttl=ttl), 1000.0, 1030.0)
        assert judge(seen, "me", 20, HERE, never) is Verdict.EXPIRED
        assert judge(seen, "me", 60, HERE, never) is Verdict.LIVE


def test_a_holder_of_this_kernel_whose_pid_is_gone_is_dead_at_once() -> None:
    mine = {"host": HERE.host, "boot_id": HERE.boot_id, "pid_ns": HERE.pid_ns, "pid": 4242}
    seen = Seen(body(**mine), 1000.0, 1001.0)
    assert judge(seen, "me", 60, HERE, lambda pid: False) is Verdict.DEAD
    # alive (a frozen process is alive): live until its ttl passes
    assert judge(seen, "me", 60, HERE, lambda pid: True) is Verdict.LIVE
    # another PID namespace with the same host name proves nothing
    other_ns = Seen(body(**{**mine, "pid_ns": "pid:[9]"}), 1000.0, 1001.0)
    assert judge(other_ns, "me", 60, HERE, lambda pid: False) is Verdict.LIVE


def test_the_exit_8_line_says_who_since_when_and_what_to_do() -> None:
    seen = Seen(
        {**body(ttl=900), "job": "orders", "command": "run", "started": "2026-11-27T19:00:00Z"},
        1000.0,
        1042.0,
    )
    err = presence.locked_error(Target("bkt", "arch"), seen)
    assert err.exit_code == 8
    text = str(err)
    assert "\n" not in text
    for part in ("run of job 'orders'", "s3://bkt/arch", "run other", "host host-b", "pid 7"):
        assert part in text, text
    assert "since 2026-11-27T19:00:00Z" in text and "last seen 42 s ago" in text
    assert err.hint is not None and "900 s" in err.hint


def test_renewals_three_per_ttl() -> None:
    assert presence.renew_interval(900) == 300
    assert presence.renew_interval(6) == 2

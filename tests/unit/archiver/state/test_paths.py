"""The route-owned state layout and the job-scoped one before it never read as each other."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import example, given
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.state import legacy, paths
from kafka_archive.archiver.state.pending import marker_key
from kafka_archive.kcql.plan import Target

TOPICS = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCZ0123456789._-", min_size=1, max_size=30
).filter(lambda t: t not in (".", ".."))
JOBS = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
PREFIXES = st.sampled_from(["", "arch", "a/b"])


class Keys:
    """The one call :func:`legacy.scan` makes."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys

    def list_keys(self, bucket: str, prefix: str) -> Iterator[str]:
        return iter(sorted(k for k in self.keys if k.startswith(prefix)))


@given(PREFIXES, TOPICS, st.integers(0, 999), st.integers(0, 10**12))
@example("arch", "state", 0, 5)
@example("arch", "pending", 3, 0)
@example("", "lock.json", 1, 2)
def test_route_keys_are_never_taken_for_the_old_layout(
    prefix: str, topic: str, partition: int, start: int
) -> None:
    target, tp = Target("bkt", prefix), TopicPartition(topic, partition)
    keys = [
        paths.state_key(target, tp),
        paths.lock_key(target),
        paths.probe_key(target, "r1"),
        marker_key(target, tp, start, f"{prefix}/{topic}/0/x.json"),
    ]
    found = legacy.scan(Keys(keys), target)  # type: ignore[arg-type]
    assert (found.locks, found.states, found.markers) == ([], {}, {})


@given(PREFIXES, JOBS, TOPICS, st.integers(0, 999))
@example("arch", "state", "state", 0)
@example("arch", "pending", "pending", 1)
def test_old_layout_keys_are_read_as_the_old_code_wrote_them(
    prefix: str, job: str, topic: str, partition: int
) -> None:
    target, tp = Target("bkt", prefix), TopicPartition(topic, partition)
    root = paths.legacy_root(target, job)
    state = f"{root}/state/{topic}/{partition}.json"
    marker = f"{root}/pending/{topic}/{partition}/{7:020d}-0123456789abcdef.json"
    found = legacy.scan(Keys([f"{root}/lock.json", state, marker]), target)  # type: ignore[arg-type]
    assert found.locks == [job]
    assert found.states == {tp: {job: state}}
    assert found.markers == {(job, tp): [marker]}

"""The route-owned state layout and the job-scoped one before it never read as each other."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.protocol import log, naming
from kafka_archive.archiver.state import legacy, paths
from kafka_archive.archiver.state.pending import Marker, marker_key, watch_key
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


def _route_keys(target: Target, tp: TopicPartition, start: int) -> list[str]:
    """Every key this version writes under ``target``'s ``.kafka-archive/`` for ``tp``."""
    marker = marker_key(target, tp, start, f"{target.prefix}/{tp.topic}/0/x.json")
    return [
        paths.state_key(target, tp),
        paths.lock_key(target),
        paths.index_key(target),
        paths.probe_key(target, "r1"),
        paths.topic_identity_key(target, tp.topic),
        paths.columns_key(target, tp.topic),
        marker,
        watch_key(Marker(marker, start), target, tp),
        log.entry_key(naming.log_head(target), start),
        log.checkpoint_key(naming.log_head(target), start),
    ]


@given(PREFIXES, TOPICS, st.integers(0, 999), st.integers(0, 10**12))
@example("arch", "state", 0, 5)
@example("arch", "pending", 3, 0)
@example("", "lock.json", 1, 2)
@example("arch", "lock", 0, 0)
def test_route_keys_are_never_taken_for_the_old_layout(
    prefix: str, topic: str, partition: int, start: int
) -> None:
    target, tp = Target("bkt", prefix), TopicPartition(topic, partition)
    found = legacy.scan(Keys(_route_keys(target, tp, start)), target)  # type: ignore[arg-type]
    assert (found.locks, found.states, found.markers) == ([], {}, {})


# Topics named as the folders and files of either layout: each a key the scan could misread.
NAMED_LIKE_KEYS = [
    "lock",
    "lock.json",
    "state",
    "pending",
    "watch",
    "index",
    "log",
    "checkpoint",
    "columns",
    "topics",
    "topic",
    "probe-r1",
    "0",
]


@pytest.mark.parametrize("prefix", ["", "arch"])
@pytest.mark.parametrize("topic", NAMED_LIKE_KEYS)
def test_topics_named_like_the_layouts_keys_are_not_the_old_layout(prefix: str, topic: str) -> None:
    target = Target("bkt", prefix)
    keys = [k for p in (0, 1, 12) for k in _route_keys(target, TopicPartition(topic, p), 7)]
    found = legacy.scan(Keys(keys), target)  # type: ignore[arg-type]
    assert (found.locks, found.states, found.markers) == ([], {}, {}), keys


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

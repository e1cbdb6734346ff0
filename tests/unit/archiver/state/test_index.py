"""The state index: a state counts only with the ETag a listing shows; a state the listing
does not show does not exist; the index round-trips what it was given."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.state import index, paths
from kafka_archive.archiver.state.checkpoint import LoadedState, PartitionState
from kafka_archive.archiver.state.pending import marker_key
from kafka_archive.kcql.plan import Target

TOPICS = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCZ0123456789._-", min_size=1, max_size=30
).filter(lambda t: t not in (".", ".."))
TARGET = Target("bkt", "arch")
STATES = st.builds(
    PartitionState,
    next_offset=st.integers(0, 10**12),
    run_id=st.text(max_size=16),
    committed_at=st.text(max_size=24),
    last_objects=st.lists(st.text(max_size=20), max_size=3).map(tuple),
    records=st.integers(0, 10**9),
    bytes=st.integers(0, 10**12),
    objects=st.integers(0, 10**6),
    epoch=st.integers(0, 10**15),
    commits=st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 10**15)), max_size=4).map(
        tuple
    ),
)


class Bytes:
    """The one call :func:`index.read` makes, answered from memory."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects

    def get_bytes(self, bucket: str, key: str) -> bytes | None:
        return self.objects.get(key)


@given(TOPICS, st.integers(0, 9999), st.text(min_size=1, max_size=34))
def test_a_listing_names_each_state_once_and_nothing_else(
    topic: str, partition: int, etag: str
) -> None:
    tp = TopicPartition(topic, partition)
    listing = [
        (paths.state_key(TARGET, tp), etag),
        (paths.lock_key(TARGET), '"lock"'),
        (paths.index_key(TARGET), '"index"'),
        (paths.probe_key(TARGET, "r1"), '"probe"'),
        (marker_key(TARGET, tp, 7, "arch/x.json"), '"marker"'),
        (f"{paths.legacy_root(TARGET, 'job')}/state/{topic}/{partition}.json", '"old"'),
    ]
    assert index.state_etags(TARGET, listing) == {tp: etag}


def test_only_a_listed_etag_proves_an_entry() -> None:
    a, b, c, d = (TopicPartition("t", p) for p in range(4))
    entry = LoadedState(PartitionState(5, "r", "now"), '"e1"')
    entries = {a: entry, b: entry, c: entry}
    etags = {a: '"e1"', b: '"e2"', d: '"e3"'}
    # a: listed with the entry's ETag; b: changed since; c: gone; d: not indexed.
    assert index.proven(etags, entries, [a, b, c, d]) == {a: entry, c: LoadedState(None, None)}


@given(st.dictionaries(st.tuples(TOPICS, st.integers(0, 999)), STATES, max_size=8))
def test_the_index_holds_what_it_was_given(states: dict[tuple[str, int], PartitionState]) -> None:
    loaded = {TopicPartition(t, p): LoadedState(s, f'"{t}-{p}"') for (t, p), s in states.items()}
    store = Bytes({paths.index_key(TARGET): index.document(loaded, "job")})
    assert index.read(store, TARGET) == loaded  # type: ignore[arg-type]


def test_no_state_or_no_etag_is_not_indexed() -> None:
    tp, other = TopicPartition("t", 0), TopicPartition("t", 1)
    states = {tp: LoadedState(None, None), other: LoadedState(PartitionState(1, "r", ""), None)}
    store = Bytes({paths.index_key(TARGET): index.document(states, "job")})
    assert index.read(store, TARGET) == {}  # type: ignore[arg-type]


def test_a_missing_damaged_or_newer_index_is_ignored() -> None:
    key = paths.index_key(TARGET)
    for stored in (
        {},
        {key: b"not json"},
        {key: b'{"version": 2, "states": {}}'},
        {key: b'{"version": 1, "states": {"t": {"0": {"etag": "x"}}}}'},
        {key: b'{"version": 1, "states": {"t": {"0": {"etag": "x", "state": {"version": 9}}}}}'},
    ):
        assert index.read(Bytes(stored), TARGET) == {}  # type: ignore[arg-type]

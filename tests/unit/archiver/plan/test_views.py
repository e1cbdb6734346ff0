"""partition_states: the one loop that reads partitions' states for run, status and verify:
one GET of each state (none for an Iceberg route), and planning asks nothing more of S3."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Iterator

from kafka_archive import kcql
from kafka_archive.archiver.config.settings import KafkaSettings, S3Settings, Settings
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.kafka.admin import Watermarks
from kafka_archive.archiver.plan import units as jobs
from kafka_archive.archiver.plan.preflight import Preflight
from kafka_archive.archiver.plan.views import PartitionView, partition_states
from kafka_archive.archiver.state.checkpoint import LoadedState, PartitionState
from kafka_archive.archiver.store.s3 import Document
from kafka_archive.kcql.plan import Target

PARTITIONS = 40
ICEBERG = "PROPERTIES('table.format'='iceberg', 'iceberg.table'='db.t')"


class CountingStore:
    """S3 reads, counted: state ``a/…/0.json`` holds next offset 7, every other is absent."""

    def __init__(self) -> None:
        self.gets: Counter[str] = Counter()
        self.listings = 0
        self._lock = threading.Lock()  # states are read on a pool of threads

    def get_document(self, bucket: str, key: str) -> Document | None:
        with self._lock:
            self.gets[key] += 1
        if key.startswith("a/") and key.endswith("/0.json"):
            return Document({"next_offset": 7, "run_id": "r", "committed_at": "t"}, "etag-0")
        return None

    def list_keys(self, bucket: str, prefix: str, start_after: str = "") -> Iterator[str]:
        self.listings += 1
        return iter(())


class StubAdmin:
    """Kafka's side: every partition holds offsets 0..100 (a job starting at the earliest
    offset looks up no time and no group)."""

    def looked_up(self, *args: object) -> None:
        raise AssertionError("a job starting at the earliest offset looks nothing up")

    offset_for_time = group_offset = looked_up

    def offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Watermarks]:
        return {tp: Watermarks(0, 100, 100) for tp in tps}

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        return {}  # a broker that tells no topic ids: no topic record read or written


def _pre(text: str, store: CountingStore) -> Preflight:
    return Preflight("job", store, kcql.parse(text), StubAdmin())  # type: ignore[arg-type]


def test_a_run_reads_each_state_once_and_plans_without_another_get() -> None:
    store = CountingStore()
    pre = _pre("INSERT INTO bkt:a SELECT * FROM t; INSERT INTO bkt:c SELECT * FROM u", store)
    partitions = {"t": tuple(range(PARTITIONS)), "u": tuple(range(PARTITIONS))}
    views = partition_states(pre, partitions=partitions, legacy=False)
    assert [(v.route_index, v.tp.partition) for v in views] == [
        (i, p) for i in (0, 1) for p in range(PARTITIONS)
    ]
    assert len(store.gets) == 2 * PARTITIONS and set(store.gets.values()) == {1}
    assert views[0].committed == 7 and views[0].loaded.etag == "etag-0"
    settings = Settings(KafkaSettings("unused:9092"), S3Settings(region="us-east-1"))
    work = jobs.plan_work(
        views,
        store=pre.store,
        admin=pre.kafka,
        settings=settings,
        job="job",
        run_id="run",
        now_ms=0,
    )
    assert len(work.units) == 2 * PARTITIONS
    assert [u.start for u in work.units[:2]] == [7, 0]
    assert sum(store.gets.values()) == 2 * PARTITIONS, "planning read no state again"
    assert store.listings == 4, "one listing of the markers and one of the watches per target"


def test_an_iceberg_route_reads_its_offsets_from_the_table_not_from_s3() -> None:
    store = CountingStore()
    pre = _pre(f"INSERT INTO bkt:ice SELECT * FROM t STOREAS PARQUET {ICEBERG}", store)
    tables = {0: {TopicPartition("t", 1): 42}}
    views = partition_states(pre, partitions={"t": (0, 1)}, tables=tables)
    assert [v.committed for v in views] == [None, 42]
    assert not store.gets


def test_a_read_only_command_falls_back_to_the_state_of_the_layout_before_routes() -> None:
    store = CountingStore()
    views = partition_states(
        _pre("INSERT INTO bkt:c SELECT * FROM u", store), partitions={"u": (0,)}
    )
    assert views[0].state is None
    assert len(store.gets) == 2  # the route's state, then the job's of the old layout


class MarkedStore(CountingStore):
    """:class:`CountingStore` whose target ``a`` holds an intent marker of partition
    ``marked`` of topic ``t`` (its body gone: nothing to delete)."""

    def __init__(self, marked: int) -> None:
        super().__init__()
        self.marked = marked

    def list_keys(self, bucket: str, prefix: str, start_after: str = "") -> Iterator[str]:
        self.listings += 1
        return iter([f"{prefix}t/{self.marked}/{0:020d}-0123456789abcdef.json"])

    def get_bytes(self, bucket: str, key: str) -> bytes | None:
        return None

    def delete(self, bucket: str, keys: list[str]) -> None:
        return None


class EndsAtSeven(StubAdmin):
    def offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Watermarks]:
        return {tp: Watermarks(0, 7, 7) for tp in tps}


def test_a_follow_batch_reads_only_the_states_it_does_not_know() -> None:
    """What planning leaves as it read it (nothing new, nothing written) is kept for the next
    batch, which reads only the rest; a partition with intent markers is read again before
    recovery uses its state."""
    store = MarkedStore(marked=PARTITIONS - 1)
    pre = Preflight("job", store, kcql.parse("INSERT INTO bkt:a SELECT * FROM t"), EndsAtSeven())  # type: ignore[arg-type]
    partitions = {"t": tuple(range(PARTITIONS))}
    settings = Settings(KafkaSettings("unused:9092"), S3Settings(region="us-east-1"))

    def plan(views: list[PartitionView]) -> jobs.WorkPlan:
        return jobs.plan_work(
            views,
            store=pre.store,
            admin=pre.kafka,
            settings=settings,
            job="job",
            run_id="run",
            now_ms=0,
        )

    first = plan(partition_states(pre, partitions=partitions, legacy=False))
    zero, marked = TopicPartition("t", 0), TopicPartition("t", PARTITIONS - 1)
    # Partition 0 is committed up to Kafka's end (7): kept. The others start at 0: units.
    assert {u.tp.partition for u in first.units} == set(range(1, PARTITIONS))
    assert list(first.settled) == [(0, zero)] and first.settled[(0, zero)].etag == "etag-0"
    assert store.gets[f"a/.kafka-archive/state/t/{PARTITIONS - 1}.json"] == 2
    store.gets.clear()
    views = partition_states(pre, partitions=partitions, legacy=False, known=first.settled)
    assert views[0].loaded == first.settled[(0, zero)]
    assert "a/.kafka-archive/state/t/0.json" not in store.gets
    assert sum(store.gets.values()) == PARTITIONS - 1
    second = plan(views)
    assert store.gets[f"a/.kafka-archive/state/t/{marked.partition}.json"] == 2
    assert "a/.kafka-archive/state/t/0.json" not in store.gets, "nothing of it read again"
    assert list(second.settled) == [(0, zero)]


def test_a_target_with_a_commit_log_takes_its_states_from_the_log_and_reads_none() -> None:
    """``logs``: a partition the log commits has the log's state, one it does not has none;
    no state object of that target is read, the other target's are."""
    store = CountingStore()
    pre = _pre("INSERT INTO bkt:a SELECT * FROM t; INSERT INTO bkt:c SELECT * FROM u", store)
    logged = LoadedState(PartitionState(12, "w", "", objects=3), None)
    logs = {Target("bkt", "a"): {TopicPartition("t", 1): logged}}
    views = partition_states(pre, partitions={"t": (0, 1), "u": (0,)}, logs=logs)
    assert [(v.tp, v.committed) for v in views] == [
        (TopicPartition("t", 0), None),
        (TopicPartition("t", 1), 12),
        (TopicPartition("u", 0), None),
    ]
    assert views[1].loaded is logged
    assert all(key.startswith("c/") for key in store.gets), store.gets

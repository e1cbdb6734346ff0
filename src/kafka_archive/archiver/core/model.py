"""Nouns of the runtime that cross the driver/executor boundary. All frozen and picklable.

A leaf of the archiver: of the project it imports only :mod:`kafka_archive.kcql.plan`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kafka_archive.kcql.plan import Route


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Totals:
    """Running totals of what a partition's archive holds."""

    records: int = 0
    bytes: int = 0
    objects: int = 0


@dataclass(frozen=True, slots=True)
class WorkUnit:
    """One Spark task: archive ``[start, stop)`` of one partition for one route.

    ``stop`` is fixed by the driver before any task runs, so every attempt of a task (retry
    or speculative copy) reads the same records and writes the same keys.
    """

    route_index: int
    route: Route
    tp: TopicPartition
    start: int
    stop: int
    run_id: str
    job: str
    group: str
    state_etag: str | None = None
    prior: Totals = Totals()
    until_ms: int | None = None
    # Open objects whose first record is newer than this (ms) are held back at the end.
    young_after_ms: int | None = None
    # host:port of the driver's progress listener (archiver.progress), if any.
    progress_to: str | None = None
    # The text of the route's 'avro.schema.file', read on the driver (executors may not see it).
    value_schema: str | None = None
    # Where the driver imported the route's 'transform' module from (local masters import it
    # from there too).
    transform_root: str | None = None
    # Fencing (archiver.state.fencing): the epoch of the run's lease on the route's target
    # (0: unfenced), the lease's length, and the partition's commit history before this run.
    epoch: int = 0
    lease_ttl_seconds: int = 900
    commits: tuple[tuple[int, int], ...] = ()
    # The gaps runs passed (allow_gaps), this one's included: written with the commit.
    gaps: tuple[tuple[int, int], ...] = ()
    # A sub-unit (archiver.subunits): ``[start, stop)`` is one piece of the partition's
    # ``[part_start, part_stop)`` for this run. It writes its objects but does not commit:
    # the driver commits the partition over the contiguous prefix of finished pieces.
    part_start: int | None = None
    part_stop: int | None = None
    # The topic's Kafka id the plan confirmed (None: the cluster tells none); the task
    # confirms it again before it marks or commits (archiver.state.identity.TopicProof).
    topic_id: str | None = None
    # An Iceberg route's table as the batch was planned, if it exists: its columns (Avro
    # JSON) type the inferred fields the files share with it (iceberg.table_schema).
    table_schema: str | None = None
    # An objects route's columns as its committed objects have them (AVRO, PARQUET; JSON of
    # formats.schema.to_json, plan.columns): the types of the fields values share with them.
    columns: str | None = None
    # commit_protocol=log (:mod:`kafka_archive.archiver.protocol.tasks`): the session's batch
    # (>= 1; 0: the states protocol). The task creates its objects only, with its writer's run,
    # ``epoch`` (the claim's) and attempt; the driver commits them in the target's log.
    log_batch: int = 0

    @property
    def deferred(self) -> bool:
        """Whether the driver, not the task, commits this unit's partition state."""
        return self.part_start is not None


# S3 request types as AWS bills them (https://aws.amazon.com/s3/pricing/, "Requests & data
# retrievals"): PUT, COPY, POST and LIST at one price (multipart parts are PUTs, creating and
# completing an upload POSTs), DELETE and CANCEL (aborting an upload) free, GET, HEAD and
# everything else at another.
REQUEST_TYPES = ("PUT", "COPY", "POST", "LIST", "GET", "HEAD", "DELETE", "OTHER")
PUT_PRICED = frozenset({"PUT", "COPY", "POST", "LIST"})
FREE = frozenset({"DELETE"})


@dataclass(frozen=True, slots=True)
class S3Requests:
    """S3 requests sent, by type (:data:`REQUEST_TYPES`): every HTTP attempt, retries
    included (each is billed). ``counts``: (type, count) of the types sent, in table order."""

    counts: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> S3Requests:
        for kind in counts:
            if kind not in REQUEST_TYPES:
                raise ValueError(f"not an S3 request type: {kind!r}")
        return cls(tuple((k, int(counts[k])) for k in REQUEST_TYPES if counts.get(k)))

    def by_type(self) -> dict[str, int]:
        """Every type's count, 0 for those not sent, in table order."""
        sent = dict(self.counts)
        return {kind: sent.get(kind, 0) for kind in REQUEST_TYPES}

    @property
    def total(self) -> int:
        return sum(n for _, n in self.counts)

    def __add__(self, other: S3Requests) -> S3Requests:
        mine, theirs = self.by_type(), other.by_type()
        return S3Requests.of({kind: mine[kind] + theirs[kind] for kind in REQUEST_TYPES})

    def __sub__(self, other: S3Requests) -> S3Requests:
        """What was sent since ``other`` (an earlier reading of the same counter)."""
        mine, theirs = self.by_type(), other.by_type()
        return S3Requests.of({kind: max(mine[kind] - theirs[kind], 0) for kind in REQUEST_TYPES})

    def cost(self, put_per_1000: float, get_per_1000: float) -> float:
        """The estimated price in USD: PUT, COPY, POST and LIST at ``put_per_1000`` per 1,000
        requests, DELETE free, the rest at ``get_per_1000``."""
        put = sum(n for kind, n in self.counts if kind in PUT_PRICED)
        get = sum(n for kind, n in self.counts if kind not in PUT_PRICED | FREE)
        return (put * put_per_1000 + get * get_per_1000) / 1000


NO_REQUESTS = S3Requests()


def total_requests(parts: Iterable[S3Requests]) -> S3Requests:
    """The sum of ``parts``: counted by type in one pass (adding them one by one built a
    dict and a new instance per part: 3.7 s for 30,000 parts, a 10,000-partition run's
    units, in its commit and again in its summary)."""
    summed: dict[str, int] = {}
    for part in parts:
        for kind, n in part.counts:
            summed[kind] = summed.get(kind, 0) + n
    return S3Requests.of(summed)


@dataclass(frozen=True, slots=True)
class ObjectWritten:
    key: str
    first_offset: int
    last_offset: int
    records: int
    size: int
    # The object's inferred columns (JSON of formats.schema.to_json; None: not inferred),
    # recorded for the route by the driver once committed (plan.columns).
    columns: str | None = None
    # commit_protocol=log: the ETag its create returned, which the log entry names.
    etag: str | None = None
    # commit_protocol=log: its gzip block index (key, ETag its create returned), which the
    # log entry names beside it (a side object).
    index: tuple[str, str] | None = None
    # The least and greatest time of its records (epoch ms), where they store their time
    # and each has one (None: unknown): the log names them, so expire drops the object
    # wholly before its cut without reading it.
    min_time_ms: int | None = None
    max_time_ms: int | None = None


class CommittedState(Protocol):
    """A partition state as a unit committed it, with the ETag its write returned: a
    :class:`kafka_archive.archiver.state.checkpoint.LoadedState`, which the model names by
    what it offers (the state layer is above the model, and imports it)."""

    @property
    def etag(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class UnitResult:
    route_index: int
    tp: TopicPartition
    start: int
    next_offset: int
    records: int
    bytes: int
    objects: tuple[ObjectWritten, ...]
    seconds: float
    # Records the format could not store, under error.policy skip / dead-letter.
    skipped_records: int = 0
    dead_letters: int = 0
    dead_letter_key: str | None = None
    # S3 requests of this unit that botocore retried.
    s3_retries: int = 0
    # S3 requests of this unit, by type (retried attempts included).
    s3_requests: S3Requests = S3Requests()
    # A sub-unit's intent markers, cleared by the driver once it commits them.
    marker_keys: tuple[str, ...] = ()
    # Spark tasks that archived this partition in the run (several when it was split).
    tasks: int = 1
    # The partition state the unit committed, with the ETag its write returned (None: not
    # known): a follow session's next batch plans from it without reading it again.
    state: CommittedState | None = None
    # Intent markers of the objects the unit committed: stale, cleared by the driver in one
    # bulk delete per batch (``batch_end.clear_markers``), not one request per unit.
    committed_markers: tuple[str, ...] = ()
    # commit_protocol=log: the dead-letter object as created (offsets of its first and last
    # refused record, their count, its size and create ETag), which the log entry names.
    dead_letter_object: ObjectWritten | None = None


@dataclass(frozen=True, slots=True)
class PartitionSkip:
    """A partition the run did not touch, and why (nothing new, ...)."""

    route_index: int
    tp: TopicPartition
    next_offset: int
    reason: str


@dataclass(frozen=True, slots=True)
class Gap:
    """Offsets ``first..last`` of a partition that Kafka deleted (retention, delete-records)
    before they were archived. ``passed``: the run went on from ``last + 1`` (allow_gaps);
    otherwise the partition was left where it was."""

    route_index: int
    tp: TopicPartition
    first: int
    last: int
    passed: bool

    @property
    def records(self) -> int:
        """At most this many records were lost (compaction may have removed some anyway)."""
        return self.last - self.first + 1


@dataclass(frozen=True, slots=True)
class BatchTimings:
    """Where one batch's wall time went (seconds; ``--follow`` makes one per micro-batch).

    ``work`` is the time the Spark tasks spent in their workers archiving units (reading,
    encoding, uploading, committing), spread over Spark's task slots (at least the longest
    task); the rest of the batch is ``overhead``: planning (lease check, offsets, state
    GETs, fencing), the Spark job around the tasks (scheduling, shipping units and results,
    tasks waiting for a slot while others idle) and the driver's commits after it.
    Starting Spark is apart (``spark_start``).
    """

    plan: float = 0.0
    spark_start: float = 0.0
    spark_job: float = 0.0
    work: float = 0.0
    commit: float = 0.0

    @property
    def overhead(self) -> float:
        return max(self.plan + self.spark_job + self.commit - self.work, 0.0)


@dataclass(frozen=True, slots=True)
class RunResult:
    job: str
    run_id: str
    units: tuple[UnitResult, ...]
    skipped: tuple[PartitionSkip, ...]
    seconds: float
    gaps: tuple[Gap, ...] = ()
    timings: BatchTimings | None = None
    targets: tuple[str, ...] = ()  # by route index: where each route writes (bucket:prefix)
    # S3 requests not in a unit's result: the driver's (for a run, all of them; for a batch
    # of --follow, those since the last batch ended) and those of units that failed.
    other_s3: S3Requests = S3Requests()

    @property
    def records(self) -> int:
        return sum(u.records for u in self.units)

    @property
    def bytes(self) -> int:
        return sum(u.bytes for u in self.units)

    @property
    def objects(self) -> int:
        return sum(len(u.objects) for u in self.units)

    @property
    def skipped_records(self) -> int:
        return sum(u.skipped_records for u in self.units)

    @property
    def dead_letters(self) -> int:
        return sum(u.dead_letters for u in self.units)

    @property
    def s3_retries(self) -> int:
        return sum(u.s3_retries for u in self.units)

    @property
    def s3_requests(self) -> S3Requests:
        """Every S3 request of the run (batch) that reached its result: its units' and
        :attr:`other_s3`."""
        return total_requests([self.other_s3, *(u.s3_requests for u in self.units)])

"""``verify``: is every record in the archive exactly once, and does it match Kafka?

Per topic-partition (one Spark task each, like ``run``):

- **Offline** (always): every object decodes in its format and is not empty; no object
  starts at or beyond the committed offset (a crashed run's leftover); no two objects share
  a start offset; in a layout with a single group (no PARTITIONBY, no time folders) objects
  do not overlap, and a gap between two objects is reported as a note (Kafka may have no
  records there: compaction, transaction markers), or as the allowed gap a run passed
  (allow_gaps, recorded in the state); the objects the state names exist.
- **Against Kafka** (unless ``offline``): over the offsets both Kafka still retains and the
  archive claims (from the first object's start to the committed offset), each record's
  object is worked out from the key naming itself (the object of its group with the greatest
  start offset at or below the record's offset, which is how the writer chunked it), and
  the object's records are compared with Kafka's one by one in the format's stored form:
  a record missing from the archive, an extra or different record, or an object whose
  first record is not at its key's start offset is a discrepancy.

Cost: one listing per route, one GET of every object, and one read of the checked offset
range from Kafka; memory holds one decoded object per open group.

This module reads (S3, Kafka) and runs the Spark tasks; what the reads show is judged by
the pure checks of :mod:`kafka_archive.archiver.read.verdict`.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_archive.archiver import iceberg
from kafka_archive.archiver.config.settings import LIST_PRICES, S3Prices, Settings, requests_json
from kafka_archive.archiver.core.errors import TopicRecreatedError
from kafka_archive.archiver.core.model import (
    NO_REQUESTS,
    S3Requests,
    TopicPartition,
    total_requests,
)
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import avsc
from kafka_archive.archiver.formats.compression import decompress
from kafka_archive.archiver.kafka.reader import KafkaReader
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry
from kafka_archive.archiver.partition.fields import projector_for, reader_for
from kafka_archive.archiver.partition.keys import object_group
from kafka_archive.archiver.plan.preflight import Preflight, preflight
from kafka_archive.archiver.plan.views import partition_states
from kafka_archive.archiver.read.committed import CommittedView, committed_view
from kafka_archive.archiver.read.decoding import (
    StoredRecord,
    UnreadableObject,
    read_object,
    stored_form,
)
from kafka_archive.archiver.read.listing import StoredObject, list_partition_objects
from kafka_archive.archiver.read.verdict import (
    Comparison,
    Discrepancy,
    Events,
    Removals,
    allowed_gap_notes,
    found,
    leftover_notes,
    log_holes,
    object_problems,
    placement_problems,
    removed_notes,
    sequence_findings,
)
from kafka_archive.archiver.spark import driver
from kafka_archive.archiver.spark.progress import (
    NullProgress,
    Progress,
    ProgressSender,
    UnitProgress,
)
from kafka_archive.archiver.state import identity
from kafka_archive.archiver.store import requests
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan, Route, Target

# Reading ranges with assign() joins no group and commits nothing; librdkafka wants an id.
_GROUP = "kafka-archive.verify"


@dataclass(frozen=True, slots=True)
class PartitionCheck:
    """One verify task: a partition's objects, its state, and Kafka's retained range."""

    route_index: int
    route: Route
    tp: TopicPartition
    committed: int | None
    state_objects: tuple[str, ...]
    objects: tuple[StoredObject, ...]
    low: int | None = None  # None: offline
    high: int | None = None
    value_schema: str | None = None  # the text of the route's 'avro.schema.file'
    state_object_count: int = 0  # how many objects the state says were written
    progress_to: str | None = None  # the driver's progress listener
    # The topic compacts (cleanup.policy): Kafka may have removed records since they were
    # archived, so the archive holds Kafka's records in order, and maybe more between them.
    compacted: bool = False
    # Why the route's topic is not the one archived (deleted and re-created): checked
    # offline only, its Kafka offsets being another topic's.
    recreated: str | None = None
    # (first, last) offsets Kafka deleted before they were archived that runs passed with
    # allow_gaps, as the partition's state records them: not holes.
    passed_gaps: tuple[tuple[int, int], ...] = ()
    # A target with a commit log: the objects it names that do not exist (key, first, last
    # offset: a hole), and those under the prefix it does not name (uncommitted leftovers,
    # not in ``objects``).
    holes: tuple[tuple[str, int, int], ...] = ()
    leftovers: tuple[str, ...] = ()
    # Offsets erase and expire removed, as the commit log records them: (first, last,
    # reason), in no object and no hole; Kafka's records there are not compared.
    removed: tuple[tuple[int, int, str], ...] = ()

    def span(self) -> tuple[int, int]:
        """The offsets compared with Kafka, [first, last): what the archive claims and Kafka
        still has (empty offline or when they do not meet)."""
        live = [
            o.start_offset
            for o in self.objects
            if self.committed is not None and o.start_offset < self.committed
        ]
        if self.low is None or self.high is None or self.committed is None or not live:
            return 0, 0
        first, last = max(self.low, live[0]), min(self.committed, self.high)
        return (first, last) if first < last else (0, 0)

    def progress(self) -> UnitProgress:
        first, last = self.span()
        return UnitProgress(self.route_index, self.tp.topic, self.tp.partition, first, last, first)


@dataclass(frozen=True, slots=True)
class PartitionVerdict:
    route_index: int
    tp: TopicPartition
    committed: int | None
    objects: int
    records: int
    checked_from: int | None
    checked_to: int | None
    unverifiable_objects: int
    unarchivable_records: int
    discrepancies: tuple[Discrepancy, ...]
    notes: tuple[str, ...]
    recreated: str | None = None  # the topic was deleted and re-created (checked offline)
    allowed_gaps: tuple[tuple[int, int], ...] = ()  # passed with allow_gaps (the state's)
    removed: tuple[tuple[int, int, str], ...] = ()  # erased, expired (the commit log's)
    s3_requests: S3Requests = NO_REQUESTS  # the check's, by type

    @property
    def clean(self) -> bool:
        return not self.discrepancies


@dataclass(frozen=True, slots=True)
class VerifyResult:
    job: str
    offline: bool
    partitions: tuple[PartitionVerdict, ...]
    seconds: float
    targets: tuple[str, ...] = ()  # by route index: where each route writes (bucket:prefix)
    # One per route whose topic was deleted and re-created (exit 17 after the report).
    refused: tuple[TopicRecreatedError, ...] = dataclasses.field(default=(), compare=False)
    # Every S3 request of the verify: the driver's and the checks'.
    s3_requests: S3Requests = NO_REQUESTS

    @property
    def clean(self) -> bool:
        return all(p.clean for p in self.partitions)

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def objects(self) -> int:
        return sum(p.objects for p in self.partitions)


def group_of(
    route: Route, record: Record, registry: SchemaRegistry | None = None
) -> tuple[str | None, ...]:
    """The object group a record was written to (what places its object, apart from tp)."""
    values, time_ms = reader_for(route).place(record, registry)
    return object_group(route, values, timestamp_ms=time_ms)


class _PartitionChecker:
    """Mutable, local to one task: reads the partition's objects (once each) and Kafka's
    records, and hands them to the pure checks of :mod:`.read.verdict`."""

    def __init__(self, check: PartitionCheck, store: S3Store) -> None:
        self.check = check
        self.store = store
        self.problems: list[Discrepancy] = []
        self.notes: list[str] = []
        # The offsets compared with Kafka (first, last), when they were.
        self.compared: tuple[tuple[int, int], ...] = ()
        self.counts: dict[str, int] = {}
        self.events = Events()
        self.unarchivable = 0
        self.unverifiable = 0
        self.size = 0
        self.sender = ProgressSender(check.progress_to, check.progress())

    def report(self, offset: int, *, done: bool = False) -> None:
        """Tell the progress display the next offset to compare, and the records and bytes
        read and objects loaded so far."""
        update = self.sender.finish if done else self.sender.update
        update(
            offset=offset,
            records=sum(self.counts.values()),
            size=self.size,
            objects=len(self.counts),
        )

    def load(self, obj: StoredObject) -> list[StoredRecord] | None:
        data = self.store.get_bytes(self.check.route.target.bucket, obj.key)
        if data is None:
            self.problems.append(found(obj, "object disappeared while verifying", obj.start_offset))
            return None
        self.size += len(data)
        try:
            data = decompress(obj.key, data)
            records = read_object(self.check.route.format, data, self.check.route.envelope)
        except (UnreadableObject, ValueError) as exc:
            text = f"unreadable {self.check.route.format.value} object: {exc}"
            self.problems.append(found(obj, text, obj.start_offset))
            return None
        self.counts[obj.key] = len(records)
        self.problems += object_problems(obj, records)
        return records

    def offline(self) -> None:
        """The objects against the state, each object read (those the comparison with
        Kafka did not), and their sequence in a single-group layout."""
        check = self.check
        self.problems += placement_problems(
            check.route,
            check.tp,
            check.objects,
            check.committed,
            check.state_objects,
            check.state_object_count,
        )
        for obj in check.objects:
            if obj.key not in self.counts:
                self.load(obj)
        self.problems += log_holes(check.holes)
        self.notes += leftover_notes(check.leftovers)
        removed = tuple((first, last) for first, last, _ in check.removed)
        known = (*check.passed_gaps, *self.compared, *removed)
        problems, notes = sequence_findings(check.route, check.objects, self.counts, known, removed)
        self.problems += problems
        self.notes += notes

    def against_kafka(self, settings: Settings) -> tuple[int | None, int | None]:
        """Compare the archive with Kafka's records of :meth:`PartitionCheck.span`."""
        check = self.check
        assert check.low is not None and check.high is not None
        committed = check.committed
        live = [o for o in check.objects if committed is not None and o.start_offset < committed]
        self.unverifiable = sum(1 for o in live if o.start_offset < check.low)
        first, last = check.span()
        if first >= last:
            return None, None
        comparison = Comparison(live, first, check.compacted, self.load, self.problems, self.events)
        removed = Removals(tuple((a, b) for a, b, _ in check.removed))
        url = settings.schema_registry_url
        registry = SchemaRegistry(url) if url else None
        projector = projector_for(check.route)
        with KafkaReader(
            settings.kafka,
            check.tp,
            start=first,
            stop=last,
            group=_GROUP,
            idle_timeout=settings.read_timeout_seconds,
        ) as reader:
            for batch in reader.batches():
                for record in batch:
                    if removed.holds(record.offset):
                        continue  # erased or expired: the log says so, not a hole
                    try:
                        expected = stored_form(
                            check.route.format,
                            record,
                            check.route.envelope,
                            projector,
                            registry,
                            check.value_schema,
                        )
                    except ValueError:
                        self.unarchivable += 1  # refused by the format; never archived
                        continue
                    group = group_of(check.route, record, registry)
                    comparison.add(record.offset, group, expected)
                    if self.sender.due():
                        self.report(record.offset + 1)
        self.notes += comparison.close(last, self.counts)
        return first, last


def check_partition(check: PartitionCheck, settings: Settings) -> PartitionVerdict:
    """Verify one partition (runs in a Spark task, or in-process)."""
    store = S3Store(settings.s3)
    checker = _PartitionChecker(check, store)
    first = last = None
    try:
        if check.low is not None:
            first, last = checker.against_kafka(settings)
            if first is not None and last is not None and last > first:
                checker.compared = ((first, last - 1),)
        checker.offline()
        checker.notes += allowed_gap_notes(check.passed_gaps)
        checker.notes += removed_notes(check.removed)
    except BaseException:
        checker.sender.finish(failed=True)
        raise
    checker.report(check.span()[1], done=True)
    return PartitionVerdict(
        route_index=check.route_index,
        tp=check.tp,
        committed=check.committed,
        objects=len(check.objects),
        records=sum(checker.counts.values()),
        checked_from=first,
        checked_to=last,
        unverifiable_objects=checker.unverifiable,
        unarchivable_records=checker.unarchivable,
        discrepancies=tuple(checker.problems + checker.events.close()),
        notes=tuple(checker.notes),
        recreated=check.recreated,
        allowed_gaps=check.passed_gaps,
        removed=check.removed,
        s3_requests=store.requests.read(),
    )


def check_all(checks: Iterable[PartitionCheck], settings: Settings) -> Iterator[PartitionVerdict]:
    """The Spark ``mapPartitions`` function: one verdict per check of the Spark partition."""
    for check in checks:
        yield check_partition(check, settings)


def plan_checks(
    pre: Preflight,
    refused: Mapping[tuple[Target, str], TopicRecreatedError] | None = None,
    registry_url: str | None = None,
) -> tuple[PartitionCheck, ...]:
    """One check per (route, partition): Kafka's partitions (unless the preflight ran
    offline) and the archive's. A route in ``refused`` (its topic re-created) is checked
    offline only."""
    value_schemas = avsc.declared(pre.plan, registry_url)
    routes = enumerate(pre.plan.routes)
    compacted = pre.admin.compacted(r.topic for r in pre.plan.routes) if pre.admin else set()
    objects = {index: list_partition_objects(pre.store, route) for index, route in routes}
    views = {t: committed_view(pre.store, t) for t in {r.target for r in pre.plan.routes}}
    logs = {t: v.states() for t, v in views.items() if v.from_log}
    removals = {t: v.removed() for t, v in views.items()}
    logged = {
        index: logged_objects(views[route.target], route, objects[index])
        for index, route in enumerate(pre.plan.routes)
        if views[route.target].from_log
    }
    also = {index: [*objects[index], *(logged.get(index, ()))] for index in objects}
    checks: list[PartitionCheck] = []
    for view in partition_states(pre, also=also, listed=True, logs=logs):
        error = (refused or {}).get((view.route.target, view.tp.topic))
        marks = view.marks if error is None else None
        log = logged.get(view.route_index, {}).get(view.tp)
        checks.append(
            PartitionCheck(
                route_index=view.route_index,
                route=view.route,
                tp=view.tp,
                committed=view.committed,
                state_objects=view.state.last_objects if view.state else (),
                objects=log.objects if log else objects[view.route_index].get(view.tp, ()),
                low=marks.low if marks else None,
                high=marks.high if marks else None,
                value_schema=value_schemas.get(view.route_index),
                # (a log's named objects are checked one by one: holes)
                state_object_count=view.state.objects if view.state and not log else 0,
                compacted=view.tp.topic in compacted,
                recreated=error.message if error is not None else None,
                passed_gaps=view.state.gaps if view.state else (),
                holes=log.holes if log else (),
                leftovers=log.leftovers if log else (),
                removed=tuple(
                    (r.first, r.last, r.reason)
                    for r in removals.get(view.route.target, {}).get(view.tp, ())
                ),
            )
        )
    return tuple(checks)


@dataclass(frozen=True, slots=True)
class LoggedObjects:
    """A partition of a target with a commit log: the listed objects it names (the data),
    those it names that are not listed (holes) and those listed it does not name."""

    objects: tuple[StoredObject, ...]
    holes: tuple[tuple[str, int, int], ...]
    leftovers: tuple[str, ...]


def logged_objects(
    view: CommittedView, route: Route, listed: Mapping[TopicPartition, tuple[StoredObject, ...]]
) -> dict[TopicPartition, LoggedObjects]:
    """Each partition's listed objects against the objects ``view``'s log names."""
    named = view.named(route.topic)
    out: dict[TopicPartition, LoggedObjects] = {}
    for tp in sorted({*named, *(tp for tp in listed if tp.topic == route.topic)}):
        refs = {o.key: o for o in named.get(tp, ())}
        found_ = listed.get(tp, ())
        keys = {o.key for o in found_}
        out[tp] = LoggedObjects(
            objects=tuple(o for o in found_ if o.key in refs),
            holes=tuple((o.key, o.first, o.last) for o in refs.values() if o.key not in keys),
            leftovers=tuple(o.key for o in found_ if o.key not in refs),
        )
    return out


def verify(
    settings: Settings, plan: Plan, *, offline: bool, progress: Progress | None = None
) -> VerifyResult:
    """Check the archive of every route: offline (objects and state), or also against Kafka.

    The checks run as Spark tasks, one per partition, like ``run``; Spark is started only
    when there is something to check. Fails fast on a missing bucket or topic.
    """
    progress = progress or NullProgress()
    started = time.monotonic()
    began = requests.PROCESS.read()
    iceberg.refuse_tables(plan, "verify")
    with preflight(settings, plan, kafka=not offline) as pre:
        refused = identity.recreated(pre.store, pre.admin, pre.plan.routes)
        checks = plan_checks(pre, refused, settings.schema_registry_url)
    with driver.spark_on_demand(settings, f"kafka-archive verify {pre.job}") as spark:
        if checks:
            progress.step(f"verifying {len(checks)} partition(s) with Spark ({settings.master})")
        verdicts = driver.map_units(
            spark,
            checks,
            functools.partial(check_all, settings=settings),
            progress=progress,
            shown=PartitionCheck.progress,
        )
    ordered = tuple(sorted(verdicts, key=lambda v: (v.route_index, v.tp)))
    targets = tuple(str(r.target) for r in pre.plan.routes)
    ordered_refused = tuple(
        e
        for _, e in sorted(refused.items(), key=lambda r: (r[0][0].bucket, r[0][0].prefix, r[0][1]))
    )
    spent = requests.PROCESS.read() - began + total_requests(v.s3_requests for v in ordered)
    return VerifyResult(
        pre.job, offline, ordered, time.monotonic() - started, targets, ordered_refused, spent
    )


def to_json(result: VerifyResult, prices: S3Prices = LIST_PRICES) -> dict[str, Any]:
    """The JSON contract of ``kafka-archive verify --output json``."""
    return {
        "job": result.job,
        "offline": result.offline,
        "clean": result.clean,
        **requests_json(result.s3_requests, prices),
        "partitions": [
            {
                "topic": v.tp.topic,
                "partition": v.tp.partition,
                "target": result.targets[v.route_index] if result.targets else None,
                "committed_offset": v.committed,
                "checked_from": v.checked_from,
                "checked_to": v.checked_to,
                "objects": v.objects,
                "records": v.records,
                "unverifiable_objects": v.unverifiable_objects,
                "unarchivable_records": v.unarchivable_records,
                "discrepancies": [dataclasses.asdict(d) for d in v.discrepancies],
                "notes": list(v.notes),
                "recreated": v.recreated,
                "allowed_gaps": [
                    {"first_offset": first, "last_offset": last} for first, last in v.allowed_gaps
                ],
                "removed": [
                    {"first_offset": first, "last_offset": last, "reason": reason}
                    for first, last, reason in v.removed
                ],
            }
            for v in result.partitions
        ],
    }

"""How far behind Kafka each archived partition is: read-only, no Spark, no lock."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kafka_archive.archiver import iceberg
from kafka_archive.archiver.config.settings import LIST_PRICES, S3Prices, Settings, requests_json
from kafka_archive.archiver.core.errors import TopicRecreatedError
from kafka_archive.archiver.core.model import NO_REQUESTS, S3Requests
from kafka_archive.archiver.iceberg.maintenance import removed_ranges
from kafka_archive.archiver.plan.preflight import preflight
from kafka_archive.archiver.plan.views import partition_states
from kafka_archive.archiver.protocol.log import Removed
from kafka_archive.archiver.read.committed import logged_views
from kafka_archive.archiver.state import identity
from kafka_archive.archiver.store import requests
from kafka_archive.kcql.plan import Plan, Target


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    topic: str
    partition: int
    archived_offset: int | None
    end_offset: int
    lag: int
    last_commit: str | None
    objects: int
    bytes: int
    target: str = ""  # where the route writes (bucket:prefix): a topic may have several
    # Offsets from archived_offset on that Kafka deleted before they were archived (retention,
    # kafka-delete-records): a gap runs stop at (exit 16) until --allow-gaps passes it.
    lost: int = 0
    # Why the route's topic is not the one archived (deleted and re-created since: another
    # topic id), None when it is. Its Kafka offsets are the new topic's: every retained
    # record of it counts as lag, none as lost.
    recreated: str | None = None
    # Offsets that kafka-archive erase or expire removed (first, last), from the commit log:
    # in no object, and no hole.
    erased: tuple[tuple[int, int], ...] = ()
    expired: tuple[tuple[int, int], ...] = ()


def _ranges(removed: tuple[Removed, ...], reason: str) -> tuple[tuple[int, int], ...]:
    """``removed``'s ranges of ``reason``, adjacent ones joined."""
    out: list[tuple[int, int]] = []
    for r in sorted(removed):
        if r.reason != reason:
            continue
        if out and out[-1][1] + 1 == r.first:
            out[-1] = (out[-1][0], r.last)
        else:
            out.append((r.first, r.last))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class JobStatus:
    job: str
    partitions: tuple[PartitionStatus, ...]
    # One per route whose topic was deleted and re-created (the command exits 17 after
    # showing every row).
    refused: tuple[TopicRecreatedError, ...] = field(default=(), compare=False)
    s3_requests: S3Requests = NO_REQUESTS  # what reading the states and the log asked of S3

    @property
    def max_lag(self) -> int:
        return max((p.lag for p in self.partitions), default=0)

    def to_json(self, prices: S3Prices = LIST_PRICES) -> dict[str, Any]:
        """The JSON contract of ``kafka-archive status --output json``."""
        return {
            "job": self.job,
            "partitions": [asdict(p) for p in self.partitions],
            **requests_json(self.s3_requests, prices),
        }


def objects_targets(plan: Plan) -> list[Target]:
    """The targets of ``plan``'s object routes (not Iceberg's), each once, in order."""
    return sorted(
        {r.target for r in plan.routes if r.iceberg is None}, key=lambda t: (t.bucket, t.prefix)
    )


def status(settings: Settings, plan: Plan) -> JobStatus:
    """Per partition: the archived next offset (S3 state), Kafka's end offset and the lag.

    A partition with no state counts its whole retained range as lag. A route whose topic
    was deleted and re-created is shown all the same, its rows marked, its error in
    ``refused``.
    """
    rows: list[PartitionStatus] = []
    began = requests.PROCESS.read()
    with preflight(settings, plan) as pre:
        refused = identity.recreated(pre.store, pre.admin, pre.plan.routes)
        # Iceberg routes: the offsets of the table's latest snapshot (no state objects).
        opened = iceberg.open_tables(pre.plan, settings.s3)
        tables = iceberg.by_route(opened)
        # An Iceberg route's objects and bytes: its table's data files (no state objects).
        files = {id(t): t.files_by_partition() for t in opened}
        # Targets with a commit log: their partitions from the log, not the state objects.
        logged = logged_views(pre.store, objects_targets(pre.plan))
        logs = {target: view.states() for target, view in logged.items()}
        removals = {target: view.removed() for target, view in logged.items()}
        views = partition_states(
            pre, tables=iceberg.offsets_by_route(opened), listed=True, logs=logs
        )
        for view in views:
            table, state, marks = tables.get(view.route_index), view.state, view.marks
            assert marks is not None
            archived = view.committed
            error = refused.get((view.route.target, view.tp.topic))
            removed = (
                removed_ranges(table.table).get(view.tp, ())  # (table properties)
                if table is not None
                else removals.get(view.route.target, {}).get(view.tp, ())
            )
            # A re-created topic's offsets are the new topic's: none of it is archived here.
            since = marks.low if error is not None or archived is None else archived
            lag = marks.high - max(since, marks.low)
            lost = marks.low - archived if archived is not None and archived < marks.low else 0
            lost = 0 if error is not None else lost
            objects, size = (
                files[id(table)].get(view.tp, (0, 0))
                if table is not None
                else (state.objects, state.bytes)
                if state is not None
                else (0, 0)
            )
            rows.append(
                PartitionStatus(
                    topic=view.tp.topic,
                    partition=view.tp.partition,
                    archived_offset=archived,
                    end_offset=marks.high,
                    lag=max(lag, 0),
                    last_commit=(
                        table.committed_at
                        if table is not None
                        else state.committed_at
                        if state is not None
                        else None
                    ),
                    objects=objects,
                    bytes=size,
                    target=str(view.route.target),
                    lost=lost,
                    recreated=error.message if error is not None else None,
                    erased=_ranges(removed, "erased"),
                    expired=_ranges(removed, "expired"),
                )
            )
    ordered = sorted(refused.items(), key=lambda r: (r[0][0].bucket, r[0][0].prefix, r[0][1]))
    spent = requests.PROCESS.read() - began
    return JobStatus(pre.job, tuple(rows), tuple(e for _, e in ordered), spent)

"""How far behind Kafka each archived partition is: read-only, no Spark, no lock."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kafka_archive.archiver import iceberg, topics
from kafka_archive.archiver.job import group_for, job_name_for
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.settings import Settings
from kafka_archive.archiver.state import checkpoint
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan


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


@dataclass(frozen=True, slots=True)
class JobStatus:
    job: str
    partitions: tuple[PartitionStatus, ...]

    @property
    def max_lag(self) -> int:
        return max((p.lag for p in self.partitions), default=0)

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "partitions": [asdict(p) for p in self.partitions]}


def status(settings: Settings, plan: Plan) -> JobStatus:
    """Per partition: the archived next offset (S3 state), Kafka's end offset and the lag.

    A partition with no state counts its whole retained range as lag.
    """
    job = settings.job_name or job_name_for(plan)
    store = S3Store(settings.s3)
    for bucket in sorted({r.target.bucket for r in plan.routes}):
        store.check_bucket(bucket)
    rows: list[PartitionStatus] = []
    with KafkaAdmin(settings.kafka, group_for(job)) as admin:
        plan = topics.resolve(plan, settings, admin.topic_names)
        partitions = admin.partitions(tuple(sorted({r.topic for r in plan.routes})))
        # Iceberg routes: the offsets of the table's latest snapshot.
        tables = iceberg.by_route(iceberg.open_tables(plan, settings.s3))
        for index, route in enumerate(plan.routes):
            for partition in partitions[route.topic]:
                tp = TopicPartition(route.topic, partition)
                table = tables.get(index)
                state = None if table else checkpoint.read(store, route.target, job, tp)
                archived = state.next_offset if state is not None else None
                archived = table.offsets.get(tp) if table is not None else archived
                marks = admin.watermarks(tp, archived if archived is not None else 0)
                lag = marks.high - max(archived if archived is not None else 0, marks.low)
                rows.append(
                    PartitionStatus(
                        topic=tp.topic,
                        partition=tp.partition,
                        archived_offset=archived,
                        end_offset=marks.high,
                        lag=max(lag, 0),
                        last_commit=(
                            table.committed_at if table is not None
                            else state.committed_at if state is not None else None
                        ),
                        objects=state.objects if state is not None else 0,
                        bytes=state.bytes if state is not None else 0,
                    )
                )
    return JobStatus(job, tuple(rows))

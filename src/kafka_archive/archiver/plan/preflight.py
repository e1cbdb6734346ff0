"""The checks every command makes before anything is read or written: the job's name, the
spool directory, the buckets, Kafka reached and the plan's topics resolved (``FROM *``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from kafka_archive.archiver.config import spool
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.archiver.plan import topics
from kafka_archive.archiver.plan.naming import check_job_name, group_for, job_name_for
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan, Target


@dataclass(frozen=True, slots=True)
class Preflight:
    """What every command knows once its checks passed: the job, the store, and (unless the
    command runs without Kafka) the admin client and the plan with its topics resolved."""

    job: str
    store: S3Store
    plan: Plan
    admin: KafkaAdmin | None

    @property
    def kafka(self) -> KafkaAdmin:
        assert self.admin is not None, "this preflight ran without Kafka"
        return self.admin


def targets_of(plan: Plan) -> list[Target]:
    """The plan's targets, each once, in a stable order (the order locks are taken in)."""
    return sorted({r.target for r in plan.routes}, key=lambda t: (t.bucket, t.prefix))


@contextlib.contextmanager
def preflight(
    settings: Settings, plan: Plan, *, kafka: bool = True, spool_dir: bool = False
) -> Iterator[Preflight]:
    """Fail fast, before anything is read or written: the job name, the spool directory
    (``spool_dir``), every target bucket, and with ``kafka`` the brokers and the topics the
    plan names (``FROM *`` resolved); the admin client stays open for the block."""
    job = check_job_name(settings.job_name or job_name_for(plan))
    if spool_dir:
        spool.check(settings.spool_dir)
    store = S3Store(settings.s3)
    for bucket in sorted({r.target.bucket for r in plan.routes}):
        store.check_bucket(bucket)
    if not kafka:
        yield Preflight(job, store, plan, None)
        return
    with KafkaAdmin(settings.kafka, group_for(job)) as admin:
        yield Preflight(job, store, topics.resolve(plan, settings, admin.topic_names), admin)

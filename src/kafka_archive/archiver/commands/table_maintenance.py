"""``compact``, ``erase`` and ``expire`` on the Iceberg routes of a plan (issue 38): the
session around :mod:`.iceberg.maintenance`, the same as a log-mode run's.

Per target (it must keep a commit log: a target whose log holds no claim is a
commit_protocol=states archive, refused, exit 2, nothing written): the log read, a claim over
the partitions the tables hold (:class:`.commit_log.CommitLog`: it fences a run of the same
target, and a later run's claim fences this command, exit 18), then each table fenced with
the claim's epoch and its orphans of lower epochs removed (:func:`.iceberg.prepare`, as a
run's session does: the files a killed command left go here), then each table's rewrite in
one snapshot, fenced by the epoch and the claim (:class:`.iceberg.maintenance.TableMaintenance`).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from kafka_archive.archiver import iceberg
from kafka_archive.archiver.commands import commit_log, presence
from kafka_archive.archiver.commands.commit_log import CommitLog
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.core.model import S3Requests
from kafka_archive.archiver.iceberg.maintenance import (
    TableJob,
    TableMaintenance,
    TableOutcome,
    refuse_unreadable,
)
from kafka_archive.archiver.plan.naming import check_job_name, job_name_for, new_run_id
from kafka_archive.archiver.protocol.log import WriterId
from kafka_archive.archiver.read.committed import read_log as read_committed_log
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan, Target

log = logging.getLogger(__name__)


@dataclass
class TablesResult:
    """What the command did over the plan's tables (summed over them)."""

    tables: int = 0
    outcome: TableOutcome = dataclasses.field(default_factory=TableOutcome)
    s3_requests: S3Requests = dataclasses.field(default_factory=S3Requests)


def maintain_tables(settings: Settings, plan: Plan, job: TableJob) -> TablesResult:
    """``job`` on every Iceberg route of ``plan`` (the module's doc)."""
    routes = [r for r in plan.routes if r.iceberg is not None]
    if job.drop is not None:
        refuse_unreadable(routes, job.command)
    plan = dataclasses.replace(plan, routes=tuple(routes))
    store = S3Store(settings.s3)
    store.requests.reset()
    targets = sorted({r.target for r in routes}, key=lambda t: (t.bucket, t.prefix))
    for target in targets:  # every target checked before any write
        _require_log(store, target, job.command)
    result = TablesResult()
    tables = [t for t in iceberg.open_tables(plan, settings.s3) if t.table is not None]
    partitions: dict[str, set[int]] = {}
    for table in tables:
        topics = {r.topic for r in table.routes.values()}
        for tp in table.offsets:
            if tp.topic in topics:
                partitions.setdefault(tp.topic, set()).add(tp.partition)
    if not partitions:
        log.info("%s: no table holds anything yet", job.command)
        return result
    run_id = new_run_id()
    job_name = check_job_name(settings.job_name or job_name_for(plan))
    # A live session's presence on a target stops the command (exit 8) before it claims,
    # as it stops a run (the claim's epoch stays the fence).
    with presence.present(
        store,
        targets,
        run_id=run_id,
        job=job_name,
        command=job.command,
        ttl_seconds=settings.lock_ttl_seconds,
    ):
        claims = CommitLog(store, settings, run_id)
        claims.open(plan, {t: sorted(p) for t, p in partitions.items()}, job_name)
        epochs = {target: claims.epoch(target) for target in claims.targets}
        prepared = iceberg.prepare(
            plan, store, settings.s3, run_id, job_name, claims.check_fenced, epochs
        )
        for table in prepared:
            me = WriterId(run_id, epochs[table.target])
            done = TableMaintenance(table, store, job, me, job_name, claims.check_fenced).run()
            result.tables += 1
            _add(result.outcome, done)
    result.s3_requests = store.requests.read()
    return result


def _require_log(store: S3Store, target: Target, command: str) -> None:
    """A target whose commit log holds no claim was archived in commit_protocol=states; one
    that export-states moved back to partition states is refused as the object commands
    refuse it. The log is read as every command reads it (:func:`.read.committed.read_log`:
    a log of a newer format or a damaged one is one line, exit 24 or 14)."""
    state = read_committed_log(store, target)
    commit_log.refuse_exported(target, state)
    if state.max_epoch == 0:
        raise ConfigError(
            f"{command}: s3://{target.bucket}/{target.prefix} has no commit log "
            "(archived with commit_protocol=states)",
            hint=f"Run kafka-archive run once with commit_protocol=log, then {command}",
        )


def _add(total: TableOutcome, one: TableOutcome) -> None:
    total.files_before += one.files_before
    total.files_after += one.files_after
    total.bytes_before += one.bytes_before
    total.bytes_after += one.bytes_after
    total.records_dropped += one.records_dropped
    total.committed = total.committed or one.committed
    for tp, ranges in one.removed.items():
        total.removed.setdefault(tp, []).extend(ranges)

"""What crashed runs left in a table's ``data/``: files a run of the job wrote and never
committed (it died, or lost its lease, between writing and committing them), removed at
session start, holding the job's lease, before this run writes anything, after a commit
that refuses a stale driver's; so no record is ever in the table twice."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from pyiceberg.exceptions import CommitFailedException

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.errors import ConfigError, StateConflictError
from kafka_archive.archiver.iceberg.catalog import catalog_errors
from kafka_archive.archiver.iceberg.commits import COMMIT_ATTEMPTS, append, check_fence
from kafka_archive.archiver.iceberg.offsets import snapshot_properties
from kafka_archive.archiver.iceberg.routes import data_folder, earlier_run_of_job
from kafka_archive.archiver.iceberg.table import TableRoute, open_tables
from kafka_archive.archiver.protocol.writer import object_writer
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan, Target

# The package's logger, as before its split (`--log-format json` prints its name).
log = logging.getLogger("kafka_archive.archiver.iceberg")


def prepare(
    plan: Plan,
    store: S3Store,
    s3: S3Settings,
    run_id: str,
    job: str,
    check_lease: Callable[[], None] = lambda: None,
    epochs: Mapping[Target, int] | None = None,
) -> list[TableRoute]:
    """Open the plan's tables and remove what crashed runs left in them (holding the
    job's lease, proved by ``check_lease`` before each write, before anything is written).
    ``epochs``: commit_protocol=log, the claims' by target (``check_lease`` reads the log):
    each existing table is fenced with its target's epoch first (the module's doc)."""
    tables = open_tables(plan, s3)
    for table in tables:
        epoch = None
        if epochs is not None:
            targets = {route.target for route in table.routes.values()}
            if len(targets) > 1:
                raise ConfigError(
                    f"commit_protocol=log: Iceberg table {table.identifier} is written by "
                    "routes of more than one target (bucket and prefix); its commits are "
                    "fenced by one target's commit log",
                    hint="Give the routes of one table the same INSERT INTO bucket:prefix",
                )
            epoch = epochs[table.target]
        table.turn_off_replay()
        if epoch is not None and table.table is not None:
            fence(table, run_id, job, check_lease, epoch)
        remove_orphans(table, store, run_id, job, check_lease, epoch)
    return tables


def remove_orphans(
    table: TableRoute,
    store: S3Store,
    run_id: str,
    job: str,
    check_lease: Callable[[], None] = lambda: None,
    epoch: int | None = None,
) -> int:
    """Delete the files under the table's ``data/`` that this job's earlier runs wrote
    (named ``<topic>/<partition>/<offset>_<run id>_<job>.parquet`` for the routes' topics)
    and no snapshot references: a run died (or lost its lease) between writing and
    committing them. Call it holding the job's lease, before this run writes; another
    job's files are never touched.

    A run that lost the lease may still be inside its commit of such files (frozen past
    its lease after its last proof). Before deleting any, the table is moved by a commit
    of ours that changes nothing but the current snapshot (:func:`fence`): that run's
    commit, conditional on the snapshot it planned from, is refused; the files are
    deleted only if no snapshot references them after it. With ``epoch``
    (commit_protocol=log; the table is fenced already) only files whose writer's epoch is
    below it are removed (:func:`_below`)."""

    def earlier(key: str) -> bool:
        return earlier_run_of_job(key, run_id, job)

    candidates: list[tuple[str, str]] = []
    for route in table.routes.values():
        folder = data_folder(route)
        bucket = route.target.bucket
        candidates += [(bucket, k) for k in store.list_keys(bucket, folder) if earlier(k)]
        # Multipart uploads of such files that a killed run left open.
        for key, upload in store.incomplete_uploads(bucket, folder):
            if earlier(key):
                check_lease()
                store.abort_upload(bucket, key, upload)
    if not candidates:
        return 0
    referenced = _referenced(table)
    orphans = [(b, k) for b, k in candidates if f"s3://{b}/{k}" not in referenced]
    if orphans and table.table is not None and epoch is None:
        fence(table, run_id, job, check_lease)
        referenced = _referenced(table)
        orphans = [(b, k) for b, k in candidates if f"s3://{b}/{k}" not in referenced]
    if epoch is not None:
        orphans = [(b, k) for b, k in orphans if _below(store, b, k, epoch)]
    for bucket in sorted({b for b, _ in orphans}):
        check_lease()
        store.delete(bucket, [k for b, k in orphans if b == bucket])
    if orphans:
        log.info(
            "%s: removed %d file(s) a crashed run wrote and never committed",
            table.identifier,
            len(orphans),
        )
    return len(orphans)


def _below(store: S3Store, bucket: str, key: str, epoch: int) -> bool:
    """Whether the file at ``key`` was written by a writer whose claim epoch is below
    ``epoch`` (no writer metadata of log mode: written in states mode, before any claim)."""
    head = store.head(bucket, key)
    if head is None:
        return False  # gone already
    writer, _, _ = object_writer({k.lower(): v for k, v in head.metadata.items()})
    return writer is None or writer.epoch < epoch


def fence(
    table: TableRoute,
    run_id: str,
    job: str,
    check_lease: Callable[[], None],
    epoch: int | None = None,
) -> None:
    """Commit a snapshot of ours without files, the table's state unchanged: whatever
    commit another writer planned from the snapshot before it is refused by the catalog
    (each append requires the branch to be at the snapshot it planned from). With ``epoch``
    (commit_protocol=log) the snapshot carries it, and a table that carries a higher one
    refuses it (exit 18: a newer claimant fenced it)."""
    for _ in range(COMMIT_ATTEMPTS):
        props = snapshot_properties(table.offsets, 0, run_id, job, epoch)
        check_fence(table, epoch)
        check_lease()
        with catalog_errors(f"commit to table {table.identifier}"):
            try:
                append(table.table, [], props)
            except CommitFailedException:
                table.refresh()  # a commit came first (that run's, maybe): on top of it
                continue
        table.refresh()
        return
    raise StateConflictError(
        f"Iceberg table {table.identifier} kept changing while this run cleaned it up",
        hint="Run again; archive a table from one job at a time",
    )


def _referenced(table: TableRoute) -> set[str]:
    """Every data file any snapshot of the table references."""
    if table.table is None:
        return set()
    paths: set[str] = set()
    with catalog_errors(f"read the manifests of table {table.identifier}"):
        io = table.table.io
        seen: set[str] = set()
        for snapshot in table.table.snapshots():
            for manifest in snapshot.manifests(io):
                if manifest.manifest_path in seen:
                    continue
                seen.add(manifest.manifest_path)
                for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
                    paths.add(entry.data_file.file_path)
    return paths

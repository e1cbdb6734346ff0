"""The fenced commit of an Iceberg route: each batch makes ONE commit per table, adding
every file the batch's tasks wrote and moving the table's state (:mod:`.offsets`) in the
same snapshot. Concurrent writers are fenced by the catalog's optimistic commit: a commit
that lost the race re-reads the table and retries only when the partitions it moves are
still where it planned them; otherwise the run stops with a state conflict (exit 9).

In commit_protocol=log the claim's epoch is the fence token: each snapshot of ours carries it
(:data:`.offsets.EPOCH`), and before each append (so after each re-read) a table whose last
commit of ours carries a higher epoch refuses this run's commit (exit 18:
:func:`.protocol.core.iceberg_commit_allowed`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyiceberg.exceptions import CommitFailedException

from kafka_archive.archiver.core.errors import CatalogError, FencedError, StateConflictError
from kafka_archive.archiver.core.model import TopicPartition, UnitResult
from kafka_archive.archiver.iceberg.catalog import catalog_errors
from kafka_archive.archiver.iceberg.offsets import (
    committed_by,
    snapshot_properties,
    table_epoch,
    table_offsets,
    table_properties,
)
from kafka_archive.archiver.iceberg.schema import evolve
from kafka_archive.archiver.iceberg.table import TableRoute, create_table
from kafka_archive.archiver.protocol.core import iceberg_commit_allowed
from kafka_archive.kcql.plan import Target

# The package's logger, as before its split (`--log-format json` prints its name).
log = logging.getLogger("kafka_archive.archiver.iceberg")

COMMIT_ATTEMPTS = 5


def commit(
    table: TableRoute,
    results: Sequence[UnitResult],
    *,
    run_id: str,
    job: str,
    check_lease: Callable[[], None],
    epoch: int | None = None,
) -> None:
    """Append the files of ``results`` and move their partitions, in one snapshot (carrying
    ``epoch``, the claim's in commit_protocol=log).

    Raises:
        StateConflictError: another writer moved one of the partitions meanwhile.
        FencedError: the lease is lost (``check_lease``), or the table carries a higher
            claim epoch than ``epoch``.
        CatalogError: the catalog failed the commit.
    """
    results = [u for u in results if u.route_index in table.routes]
    moved = {u.tp: u.next_offset for u in results if u.next_offset > u.start}
    if not moved:
        return
    files = [
        f"s3://{table.routes[u.route_index].target.bucket}/{o.key}"
        for u in results
        for o in u.objects
    ]
    planned = {tp: table.offsets.get(tp) for tp in moved}
    table.renew()  # after `planned`: the offsets planning read are what must still hold
    records = sum(u.records for u in results)
    for _ in range(COMMIT_ATTEMPTS):
        check_fence(table, epoch)  # (fenced before moved: a newer claimant moved them)
        changed = [tp for tp in moved if table.offsets.get(tp) != planned[tp]]
        if changed:
            raise StateConflictError(
                f"another writer committed {', '.join(map(str, changed))} to Iceberg table "
                f"{table.identifier} while this run archived it",
                tp=changed[0],
                hint="Run again: it resumes from that commit (this run's files are removed)",
            )
        if table.table is None:
            if not files:
                return  # nothing to add yet: the partitions are read again next run
            table.table = create_table(table, files[0])
            # Another writer may have created it first, and committed: check against it.
            table.offsets = table_offsets(table.table)
            continue
        props = snapshot_properties({**table.offsets, **moved}, records, run_id, job, epoch)
        check_lease()
        try:
            with catalog_errors(f"commit to table {table.identifier}"):
                try:
                    append(table.table, files, props)
                except CommitFailedException:
                    log.info("%s: a concurrent commit won; re-reading the table", table.identifier)
                    table.refresh()
                    continue
        except CatalogError:
            table.refresh()
            if _went_through(table, run_id, moved):
                return  # the commit went through; its answer was lost
            raise
        table.refresh()
        return
    raise StateConflictError(
        f"Iceberg table {table.identifier} kept changing under this run's commit",
        hint="Run again; archive a table from one job at a time",
    )


def check_fence(table: TableRoute, epoch: int | None) -> None:
    """commit_protocol=log (``epoch``: this run's claim's): the table as last read must not
    carry a higher epoch (a newer claimant committed to it, or fenced it at its start)."""
    if epoch is None:
        return
    found = table_epoch(table.table)
    if not iceberg_commit_allowed(found, epoch):
        raise FencedError(
            f"Iceberg table {table.identifier} was committed to by a newer run (claim epoch "
            f"{found}, this run's {epoch}); this run commits nothing more to it"
        )


def _went_through(table: TableRoute, run_id: str, moved: Mapping[TopicPartition, int]) -> bool:
    """Whether the table, read again, holds this run's commit of ``moved``."""
    return committed_by(table.table, run_id) and all(
        table.offsets.get(tp) == offset for tp, offset in moved.items()
    )


def append(table: Any, files: list[str], props: dict[str, str]) -> None:
    """One transaction: the files appended (a snapshot whose summary holds ``props``), and
    the offsets set as table properties too, stamped with that snapshot's id."""
    with table.transaction() as tx:
        if files:
            evolve(tx, table, files)
            tx.add_files(files, snapshot_properties=props, check_duplicate_files=False)
        else:
            # Offsets moved without files (records skipped by the error policy).
            with tx.update_snapshot(snapshot_properties=props).fast_append():
                pass
        made = tx.table_metadata.current_snapshot()
        assert made is not None, "the append made the current snapshot"
        tx.set_properties(table_properties(props, made))


def commit_all(
    tables: Sequence[TableRoute],
    results: Sequence[UnitResult],
    *,
    run_id: str,
    job: str,
    check_lease: Callable[[], None],
    epochs: Mapping[Target, int] | None = None,
) -> None:
    """One commit per table for a batch's results (see :func:`commit`); ``epochs``: by
    target, the claims' (commit_protocol=log)."""
    for table in tables:
        epoch = None if epochs is None else epochs[table.target]
        commit(table, results, run_id=run_id, job=job, check_lease=check_lease, epoch=epoch)

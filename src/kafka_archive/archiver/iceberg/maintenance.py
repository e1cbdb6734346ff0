"""``compact``, ``erase`` and ``expire`` on an Iceberg table (issue 38): the table's data files
rewritten in ONE overwrite snapshot of ours, which keeps the table's kafka-archive offsets and
carries the claim's epoch, as a run's append does (:mod:`.commits`).

- **erase / expire** (copy-on-write): each data file of the current snapshot is read through
  pyiceberg (its position deletes applied, projected onto the table's schema); a file of
  which some rows go is replaced by a file of the rows that stay (none left: by no file).
  The rows must carry their partition and offset (``store.envelope`` with its metadata): the
  offsets removed are recorded per partition, as ranges with their reason and time (never a
  key), in the table property ``kafka-archive.removed.<topic>.<partition>`` (set in the same
  transaction), which :func:`removed_ranges` reads back for ``status``. A table property, not
  only a snapshot summary: the owner's ``expire_snapshots`` removes summaries, and the
  owner's compactions and deletes carry properties forward unchanged (summaries too of
  ours are kept only in our snapshots).
- **compact**: files of ours (named by :func:`.routes.data_route`, one Kafka partition each)
  of one Kafka partition and one Iceberg partition, consecutive by first offset, merged
  greedily into files up to the target size (:func:`plan_merges`); ``--older-than`` leaves
  each partition's files from its first young one (by S3's LastModified, the store's clock)
  on alone. Other tools' files are left alone.
- New files are named as a run's tasks name theirs (``data/<topic>/<partition>/<first
  offset>_<run id>_<job>.parquet``) and created If-None-Match with the claim's writer
  metadata: a command killed before its commit leaves files no snapshot references, which
  the next session of the job (a rerun, or a run) removes at its start (:mod:`.orphans`: an
  earlier run's, of a lower epoch).
- The commit: :func:`.commits.check_fence` (a table carrying a higher epoch: exit 18) and the
  claim checked (the log's tail), then one transaction (the overwrite, our summary, the
  properties); a commit that lost the race deletes its new files, re-reads and plans again.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.exceptions import CommitFailedException

from kafka_archive.archiver.core.errors import CatalogError, ConfigError, StateConflictError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.iceberg.catalog import catalog_errors
from kafka_archive.archiver.iceberg.commits import COMMIT_ATTEMPTS, check_fence
from kafka_archive.archiver.iceberg.offsets import (
    RUN_ID,
    last_of_ours,
    snapshot_properties,
    table_properties,
)
from kafka_archive.archiver.iceberg.routes import DATA_DIR, DATA_NAME, data_folder, file_partition
from kafka_archive.archiver.iceberg.table import TableRoute
from kafka_archive.archiver.partition.values import topic_segment
from kafka_archive.archiver.protocol.log import Removed, WriterId
from kafka_archive.archiver.protocol.naming import partition_ref
from kafka_archive.archiver.protocol.s3 import BucketStore
from kafka_archive.archiver.protocol.steps import List, drive, send_read
from kafka_archive.archiver.protocol.tasks import object_metadata
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Route

log = logging.getLogger("kafka_archive.archiver.iceberg")

REMOVED_PREFIX = "kafka-archive.removed."
"""Table property per partition: JSON ``[[first, last, reason, at], ...]``."""
MAINTENANCE = "kafka-archive.maintenance"
"""Summary of a snapshot of ours made by compact, erase or expire: the command."""
RECORDS_REMOVED = "kafka-archive.records-removed"

Drop = Callable[[Record], bool]


@dataclass(frozen=True, slots=True)
class TableJob:
    """One maintenance command on tables: ``drop`` (erase, expire) says which rows go, with
    ``reason``; None is compact (``target_size``, ``young_ms``: files last modified at or
    after it, by the store's clock, stay with everything after them)."""

    command: str
    drop: Drop | None = None
    reason: str | None = None
    target_size: int = 128 * 1000**2
    older_than_seconds: float | None = None


@dataclass
class TableOutcome:
    """What one table's command did: data files (and bytes) replaced and made, rows dropped,
    and the offsets removed per partition."""

    files_before: int = 0
    files_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_dropped: int = 0
    removed: dict[TopicPartition, list[tuple[int, int]]] = field(default_factory=dict)
    committed: bool = False


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A data file as compaction plans it: the group it may merge within (Kafka partition,
    Iceberg spec and partition values), its first offset, size and age."""

    path: str
    group: tuple[Any, ...]
    first: int
    size: int
    modified_ms: int


# -- reading back ------------------------------------------------------------------------------


def removed_property(tp: TopicPartition) -> str:
    return f"{REMOVED_PREFIX}{tp.topic}.{tp.partition}"


def removed_ranges(table: Any) -> dict[TopicPartition, tuple[Removed, ...]]:
    """The offsets erase and expire removed from ``table``, by partition (table properties)."""
    out: dict[TopicPartition, tuple[Removed, ...]] = {}
    properties = {} if table is None else table.properties
    for key, value in properties.items():
        if not key.startswith(REMOVED_PREFIX):
            continue
        topic, _, partition = key[len(REMOVED_PREFIX) :].rpartition(".")
        try:
            ranges = tuple(
                Removed(int(a), int(b), str(r), float(t)) for a, b, r, t in json.loads(value)
            )
        except (ValueError, TypeError):
            continue  # not ours to read
        if topic and partition.isdigit():
            out[TopicPartition(topic, int(partition))] = ranges
    return out


# -- planning ------------------------------------------------------------------------------


def plan_merges(
    files: Iterable[FileInfo], target_size: int, young_ms: int | None
) -> list[list[FileInfo]]:
    """Runs of two or more files of one group, consecutive by first offset, whose sizes sum to
    at most ``target_size``; a group's files from its first one modified at or after
    ``young_ms`` on are left alone. Pure."""
    groups: dict[tuple[Any, ...], list[FileInfo]] = {}
    for f in files:
        groups.setdefault(f.group, []).append(f)
    out: list[list[FileInfo]] = []
    for members in groups.values():
        members.sort(key=lambda f: f.first)
        run: list[FileInfo] = []
        for f in members:
            if young_ms is not None and f.modified_ms >= young_ms:
                break
            if run and sum(g.size for g in run) + f.size > target_size:
                if len(run) > 1:
                    out.append(run)
                run = []
            run.append(f)
        if len(run) > 1:
            out.append(run)
    return out


def merged_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """(first, last) ranges of offsets, sorted, those that touch or overlap joined (a single
    offset ``o`` is ``(o, o)``). Pure."""
    out: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


# -- the command on one table --------------------------------------------------------------


class TableMaintenance:
    """``job`` on one table, under the claim of ``me`` (the module's doc)."""

    def __init__(
        self,
        table: TableRoute,
        store: S3Store,
        job: TableJob,
        me: WriterId,
        job_name: str,
        check_lease: Callable[[], None],
    ) -> None:
        self.table, self.store, self.job, self.me = table, store, job, me
        self.job_name, self.check_lease = job_name, check_lease
        self.routes = {r.topic: r for r in table.routes.values()}
        self.written: list[tuple[str, str]] = []  # (bucket, key) of this try's new files
        self.at = time.time()

    def run(self) -> TableOutcome:
        for _ in range(COMMIT_ATTEMPTS):
            if self.table.table is None or self.table.table.current_snapshot() is None:
                return TableOutcome()
            check_fence(self.table, self.me.epoch)
            self.written = []
            outcome, deleted = self._plan_and_write()
            if not deleted:
                return outcome
            if self._commit(deleted, outcome):
                outcome.committed = True
                return outcome
        raise StateConflictError(
            f"Iceberg table {self.table.identifier} kept changing under {self.job.command}",
            hint="Run again",
        )

    # -- rewrite -----------------------------------------------------------------------------

    def _plan_and_write(self) -> tuple[TableOutcome, list[Any]]:
        """The data files replaced (pyiceberg's DataFile) and the outcome; new files written."""
        outcome = TableOutcome()
        tasks = self._tasks()
        deleted: list[Any] = []
        if self.job.drop is None:
            by_path = {t.file.file_path: t for t in tasks}
            infos, now_ms = self._infos(tasks)
            young = None
            if self.job.older_than_seconds is not None:
                young = now_ms - int(self.job.older_than_seconds * 1000)
            for run in plan_merges(infos, self.job.target_size, young):
                rows = pa.concat_tables(
                    [self._read(by_path[f.path]) for f in run], promote_options="default"
                )
                tp = file_partition(run[0].path)
                assert tp is not None
                self._write(tp, run[0].first, rows, outcome)
                for f in run:
                    deleted.append(by_path[f.path].file)
                    outcome.files_before += 1
                    outcome.bytes_before += f.size
            return outcome, deleted
        for task in tasks:
            rows = self._read(task)
            kept, gone = self._split(rows)
            if not gone:
                continue
            deleted.append(task.file)
            outcome.files_before += 1
            outcome.bytes_before += task.file.file_size_in_bytes
            outcome.records_dropped += sum(len(v) for v in gone.values())
            for tp, offsets in gone.items():
                outcome.removed.setdefault(tp, []).extend(merged_ranges((o, o) for o in offsets))
            for (tp, first), part in kept.items():
                self._write(tp, first, part, outcome)
        return outcome, deleted

    def _tasks(self) -> list[Any]:
        with catalog_errors(f"plan the files of table {self.table.identifier}"):
            return list(self.table.table.scan().plan_files())

    def _infos(self, tasks: Sequence[Any]) -> tuple[list[FileInfo], int]:
        """compact: the files of ours of our routes' topics, and the store's time now."""
        modified, now_ms = self._modified()
        out = []
        for t in tasks:
            f = t.file
            tp = file_partition(f.file_path)
            named = DATA_NAME.match(f.file_path.rsplit("/", 1)[-1])
            if tp is None or tp.topic not in self.routes or named is None or t.delete_files:
                continue  # another tool's file (or one with deletes on it): left alone
            first = int(f.file_path.rsplit("/", 1)[-1].split("_", 1)[0])
            group = (tp, f.spec_id, f.partition)
            out.append(
                FileInfo(
                    f.file_path, group, first, f.file_size_in_bytes, modified.get(f.file_path, 0)
                )
            )
        return out, now_ms

    def _modified(self) -> tuple[dict[str, int], int]:
        """Each data file's LastModified (ms, the store's clock; one LIST per route), and the
        newest LastModified of the table's data and metadata (the fence this session just
        committed: the store's time now)."""
        out: dict[str, int] = {}
        now = 0
        for route in self.routes.values():
            bucket = route.target.bucket
            store = BucketStore(self.store, bucket)
            head = f"{route.target.prefix}/" if route.target.prefix else ""
            for prefix in (data_folder(route), f"{head}metadata/"):
                for item in drive(send_read(List(prefix)), store):
                    ms = int(item.last_modified * 1000)
                    out[f"s3://{bucket}/{item.key}"] = ms
                    now = max(now, ms)
        return out, now

    def _read(self, task: Any) -> pa.Table:
        """One data file's rows as pyiceberg reads them (position deletes applied, projected
        onto the table's current schema)."""
        # Heavy (seconds to import): loaded only when a command has an Iceberg route.
        from pyiceberg.expressions import AlwaysTrue
        from pyiceberg.io.pyarrow import ArrowScan

        t = self.table.table
        with catalog_errors(f"read {task.file.file_path} of table {self.table.identifier}"):
            return ArrowScan(t.metadata, t.io, t.schema(), AlwaysTrue()).to_table([task])

    def _split(
        self, rows: pa.Table
    ) -> tuple[dict[tuple[TopicPartition, int], pa.Table], dict[TopicPartition, list[int]]]:
        """The rows that stay, per partition (keyed with their first offset), and the offsets of
        the rows that go, per partition."""
        assert self.job.drop is not None
        keep: list[bool] = []
        where: list[TopicPartition] = []
        offsets: list[int] = []
        gone: dict[TopicPartition, list[int]] = {}
        for row in rows.to_pylist():
            record = _record(row, self.table.identifier)
            tp = TopicPartition(record.topic, record.partition)
            going = tp.topic in self.routes and self.job.drop(record)
            keep.append(not going)
            where.append(tp)
            offsets.append(record.offset)
            if going:
                gone.setdefault(tp, []).append(record.offset)
        kept: dict[tuple[TopicPartition, int], pa.Table] = {}
        if not gone:
            return kept, gone
        for tp in sorted({w for w, k in zip(where, keep, strict=True) if k}):
            mask = [k and w == tp for w, k in zip(where, keep, strict=True)]
            first = min(o for o, m in zip(offsets, mask, strict=True) if m)
            kept[(tp, first)] = rows.filter(pa.array(mask))
        return kept, gone

    def _write(self, tp: TopicPartition, first: int, rows: pa.Table, outcome: TableOutcome) -> None:
        """A new data file of ``rows`` (created If-None-Match with the claim's writer metadata)."""
        target = self.table.target
        head = f"{target.prefix}/" if target.prefix else ""
        bucket = target.bucket
        name = f"{first:012d}_{self.me.run_id}_{self.job_name}.parquet"  # as a run names it
        key = f"{head}{DATA_DIR}/{topic_segment(tp.topic)}/{tp.partition}/{name}"
        sink = io.BytesIO()
        pq.write_table(rows, sink, compression="snappy")
        body = sink.getvalue()
        metadata = object_metadata(self.me, 1, partition_ref(tp))
        with self.store.creating(bucket, key, metadata):
            self.store.upload_bytes(bucket, key, body)
        self.written.append((bucket, key))
        outcome.files_after += 1
        outcome.bytes_after += len(body)

    # -- commit ------------------------------------------------------------------------------

    def _commit(self, deleted: Sequence[Any], outcome: TableOutcome) -> bool:
        """One transaction: the overwrite, our summary and properties. False: a commit came
        first (our new files deleted, the table read again: plan again)."""
        props = snapshot_properties(
            self.table.offsets, 0, self.me.run_id, self.job_name, self.me.epoch
        )
        props |= {MAINTENANCE: self.job.command, RECORDS_REMOVED: str(outcome.records_dropped)}
        removed = self._removed_properties(outcome.removed)
        check_fence(self.table, self.me.epoch)
        self.check_lease()
        try:
            with catalog_errors(f"commit to table {self.table.identifier}"):
                try:
                    _overwrite(
                        self.table.table,
                        deleted,
                        [f"s3://{b}/{k}" for b, k in self.written],
                        props,
                        removed,
                    )
                except CommitFailedException:
                    log.info("%s: a concurrent commit won; planning again", self.table.identifier)
                    self._discard()
                    self.table.refresh()
                    return False
        except CatalogError:
            self.table.refresh()
            if self._went_through():
                return True
            raise
        self.table.refresh()
        log.info(
            "%s: %s replaced %d data file(s) with %d",
            self.table.identifier,
            self.job.command,
            outcome.files_before,
            outcome.files_after,
        )
        return True

    def _removed_properties(
        self, removed: Mapping[TopicPartition, list[tuple[int, int]]]
    ) -> dict[str, str]:
        """The ``kafka-archive.removed.*`` properties with this command's ranges added."""
        before = removed_ranges(self.table.table)
        out: dict[str, str] = {}
        for tp, ranges in removed.items():
            assert self.job.reason is not None
            old = [[r.first, r.last, r.reason, r.at] for r in before.get(tp, ())]
            new = [[a, b, self.job.reason, round(self.at, 3)] for a, b in merged_ranges(ranges)]
            out[removed_property(tp)] = json.dumps(sorted(old + new), separators=(",", ":"))
        return out

    def _discard(self) -> None:
        for bucket in sorted({b for b, _ in self.written}):
            self.store.delete(bucket, [k for b, k in self.written if b == bucket])
        self.written = []

    def _went_through(self) -> bool:
        snapshot = last_of_ours(self.table.table)[0] if self.table.table is not None else None
        summary = (
            snapshot.summary.additional_properties
            if snapshot is not None and snapshot.summary
            else {}
        )
        return bool(
            summary.get(RUN_ID) == self.me.run_id and summary.get(MAINTENANCE) == self.job.command
        )


def _overwrite(
    table: Any,
    deleted: Sequence[Any],
    added: Sequence[str],
    props: dict[str, str],
    removed: dict[str, str],
) -> None:
    """One transaction: ``deleted`` data files replaced by ``added`` in one OVERWRITE snapshot
    whose summary holds ``props``; the offsets (and ``removed``) set as table properties."""
    # Heavy (seconds to import): loaded only when a command has an Iceberg route.
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import parquet_file_to_data_file

    with table.transaction() as tx:
        with tx.update_snapshot(snapshot_properties=props).overwrite() as overwrite:
            # Every manifest is looked into: the deleted files' entries are found by file.
            overwrite.delete_by_predicate(AlwaysTrue())
            for data_file in deleted:
                overwrite.delete_data_file(data_file)
            for path in added:
                overwrite.append_data_file(
                    parquet_file_to_data_file(table.io, tx.table_metadata, path)
                )
        made = tx.table_metadata.current_snapshot()
        assert made is not None, "the overwrite made the current snapshot"
        tx.set_properties({**table_properties(props, made), **removed})


def _record(row: Mapping[str, Any], table: str) -> Record:
    """An envelope row as the record it stores (what the drop predicates take)."""
    meta = row.get("metadata")
    if not isinstance(meta, Mapping) or meta.get("offset") is None or meta.get("partition") is None:
        raise ConfigError(
            f"Iceberg table {table} has a row without its partition and offset",
            hint="erase and expire work on tables archived with PROPERTIES('store.envelope'=true) "
            "(with its metadata)",
        )
    headers = tuple((str(h["name"]), h["value"]) for h in row.get("headers") or ())
    return Record(
        topic=str(meta["topic"]),
        partition=int(meta["partition"]),
        offset=int(meta["offset"]),
        timestamp=None if meta.get("timestamp") is None else int(meta["timestamp"]),
        key=row.get("key"),
        value=row.get("value"),
        headers=headers,
    )


def refuse_unreadable(routes: Iterable[Route], command: str) -> None:
    """erase and expire: each table route's rows must carry their partition and offset."""
    for route in routes:
        if route.iceberg is not None and not (route.envelope.enabled and route.envelope.metadata):
            raise ConfigError(
                f"{command}: {route.topic}: the rows of Iceberg table {route.iceberg.table} do "
                "not carry their partition and offset (no 'store.envelope' with its metadata)",
                hint=f"{command} on a table records the offsets it removes; it works on tables "
                "archived with PROPERTIES('store.envelope'=true)",
            )

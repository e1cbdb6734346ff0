"""Iceberg routes (``'table.format'='iceberg'``): the route's Parquet files appended to an
Apache Iceberg table, exactly once, through pyiceberg on the driver.

- The table is the state (:mod:`.offsets`). Each batch makes ONE commit per table
  (:mod:`.commits`): it adds every file the batch's tasks wrote and records, in the new
  snapshot's summary and (same transaction) in the table's properties, the next offset of
  every partition the table holds (``kafka-archive.offsets.<topic>.<partition>``). A run
  resumes from the last snapshot of ours in the current snapshot's ancestry (another
  tool's compaction on top carries none), or from the properties when expiry removed it;
  there is no state object.
- Files are written by the Spark tasks like PARQUET objects, under ``<location>/data/``,
  named ``<topic>/<partition>/<first offset>_<run id>_<job>.parquet`` (:mod:`.routes`). A
  run that dies before its commit leaves files no snapshot references: the next run of the
  job removes them (:mod:`.orphans`, after a commit that refuses a stale driver's) before
  it writes anything, so no record is ever in the table twice.
- Concurrent writers are fenced by the catalog's optimistic commit: a commit that lost the
  race re-reads the table and retries only when the partitions it moves are still where it
  planned them; otherwise the run stops with a state conflict (exit 9).
- The catalog is configured as pyiceberg users configure it (:mod:`.catalog`); the
  archiver's S3 settings (endpoint, region, credentials) fill in the FileIO properties the
  catalog's configuration does not state. They are passed in-process, never on a command
  line. The table's columns and their evolution: :mod:`.schema`; the tables a plan writes,
  as the driver knows them: :mod:`.table`.

This module names what the rest of the archiver uses.
"""

from kafka_archive.archiver.iceberg.commits import commit_all
from kafka_archive.archiver.iceberg.orphans import prepare
from kafka_archive.archiver.iceberg.routes import refuse_tables
from kafka_archive.archiver.iceberg.table import (
    TableRoute,
    by_route,
    offsets_by_route,
    open_tables,
    with_data_layout,
)

__all__ = [
    "TableRoute",
    "by_route",
    "commit_all",
    "offsets_by_route",
    "open_tables",
    "prepare",
    "refuse_tables",
    "with_data_layout",
]

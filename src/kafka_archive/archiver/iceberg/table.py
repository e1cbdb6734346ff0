"""The tables a plan's Iceberg routes write, as the driver knows them: each loaded from its
catalog with its state (:func:`.offsets.table_offsets`), created from the first file a
commit adds, and the work units given the layout and columns of their table."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyiceberg.exceptions import (
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    TableAlreadyExistsError,
)

from kafka_archive.archiver.config.settings import S3Settings
from kafka_archive.archiver.core.model import TopicPartition, WorkUnit
from kafka_archive.archiver.iceberg.catalog import CatalogSource, catalog_errors
from kafka_archive.archiver.iceberg.offsets import committed_at, table_offsets
from kafka_archive.archiver.iceberg.routes import data_route, file_partition, location
from kafka_archive.archiver.iceberg.schema import (
    check_types,
    file_schema,
    set_partition_spec,
    table_schema,
)
from kafka_archive.kcql.plan import Plan, Route, Target

# The package's logger, as before its split (`--log-format json` prints its name).
log = logging.getLogger("kafka_archive.archiver.iceberg")

# pyiceberg retries a commit that lost a race by replaying it onto the new snapshot, with
# the summary it computed before: offsets it did not re-decide. The tables we write have its
# retries off; we re-read and re-decide instead (:func:`.commits.commit`).
NO_REPLAY = {"commit.retry.num-retries": "0"}


@dataclass
class TableRoute:
    """One table as the run knows it, and the routes (by index) that write it: ``table`` is
    None until it exists; ``offsets`` is its latest snapshot's state, which this run's
    commit must still find for the partitions it moves."""

    identifier: str
    source: CatalogSource
    routes: dict[int, Route]
    table: Any = None
    offsets: dict[TopicPartition, int] = dataclasses.field(default_factory=dict)

    @property
    def catalog(self) -> Any:
        return self.source.catalog

    @property
    def target(self) -> Target:
        """The target of its first route (commit_protocol=log: the target whose commit log
        holds the claim that fences the table; one per table, :func:`.orphans.prepare`)."""
        return self.routes[min(self.routes)].target

    def renew(self) -> None:
        """Load the table again if the credentials were renewed (its FileIO holds them)."""
        if self.source.renewed():
            self.refresh()

    def refresh(self) -> None:
        with catalog_errors(f"load table {self.identifier}"):
            try:
                self.table = self.catalog.load_table(self.identifier)
            except NoSuchTableError:
                self.table = None
        self.offsets = table_offsets(self.table)

    @property
    def committed_at(self) -> str | None:
        """When the latest snapshot was committed (ISO-8601 UTC), or None."""
        return committed_at(self.table)

    def files_by_partition(self) -> dict[TopicPartition, tuple[int, int]]:
        """(data files, bytes) of each Kafka partition in the latest snapshot, told by the
        files' names (:func:`.routes.file_partition`); for ``status``."""
        if self.table is None or self.table.current_snapshot() is None:
            return {}
        with catalog_errors(f"list the files of table {self.identifier}"):
            files = self.table.inspect.files().select(["file_path", "file_size_in_bytes"])
        found: dict[TopicPartition, tuple[int, int]] = {}
        for row in files.to_pylist():
            tp = file_partition(str(row["file_path"]))
            if tp is None:
                continue
            count, size = found.get(tp, (0, 0))
            found[tp] = (count + 1, size + int(row["file_size_in_bytes"]))
        return found

    def turn_off_replay(self) -> None:
        """Set :data:`NO_REPLAY` on a table that does not have it (one metadata commit)."""
        if self.table is None or all(
            self.table.properties.get(k) == v for k, v in NO_REPLAY.items()
        ):
            return
        what = f"set the properties of table {self.identifier}"
        with catalog_errors(what), self.table.transaction() as tx:
            tx.set_properties(NO_REPLAY)
        self.refresh()


def open_tables(plan: Plan, s3: S3Settings) -> list[TableRoute]:
    """The tables the plan's Iceberg routes write (catalogs opened once per name)."""
    catalogs: dict[str, CatalogSource] = {}
    tables: dict[tuple[str, str], TableRoute] = {}
    for index, route in enumerate(plan.routes):
        if route.iceberg is None:
            continue
        name = route.iceberg.catalog
        if name not in catalogs:
            catalogs[name] = CatalogSource(name, s3)
        key = (name, route.iceberg.table)
        if key not in tables:
            tables[key] = TableRoute(route.iceberg.table, catalogs[name], {})
            tables[key].refresh()
        tables[key].routes[index] = route
    return list(tables.values())


def offsets_by_route(tables: Sequence[TableRoute]) -> dict[int, Mapping[TopicPartition, int]]:
    """What planning needs: each Iceberg route's committed offsets, by route index."""
    return {index: table.offsets for index, table in by_route(tables).items()}


def by_route(tables: Sequence[TableRoute]) -> dict[int, TableRoute]:
    return {index: table for table in tables for index in table.routes}


def with_data_layout(
    units: Sequence[WorkUnit], tables: Sequence[TableRoute] = ()
) -> tuple[WorkUnit, ...]:
    """The units, each Iceberg route's given the layout of :func:`.routes.data_route` and
    the columns of its table, if it exists (:func:`.schema.table_schema`)."""
    schemas: dict[int, str | None] = {}
    for table in tables:
        text = table_schema(table.table) if table.table is not None else None
        schemas.update((index, text) for index in table.routes)
    return tuple(
        dataclasses.replace(
            u,
            route=data_route(u.route, u.run_id, u.job),
            table_schema=schemas.get(u.route_index),
        )
        if u.route.iceberg is not None
        else u
        for u in units
    )


def create_table(table: TableRoute, first_file: str) -> Any:
    """Create the table from the schema of its first file (location: the route's target)."""
    # Heavy (seconds to import): loaded only when a plan has an Iceberg route.
    from pyiceberg.io import load_file_io

    catalog = table.catalog
    with catalog_errors(f"create table {table.identifier}"):
        schema = file_schema(load_file_io(catalog.properties, first_file), first_file)
    check_types(table.catalog, table.identifier, schema)
    with catalog_errors(f"create table {table.identifier}"):
        namespace = table.identifier.rsplit(".", 1)[0]
        with contextlib.suppress(NamespaceAlreadyExistsError):
            catalog.create_namespace(namespace)
        route = next(iter(table.routes.values()))
        try:
            with catalog.create_table_transaction(
                table.identifier,
                schema=schema,
                location=location(route),
                properties=NO_REPLAY,
            ) as tx:
                set_partition_spec(tx, route)
            log.info("created Iceberg table %s at %s", table.identifier, location(route))
        except TableAlreadyExistsError:
            pass
        return catalog.load_table(table.identifier)

"""An Iceberg route (``'table.format'='iceberg'``) as plain decisions: where its table is,
how its tasks name the Parquet files they write (what makes a file provably a job's), which
Kafka partition a file holds, the partition spec PARTITIONBY gives a new table, and the
commands that refuse it. Pure."""

from __future__ import annotations

import dataclasses
import re

from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.partition.values import decode_segment, topic_segment
from kafka_archive.kcql.plan import (
    RECORD_TIME_COLUMN,
    LayoutKind,
    LayoutSpec,
    Placeholder,
    Plan,
    Route,
    Source,
    TemplateSlot,
    TemplateText,
)

DATA_DIR = "data"
DATA_NAME = re.compile(r"^\d+_(?P<run>[0-9a-f]{16})_(?P<job>.+)\.parquet$")


def location(route: Route) -> str:
    target = route.target
    return f"s3://{target.bucket}/{target.prefix}" if target.prefix else f"s3://{target.bucket}"


def data_route(route: Route, run_id: str, job: str) -> Route:
    """The route as its tasks write it: files under ``<prefix>/data/``, named by topic,
    partition, first offset, run id and job (what makes an orphan provably this job's)."""
    template = (
        TemplateText(f"{DATA_DIR}/"),
        TemplateSlot(Placeholder.TOPIC),
        TemplateText("/"),
        TemplateSlot(Placeholder.PARTITION),
        TemplateText("/"),
        TemplateSlot(Placeholder.OFFSET),
        TemplateText(f"_{run_id}_{job}."),
        TemplateSlot(Placeholder.EXT),
    )
    return dataclasses.replace(
        route, layout=LayoutSpec(kind=LayoutKind.TEMPLATE, template=template)
    )


def data_folder(route: Route) -> str:
    """The key prefix of the files the route's tasks write for its topic, which names the
    topic as :func:`data_route`'s layout does (``topic_segment``: ``_orders`` is listed as
    ``%5Forders``, where its files are)."""
    head = f"{route.target.prefix}/" if route.target.prefix else ""
    return f"{head}{DATA_DIR}/{topic_segment(route.topic)}/"


def earlier_run_of_job(key: str, run_id: str, job: str) -> bool:
    """Whether ``key`` names a data file job ``job`` wrote in a run other than ``run_id``."""
    match = DATA_NAME.match(key.rsplit("/", 1)[-1])
    return match is not None and match["run"] != run_id and match["job"] == job


def file_partition(path: str) -> TopicPartition | None:
    """The Kafka partition a data file of ours holds, told by its path
    (``…/data/<topic>/<partition>/…``, :func:`data_route`); None for another's file."""
    _, sep, rest = path.partition(f"/{DATA_DIR}/")
    parts = rest.split("/")
    if not sep or len(parts) < 3 or not parts[1].isdigit():
        return None  # not a file of ours
    try:
        topic = decode_segment(parts[0])
    except ValueError:
        return None
    if topic is None:
        return None
    return TopicPartition(topic, int(parts[1]))


def partition_spec(route: Route) -> list[tuple[str, str, str]]:
    """The table's partition fields for ``route``, as (source column, transform, name), in
    PARTITIONBY order: value fields are identity partitions; the ``_date`` entries together
    are one ``day`` or ``hour`` partition of :data:`RECORD_TIME_COLUMN`, where the first of
    them is. Each file holds one value of each: the tasks group records by the PARTITIONBY
    values (and ``_date`` text, in UTC), as for objects."""
    fields: list[tuple[str, str, str]] = []
    time = route.iceberg.time if route.iceberg is not None else None
    for ref in route.partition_by:
        if ref.source is Source.DATE:
            if time is not None and not any(f[0] == RECORD_TIME_COLUMN for f in fields):
                name = f"{RECORD_TIME_COLUMN}_{time.value}"
                fields.append((RECORD_TIME_COLUMN, time.value, name))
            continue
        column = ".".join(ref.path)
        fields.append((column, "identity", column.replace(".", "_")))
    return fields


def refuse_tables(plan: Plan | None, command: str) -> None:
    """``verify``, ``cat``, ``restore`` and ``reset`` read or write objects archives: an
    Iceberg route is refused with what to do instead."""
    for route in plan.routes if plan is not None else ():
        if route.iceberg is not None:
            raise ConfigError(
                f"{command} works on objects archives; the route for {route.topic} writes "
                f"Iceberg table {route.iceberg.table}",
                hint="Query the table with an Iceberg reader (pyiceberg, Spark, Trino, "
                "DuckDB); `status` shows its offsets. See README: Iceberg tables",
            )

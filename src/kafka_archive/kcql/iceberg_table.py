"""A table route: ``'table.format'='iceberg'``, its table and catalog, and the Iceberg
partitions its ``PARTITIONBY`` asks for (value fields, and a day or hour of the record time)."""

from __future__ import annotations

from collections.abc import Sequence

from kafka_archive.kcql.dates import DatePattern, compile_pattern
from kafka_archive.kcql.errors import KcqlSemanticError
from kafka_archive.kcql.plan import (
    DEFAULT_ICEBERG_CATALOG,
    FieldRef,
    Format,
    IcebergTable,
    Source,
    TableFormat,
    TimeTransform,
)
from kafka_archive.kcql.properties import Settings
from kafka_archive.kcql.syntax import Statement

_ICEBERG_KEYS = ("iceberg.table", "iceberg.catalog")
# Where files go is the table's business: settings that place objects do not apply.
_OBJECT_PLACEMENT_KEYS = ("layout", "layout.template", "key.suffix")


def compile_iceberg(
    settings: Settings, fmt: Format, statement: Statement, partition_by: tuple[FieldRef, ...]
) -> IcebergTable | None:
    """``'table.format'``, ``'iceberg.table'``, ``'iceberg.catalog'``."""
    chosen = settings.get("table.format")
    if chosen is None or chosen.value == TableFormat.OBJECTS.value:
        stray = next((settings[k] for k in _ICEBERG_KEYS if k in settings), None)
        if stray is not None:
            raise KcqlSemanticError(
                f"{stray.stated_as.split('=')[0]} needs 'table.format'='iceberg'",
                span=stray.span,
                hint="Add 'table.format'='iceberg', or remove the setting",
                label="iceberg-without-table-format",
            )
        return None
    if fmt is not Format.PARQUET:
        raise KcqlSemanticError(
            f"an Iceberg table stores Parquet files, not STOREAS {fmt.value}",
            span=statement.format.span if statement.format is not None else chosen.span,
            hint="Write STOREAS PARQUET, or remove 'table.format'",
            label="iceberg-format",
        )
    table = settings.get("iceberg.table")
    if table is None:
        raise KcqlSemanticError(
            "'table.format'='iceberg' needs 'iceberg.table'",
            span=chosen.span,
            hint="Name the table: 'iceberg.table'='namespace.table', e.g. 'db.orders'",
            label="iceberg-without-table",
        )
    for key in _OBJECT_PLACEMENT_KEYS:
        if key in settings:
            raise KcqlSemanticError(
                f"{key!r} does not apply to an Iceberg table (the table places its files)",
                span=settings[key].span,
                hint="Remove it, or 'table.format'",
                label="iceberg-layout",
            )
    envelope = settings.get("store.envelope")
    time = iceberg_time(settings, [ref for ref in partition_by if ref.source is Source.DATE])
    for ref in partition_by:
        if ref.source is Source.DATE:
            continue
        # A table is partitioned by its columns (identity): value fields, which are columns
        # unless the envelope keeps the value as bytes.
        if ref.source is not Source.VALUE or not ref.path:
            raise KcqlSemanticError(
                "an Iceberg table is partitioned by value fields (Iceberg identity "
                "partitions); this PARTITIONBY entry is not one",
                span=ref.span or chosen.span,
                hint="Partition by a field of the value, e.g. PARTITIONBY country, or remove "
                "the entry (query engines filter the table by any column)",
                label="iceberg-partition",
            )
        if envelope is not None and envelope.value == "true":
            raise KcqlSemanticError(
                "with 'store.envelope'=true the value is one bytes column: an Iceberg table "
                "cannot be partitioned by its fields",
                span=ref.span or chosen.span,
                hint="Remove PARTITIONBY, or 'store.envelope'",
                label="iceberg-partition",
            )
    catalog = settings.text("iceberg.catalog", DEFAULT_ICEBERG_CATALOG)
    return IcebergTable(table.value, catalog, time)


# The letters of a _date pattern that name a day (with a year, and month and day or day of
# year) and an hour of it: Iceberg's day and hour transforms, in UTC.
_DAY_LETTERS = frozenset("uyMLdD")
_HOUR_LETTERS = frozenset("Hk")
# The time zone database's names of UTC (its zone Etc/UTC and the links to it and to Etc/GMT,
# which has had offset zero always): Iceberg's transforms are in UTC.
_UTC_NAMES = frozenset(
    {"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"}
    | {"GMT", "Etc/GMT", "Etc/GMT0", "Etc/GMT+0", "Etc/GMT-0", "GMT0", "GMT+0", "GMT-0"}
    | {"Etc/Greenwich", "Greenwich"}
)


def iceberg_time(settings: Settings, dates: Sequence[FieldRef]) -> TimeTransform | None:
    """The Iceberg transform the PARTITIONBY ``_date`` entries of a table route ask for:
    together their patterns must name a day (``day``) or an hour (``hour``), in UTC, of the
    record timestamp (the table's :data:`RECORD_TIME_COLUMN`)."""
    if not dates:
        return None
    hint = "Write _date.uuuu-MM-dd (Iceberg day partitions) or _date.uuuu-MM-dd-HH (hour)"
    patterns: list[tuple[FieldRef, DatePattern]] = [
        (ref, compile_pattern(ref.path[0])) for ref in dates
    ]
    for ref, pattern in patterns:
        extra = pattern.letters - _DAY_LETTERS - _HOUR_LETTERS
        if extra or pattern.reduced_year:
            what = (
                "a two-digit year"
                if not extra
                else "letter(s) " + ", ".join(repr(c) for c in sorted(extra))
            )
            raise KcqlSemanticError(
                f"an Iceberg table is partitioned by day or hour of the record time; the date "
                f"pattern {pattern.pattern!r} uses {what}, which no Iceberg transform has",
                span=ref.span,
                hint=hint,
                label="iceberg-partition",
            )
    letters = frozenset().union(*(pattern.letters for _, pattern in patterns))
    if not (
        letters & frozenset("uy")
        and ("D" in letters or ({"d"} <= letters and letters & frozenset("ML")))
    ):
        raise KcqlSemanticError(
            "an Iceberg table is partitioned by day or hour of the record time; the _date "
            "pattern(s) here do not name a day (a year, a month and a day, or a year and a "
            "day of the year)",
            span=dates[0].span,
            hint=hint,
            label="iceberg-partition",
        )
    zone = settings.get("partition.timezone")
    if zone is not None and zone.value not in _UTC_NAMES:
        raise KcqlSemanticError(
            "Iceberg's day and hour transforms are in UTC; a table route's _date partitions "
            "cannot use another time zone",
            span=zone.span,
            hint="Remove 'partition.timezone' (query engines convert times to any zone)",
            label="iceberg-partition",
        )
    time_field = settings.get("partition.time.field")
    if time_field is not None:
        raise KcqlSemanticError(
            "a table route's _date partitions are days or hours of the record timestamp (the "
            "table's _timestamp column), not of a field",
            span=time_field.span,
            hint="Remove 'partition.time.field', or partition by the field itself "
            "(PARTITIONBY <field>)",
            label="iceberg-partition",
        )
    return TimeTransform.HOUR if letters & _HOUR_LETTERS else TimeTransform.DAY

"""Syntax -> :class:`~kafka_archive.kcql.plan.Plan`: meaning, defaults and every semantic check.

Each check raises :class:`KcqlSemanticError` with the span of the offending text, a stable
label and, where one exists, a fix ("Did you mean 'AVRO'?"). This module puts a route
together from the modules that compile each part: ``targets.py`` (bucket, prefix, topic),
``storeas.py`` (the format, its properties, the envelope), ``fields.py`` (SELECT and
PARTITIONBY), ``statement_settings.py`` (the WITH_* clauses and PROPERTIES as one table,
specified in ``properties.py``), ``iceberg_table.py`` (table routes) and ``layout.py``
(layouts); and it checks what no single statement shows (two routes writing one place).
"""

from __future__ import annotations

from collections.abc import Sequence

from kafka_archive.kcql.errors import KcqlSemanticError
from kafka_archive.kcql.fields import compile_partition_by, compile_select
from kafka_archive.kcql.iceberg_table import compile_iceberg
from kafka_archive.kcql.layout import compile_layout
from kafka_archive.kcql.plan import (
    ALL_TOPICS,
    DEFAULT_AVRO_CODEC,
    DEFAULT_FLUSH_COUNT,
    DEFAULT_FLUSH_INTERVAL_SECONDS,
    DEFAULT_FLUSH_SIZE,
    DEFAULT_PARQUET_CODEC,
    DEFAULT_PARQUET_ROW_GROUP_RECORDS,
    Codecs,
    Compression,
    ErrorPolicy,
    FlushPolicy,
    KeyNaming,
    Padding,
    Plan,
    Route,
    SchemaCompatibility,
    Target,
)
from kafka_archive.kcql.properties import Settings
from kafka_archive.kcql.statement_settings import statement_settings
from kafka_archive.kcql.storeas import (
    check_format_properties,
    compile_envelope,
    compile_format,
    refuse_format_parameters,
)
from kafka_archive.kcql.syntax import Statement
from kafka_archive.kcql.targets import compile_target, compile_topic


def compile_statements(statements: Sequence[Statement]) -> Plan:
    """Return the plan for parsed statements: one route per statement, in order.

    Raises:
        KcqlSemanticError: the first statement that cannot be archived as written.
    """
    routes = tuple(compile_statement(statement) for statement in statements)
    _check_overlaps(routes, statements)
    return Plan(routes)


def compile_statement(statement: Statement) -> Route:
    """Return the route of one statement, defaults applied and every check passed."""
    target = compile_target(statement.target)
    topic = compile_topic(statement.topic)
    fmt = compile_format(statement.format)
    refuse_format_parameters(statement.format_parameters, fmt)
    fields = compile_select(statement.fields, fmt) if statement.fields is not None else None
    partition_by = compile_partition_by(statement.partition_by or (), fmt)
    settings = statement_settings(statement)
    envelope = compile_envelope(settings, fmt)
    check_format_properties(settings, fmt)
    iceberg = compile_iceberg(settings, fmt, statement, partition_by)
    blocks = settings.optional("store.gzip.block.bytes")
    return Route(
        target=target,
        topic=topic,
        fields=fields,
        partition_by=partition_by,
        # Lenses writes name=value segments unless told otherwise ('partition.include.keys'
        # or WITHPARTITIONER): PartitionSelection's default display is KeysAndValues.
        include_keys=settings.text("partition.include.keys", "true" if partition_by else "false")
        == "true",
        format=fmt,
        flush=FlushPolicy(
            count=settings.integer("flush.count", DEFAULT_FLUSH_COUNT),
            size=settings.integer("flush.size", DEFAULT_FLUSH_SIZE),
            interval_seconds=settings.integer("flush.interval", DEFAULT_FLUSH_INTERVAL_SECONDS),
            interval_set="flush.interval" in settings,
            interval_by_record_time=settings.text("flush.interval.time", "record") == "record",
        ),
        naming=_naming(settings),
        envelope=envelope,
        codecs=Codecs(
            compression=Compression(settings.text("store.compression", Compression.NONE.value)),
            gzip_block_bytes=int(blocks) if blocks is not None else None,
            avro=settings.text("avro.codec", DEFAULT_AVRO_CODEC),
            parquet=settings.text("parquet.codec", DEFAULT_PARQUET_CODEC),
            parquet_row_group_records=settings.integer(
                "parquet.row.group.records", DEFAULT_PARQUET_ROW_GROUP_RECORDS
            ),
        ),
        error_policy=ErrorPolicy(settings.text("error.policy", ErrorPolicy.FAIL.value)),
        avro_schema_file=settings.optional("avro.schema.file"),
        avro_schema_subject=settings.optional("avro.schema.subject"),
        avro_schema_version=settings.optional("avro.schema.subject.version"),
        schema_compatibility=SchemaCompatibility(
            settings.text("schema.compatibility", SchemaCompatibility.NONE.value)
        ),
        transform=settings.optional("transform"),
        layout=compile_layout(settings, partition_by, statement.span),
        iceberg=iceberg,
        properties=tuple(sorted((key, setting.value) for key, setting in settings.items())),
        spans=tuple(sorted((key, setting.span) for key, setting in settings.items())),
        span=statement.span,
    )


def _naming(settings: Settings) -> KeyNaming:
    """``padding.*``. Lenses reads ``padding.length.<field>`` as one map that replaces the
    default ``{offset: 12}``: stating the partition's width alone leaves offsets unpadded."""
    naming = KeyNaming(
        padding=Padding(settings.text("padding.type", Padding.LEFT.value)),
        padding_char=settings.text("padding.char", "0"),
        offset_width=settings.integer(
            "padding.length.offset", 0 if "padding.length.partition" in settings else 12
        ),
        partition_width=settings.integer("padding.length.partition", 0),
    )
    char = naming.padding_char
    if (
        naming.padding is not Padding.NONE
        and char.isdigit()
        and (naming.padding is Padding.RIGHT or char != "0")
    ):
        key = "padding.char" if naming.padding is Padding.LEFT else "padding.type"
        stated = settings.get(key) or settings.get("padding.char")
        assert stated is not None
        raise KcqlSemanticError(
            f"{naming.padding.value} with padding character {char!r} gives different offsets "
            "the same key (42 and 420 with RightPad '0')",
            span=stated.span,
            hint="Use LeftPad with '0' (the default), or a non-digit padding character",
            label="ambiguous-padding",
            setting=key,
        )
    return naming


# ------------------------------------------------------------------------------------------
# Across statements.


def _check_overlaps(routes: Sequence[Route], statements: Sequence[Statement]) -> None:
    """Refuse two statements that write the same topic under the same bucket and prefix."""
    seen: dict[Target, list[tuple[str, Statement]]] = {}
    for route, statement in zip(routes, statements, strict=True):
        for topic, earlier in seen.get(route.target, []):
            if ALL_TOPICS in (topic, route.topic) or topic == route.topic:
                raise KcqlSemanticError(
                    f"topic {route.topic!r} is already written to {str(route.target)!r} by the "
                    f"statement on line {earlier.span.line}",
                    span=statement.topic.span,
                    hint="Give each statement its own bucket or prefix",
                    label="duplicate-route",
                )
        seen.setdefault(route.target, []).append((route.topic, statement))

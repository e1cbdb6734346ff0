"""KCQL, the language of the Lenses stream-reactor S3 sink, as kafka-archive reads it.

``parse`` turns KCQL text into a validated, frozen :class:`Plan` (one :class:`Route` per
statement, every setting compiled into typed fields); ``render`` turns a route back into
canonical KCQL; ``plan_to_dict`` is the JSON contract of ``kafka-archive plan --output
json``. The grammar is ``kcql.lark``.
"""

from __future__ import annotations

from typing import Any

from kafka_archive.kcql.errors import KcqlError, KcqlSemanticError, KcqlSyntaxError
from kafka_archive.kcql.plan import (
    Codecs,
    Compression,
    Envelope,
    ErrorPolicy,
    FieldRef,
    FlushPolicy,
    Format,
    KeyNaming,
    LayoutKind,
    LayoutSpec,
    Padding,
    Placeholder,
    Plan,
    Route,
    SelectField,
    Source,
    Span,
    Target,
    TemplatePart,
    TemplateSlot,
    TemplateText,
)
from kafka_archive.kcql.render import render, render_field, render_template

__all__ = [
    "Codecs",
    "Compression",
    "Envelope",
    "ErrorPolicy",
    "FieldRef",
    "FlushPolicy",
    "Format",
    "KcqlError",
    "KcqlSemanticError",
    "KcqlSyntaxError",
    "KeyNaming",
    "LayoutKind",
    "LayoutSpec",
    "Padding",
    "Placeholder",
    "Plan",
    "Route",
    "SelectField",
    "Source",
    "Span",
    "Target",
    "TemplatePart",
    "TemplateSlot",
    "TemplateText",
    "parse",
    "plan_to_dict",
    "render",
]


def parse(text: str, *, source: str = "kcql") -> Plan:
    """Return the validated plan of KCQL ``text``: one route per statement, in order.

    Args:
        text: One or more statements separated by ``;``; ``--`` starts a line comment.
        source: Names the text in error messages (``--kcql``, a file name).

    Raises:
        KcqlSyntaxError: the text does not follow the grammar.
        KcqlSemanticError: it parses but cannot be archived as written.
    """
    # Imported here: the plan types above are all a Spark worker needs, and the parser
    # (Lark and the grammar) is no part of that (``archiver/spark/daemon.py``).
    from kafka_archive.kcql.compile import compile_statements
    from kafka_archive.kcql.parser import parse_tree, refuse_glued_comments
    from kafka_archive.kcql.transform import ToSyntax

    try:
        tree = parse_tree(text)
        statements = ToSyntax().transform(tree)
        refuse_glued_comments(text, statements)
        return compile_statements(statements)
    except KcqlError as err:
        raise err.located(text=text, source=source) from None


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """Return the JSON form of a plan, the contract of ``kafka-archive plan --output json``."""
    return {"routes": [_route_to_dict(route) for route in plan.routes]}


def _route_to_dict(route: Route) -> dict[str, Any]:
    fields: str | list[dict[str, str]] = (
        "*"
        if route.fields is None
        else [
            {"path": render_field(field.ref), "alias": field.output_name} for field in route.fields
        ]
    )
    layout = route.layout
    return {
        "topic": route.topic,
        "bucket": route.target.bucket,
        "prefix": route.target.prefix,
        "fields": fields,
        "partition_by": [render_field(ref) for ref in route.partition_by],
        "include_keys": route.include_keys,
        "format": route.format.value,
        "flush": {
            "count": route.flush.count,
            "size": route.flush.size,
            "interval_seconds": route.flush.interval_seconds,
        },
        "padding": {
            "type": route.naming.padding.value,
            "char": route.naming.padding_char,
            "offset": route.naming.offset_width,
            "partition": route.naming.partition_width,
        },
        "envelope": (
            {
                "key": route.envelope.key,
                "value": route.envelope.value,
                "headers": route.envelope.headers,
                "metadata": route.envelope.metadata,
            }
            if route.envelope.enabled
            else None
        ),
        "compression": route.codecs.compression.value,
        "gzip_block_bytes": route.codecs.gzip_block_bytes,
        "avro_codec": route.codecs.avro,
        "parquet_codec": route.codecs.parquet,
        "parquet_row_group_records": route.codecs.parquet_row_group_records,
        "avro_schema_file": route.avro_schema_file,
        "avro_schema_subject": route.avro_schema_subject,
        "avro_schema_version": route.avro_schema_version,
        "schema_compatibility": route.schema_compatibility.value,
        "transform": route.transform,
        "error_policy": route.error_policy.value,
        "layout": {
            "kind": layout.kind.value,
            "template": render_template(layout.template, route.partition_by) or None,
            "key_suffix": layout.key_suffix,
            "timezone": layout.timezone,
            "time_field": None if layout.time_field is None else render_field(layout.time_field),
        },
        "iceberg": None
        if route.iceberg is None
        else {
            "table": route.iceberg.table,
            "catalog": route.iceberg.catalog,
            "time_partition": None if route.iceberg.time is None else route.iceberg.time.value,
        },
        "properties": dict(route.properties),
        "kcql": render(route),
    }

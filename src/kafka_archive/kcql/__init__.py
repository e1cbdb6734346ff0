"""KCQL, the language of the Lenses stream-reactor S3 sink, as kafka-archive reads it.

``parse`` turns KCQL text into a validated, frozen :class:`Plan` (one :class:`Route` per
statement); ``render`` turns a route back into canonical KCQL; ``plan_to_dict`` is the JSON
contract of ``kafka-archive plan --output json``. The grammar is ``kcql.lark``.
"""

from __future__ import annotations

from typing import Any

from kafka_archive.kcql.compile import compile_statements
from kafka_archive.kcql.errors import KcqlError, KcqlSemanticError, KcqlSyntaxError
from kafka_archive.kcql.parser import parse_tree
from kafka_archive.kcql.plan import (
    Envelope,
    FieldRef,
    FlushPolicy,
    Format,
    KeyNaming,
    Padding,
    Plan,
    Route,
    SelectField,
    Source,
    Span,
    Target,
)
from kafka_archive.kcql.render import render, render_field
from kafka_archive.kcql.transform import ToSyntax

__all__ = [
    "Envelope",
    "FieldRef",
    "FlushPolicy",
    "Format",
    "KcqlError",
    "KcqlSemanticError",
    "KcqlSyntaxError",
    "KeyNaming",
    "Padding",
    "Plan",
    "Route",
    "SelectField",
    "Source",
    "Span",
    "Target",
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
    try:
        tree = parse_tree(text)
        statements = ToSyntax().transform(tree)
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
            {"path": render_field(field.ref), "alias": field.output_name}
            for field in route.fields
        ]
    )
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
        "properties": dict(route.properties),
        "kcql": render(route),
    }

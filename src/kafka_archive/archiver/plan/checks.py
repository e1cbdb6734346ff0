"""KCQL text -> the plan a run would use, with every check a run makes of it before it
reads Kafka; ``validate``, ``plan`` and every command go through :func:`compile_plan`."""

from __future__ import annotations

from kafka_archive import kcql
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.formats import avsc
from kafka_archive.archiver.partition.layouts import LayoutError, layout_for
from kafka_archive.archiver.write import transforms
from kafka_archive.kcql.plan import Plan


def compile_plan(text: str, *, source: str = "kcql") -> Plan:
    """KCQL text -> the plan a run would use: :func:`kafka_archive.kcql.parse`, then every
    check a run makes of its plan before it reads Kafka (:func:`check_layouts`), each error
    at the text it concerns. ``validate``, ``plan`` and every command go through here.

    Raises:
        KcqlError: the text cannot be archived as written.
    """
    plan = kcql.parse(text, source=source)
    try:
        check_layouts(plan)
    except kcql.KcqlError as err:
        raise err.located(text=text, source=source) from None
    return plan


def check_layouts(plan: Plan) -> None:
    """Refuse, before anything runs, a route whose layout cannot give safe, unique keys
    (what depends on how values are encoded and on S3's key length) or whose Avro schema
    file cannot be read; the error points at the setting at fault."""
    for route in plan.routes:
        try:
            layout_for(route)
        except LayoutError as exc:
            raise kcql.KcqlSemanticError(
                f"the layout of the route for {route.topic}: {exc.message}",
                span=exc.span or route.span_of(exc.property),
                hint=exc.hint,
                label="layout",
                setting=exc.property,
            ) from None
        try:
            avsc.load(Plan((route,)))
        except ConfigError as exc:
            raise kcql.KcqlSemanticError(
                exc.message,
                span=route.span_of("avro.schema.file"),
                hint=exc.hint,
                label="schema-file",
                setting="avro.schema.file",
            ) from None
        try:
            transforms.load_plan(Plan((route,)))  # imports the user's function: fail fast
        except ConfigError as exc:
            raise kcql.KcqlSemanticError(
                exc.message,
                span=route.span_of("transform"),
                hint=exc.hint,
                label="transform",
                setting="transform",
            ) from None

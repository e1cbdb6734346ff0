"""Plan -> canonical KCQL: one statement per route, which parses back to the same route.

The canonical form is the current Lenses generation: every clause spelled one way, value
paths qualified (``_value.a``), ``STOREAS `FORMAT``` always written, the legacy ``WITH_*``
clauses written as ``PROPERTIES(...)`` sorted by key. Whether a name can go bare is asked
of the grammar's own terminals, so render and parse cannot drift apart.
"""

from __future__ import annotations

from kafka_archive.kcql.plan import (
    FieldRef,
    Placeholder,
    Route,
    SelectField,
    Target,
    TemplatePart,
    TemplateText,
)
from kafka_archive.kcql.properties import PROPERTY_SPECS


def render(route: Route) -> str:
    """Return the canonical KCQL statement of ``route`` (no trailing ``;``)."""
    parts = [
        f"INSERT INTO {render_target(route.target)}",
        f"SELECT {_fields(route.fields)}",
        f"FROM {render_topic(route.topic)}",
    ]
    if route.partition_by:
        parts.append("PARTITIONBY " + ", ".join(render_field(ref) for ref in route.partition_by))
    parts.append(f"STOREAS `{route.format.value}`")
    if route.properties:
        entries = ", ".join(f"{quote(key)}={_value(key, value)}" for key, value in route.properties)
        parts.append(f"PROPERTIES({entries})")
    return " ".join(parts)


def render_target(target: Target) -> str:
    """``bucket[:prefix]``, back-ticked when it cannot be written bare."""
    text = str(target)
    return text if can_be_bare("TARGET", text) else f"`{text}`"


def render_topic(topic: str) -> str:
    """A topic, back-ticked when it cannot be written bare (always for ``*``)."""
    return topic if can_be_bare("TOPIC", topic) else f"`{topic}`"


def render_name(name: str) -> str:
    """One path segment or alias, back-ticked when it cannot be written bare."""
    return name if can_be_bare("NAME", name) else f"`{name}`"


def can_be_bare(terminal: str, text: str) -> bool:
    """:func:`kafka_archive.kcql.parser.can_be_bare`, imported on first use: the plan types
    (and so this module, through the package) must import without Lark."""
    from kafka_archive.kcql.parser import can_be_bare as bare

    return bare(terminal, text)


def render_field(ref: FieldRef) -> str:
    """A record path, qualified with its source: ``_value.a.b``, ``_key``, ``_date.uuuu``."""
    return ".".join([ref.source.value, *(render_name(name) for name in ref.path)])


def quote(text: str) -> str:
    """``'text'`` with quotes doubled."""
    escaped = text.replace("'", "''")
    return f"'{escaped}'"


def _fields(fields: tuple[SelectField, ...] | None) -> str:
    if fields is None:
        return "*"
    return ", ".join(_select_field(field) for field in fields)


def _select_field(field: SelectField) -> str:
    path = render_field(field.ref)
    return path if field.alias is None else f"{path} AS {render_name(field.alias)}"


def _value(key: str, value: str) -> str:
    spec = PROPERTY_SPECS.get(key)
    return value if spec is not None and spec.kind.bare else quote(value)


def render_template(parts: tuple[TemplatePart, ...], partition_by: tuple[FieldRef, ...]) -> str:
    """A compiled template written back (``{field:…}`` by path): ``''`` for no template."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, TemplateText):
            out.append(part.text)
        elif part.placeholder is Placeholder.FIELD:
            out.append("{field:" + render_field(partition_by[part.field]) + "}")
        else:
            out.append("{" + part.placeholder.value + "}")
    return "".join(out)

"""``layout``, ``layout.template`` and their companions -> :class:`LayoutSpec`.

Everything about a layout that the KCQL text alone decides is checked here, with the
position of the offending text: the layout's name, the template's placeholders, literal
text and path segments, that every key names topic, partition and offset, that every
PARTITIONBY field is placed, and the time zone and time field. What depends on how the
archiver encodes values (whether a placeholder's end can be found, the S3 key length
budget) is checked when the archiver builds the layout from this spec
(``archiver/partition/layouts.py``), and reported at the position kept in ``span``.

Template grammar: ``{topic}`` ``{partition}`` ``{offset}`` (all three required), ``{ext}``,
``{suffix}`` (required when ``key.suffix`` is set), ``{year}`` ``{month}`` ``{day}``
``{hour}`` ``{minute}`` ``{second}`` ``{date}`` (record time), ``{field:NAME}`` for a
PARTITIONBY field by name (``country`` for ``_header.country``, ``year`` for
``_date.uuuu``) or path; ``{prefix}/`` may open it. Literal text: ASCII letters, digits and
``- _ . / = + ( ) ~ @ ! ,``; no empty segment, none starting with ``.`` or ``_``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kafka_archive.kcql.dates import compile_pattern, field_name
from kafka_archive.kcql.errors import KcqlSemanticError, closest, one_of
from kafka_archive.kcql.plan import (
    DEFAULT_TIMEZONE,
    TIME_PLACEHOLDERS,
    FieldRef,
    LayoutKind,
    LayoutSpec,
    Placeholder,
    Source,
    Span,
    TemplatePart,
    TemplateSlot,
    TemplateText,
    field_path,
)
from kafka_archive.kcql.properties import Setting, Settings, value_span

LITERAL_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=+()~@!,"
)
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_PREFIX = "{prefix}"
_NAMED = {p.value: p for p in Placeholder if p is not Placeholder.FIELD}
_KNOWN = [*_NAMED, "prefix", "field:NAME"]


@dataclass(frozen=True, slots=True)
class PartitionField:
    """A PARTITIONBY entry as templates name it."""

    name: str
    path: str
    paths: tuple[str, ...]


def partition_field(ref: FieldRef) -> PartitionField:
    """How ``{field:…}`` and ``name=value`` segments name ``ref``: its last path name, or for
    ``_date.<pattern>`` what the pattern shows (``year``, ``month``, …, ``date``)."""
    path = ref.source.value + "".join("." + name for name in ref.path)
    name = field_name(compile_pattern(ref.path[0])) if ref.source is Source.DATE else ref.name
    paths = (path, ".".join(ref.path)) if ref.source is Source.VALUE and ref.path else (path,)
    return PartitionField(name, path, paths)


def compile_layout(
    settings: Settings, partition_by: Sequence[FieldRef], statement_span: Span
) -> LayoutSpec:
    """Return the layout of a statement's settings; raise at the text that cannot work."""
    named, template = settings.get("layout"), settings.get("layout.template")
    kind = (
        LayoutKind(named.value)
        if named is not None
        else (LayoutKind.TEMPLATE if template is not None else LayoutKind.LENSES)
    )
    if kind is LayoutKind.TEMPLATE and template is None:
        assert named is not None
        raise KcqlSemanticError(
            "'layout'='template' needs a template",
            span=named.span,
            hint="Add 'layout.template'='{topic}/{partition}/{offset}.{ext}' or similar",
            label="layout-template",
            setting="layout.template",
        )
    if kind is not LayoutKind.TEMPLATE and template is not None:
        assert named is not None
        raise KcqlSemanticError(
            f"'layout.template' is set but the layout is {named.value!r}",
            span=named.span,
            hint="Write 'layout'='template', or remove 'layout.template'",
            label="layout-template",
            setting="layout",
        )
    suffix = settings.get("key.suffix")
    time_field = settings.optional("partition.time.field")
    parts: tuple[TemplatePart, ...] = ()
    if template is not None:
        parts = _template(template, [partition_field(ref) for ref in partition_by], suffix)
    stated = template or named or settings.get("key.suffix")
    return LayoutSpec(
        kind=kind,
        template=parts,
        key_suffix=suffix.value if suffix is not None else "",
        timezone=settings.text("partition.timezone", DEFAULT_TIMEZONE),
        time_field=None if time_field is None else field_path(time_field),
        span=stated.span if stated is not None else statement_span,
    )


def _template(
    setting: Setting, fields: Sequence[PartitionField], suffix: Setting | None
) -> tuple[TemplatePart, ...]:
    text = setting.value

    def fail(
        message: str,
        start: int = 0,
        end: int | None = None,
        hint: str | None = None,
    ) -> KcqlSemanticError:
        return KcqlSemanticError(
            f"layout.template {text!r}: {message}",
            span=value_span(setting.written, start, len(text) if end is None else end),
            hint=hint,
            label="bad-template",
            setting="layout.template",
        )

    position = 0
    if text.startswith(_PREFIX):
        if not text.startswith(_PREFIX + "/"):
            raise fail("'{prefix}' must be followed by '/'", 0, len(_PREFIX))
        position = len(_PREFIX) + 1
    parts: list[TemplatePart] = []
    used: set[int] = set()
    for match in _PLACEHOLDER.finditer(text, position):
        _literal(parts, text, position, match.start(), fail)
        position = match.end()
        name, span = match.group(1), value_span(setting.written, match.start(), match.end())
        if name in _NAMED:
            parts.append(TemplateSlot(_NAMED[name], span=span))
        elif name.startswith("field:"):
            start, end = match.span()
            index = _field(
                name[len("field:") :], fields, lambda m, h, a=start, b=end: fail(m, a, b, h)
            )
            used.add(index)
            parts.append(TemplateSlot(Placeholder.FIELD, index, span))
        elif name == "prefix":
            raise fail("'{prefix}' may only open the template", *match.span())
        else:
            close = closest(name, _KNOWN)
            raise fail(
                f"unknown placeholder {{{name}}}",
                *match.span(),
                hint=f"Did you mean {{{close}}}?"
                if close
                else "Known: " + one_of("{" + k + "}" for k in _KNOWN),
            )
    _literal(parts, text, position, len(text), fail)
    placed = {p.placeholder for p in parts if isinstance(p, TemplateSlot)}
    for required in (Placeholder.TOPIC, Placeholder.PARTITION, Placeholder.OFFSET):
        if required not in placed:
            raise fail(
                f"every key must contain the topic, partition and start offset; "
                f"{{{required.value}}} is missing",
                hint="Otherwise two partitions or two objects could get the same key",
            )
    if suffix is not None and suffix.value and Placeholder.SUFFIX not in placed:
        raise fail(
            "'key.suffix' is set but the template has no {suffix}",
            hint="Place {suffix}, e.g. '{offset}{suffix}.{ext}'",
        )
    _check_segments(parts, fail)
    unused = [f for index, f in enumerate(fields) if index not in used]
    if unused:
        raise fail(
            f"PARTITIONBY {', '.join(f.path for f in unused)} not used",
            hint="Add {field:" + unused[0].name + "} or drop the field from PARTITIONBY",
        )
    return tuple(parts)


class _Fail(Protocol):
    def __call__(
        self, message: str, start: int = 0, end: int | None = None, hint: str | None = None
    ) -> KcqlSemanticError: ...


def _literal(parts: list[TemplatePart], text: str, start: int, end: int, fail: _Fail) -> None:
    if start == end:
        return
    for index in range(start, end):
        if text[index] not in LITERAL_CHARS:
            raise fail(
                f"literal text may not contain {text[index]!r}",
                index,
                index + 1,
                hint="Use ASCII letters, digits and - _ . / = + ( ) ~ @ ! ,",
            )
    parts.append(TemplateText(text[start:end]))


def _field(name: str, fields: Sequence[PartitionField], fail: _FieldFail) -> int:
    by_path = [i for i, f in enumerate(fields) if name in f.paths]
    if by_path:
        return by_path[0]
    by_name = [i for i, f in enumerate(fields) if name == f.name]
    if len(by_name) == 1:
        return by_name[0]
    if by_name:
        paths = ", ".join(fields[i].path for i in by_name)
        raise fail(f"{{field:{name}}} is ambiguous ({paths})", "Name the field by its path")
    known = [f.name for f in fields] + [f.path for f in fields]
    close = closest(name, known)
    raise fail(
        f"{{field:{name}}} is not a PARTITIONBY field",
        f"Did you mean {{field:{close}}}?"
        if close
        else "PARTITIONBY: " + (", ".join(f.path for f in fields) or "(none)"),
    )


class _FieldFail(Protocol):
    def __call__(self, message: str, hint: str | None) -> KcqlSemanticError: ...


def _check_segments(parts: Sequence[TemplatePart], fail: _Fail) -> None:
    """Refuse empty segments and segments that start with ``.`` or ``_`` (hidden to Hadoop
    readers; ``.kafka-archive`` is the state's namespace)."""
    segment_start = segment_empty = True
    for part in parts:
        if not isinstance(part, TemplateText):
            segment_start = segment_empty = False
            continue
        for char in part.text:
            if char == "/":
                if segment_empty:
                    raise fail("empty path segment (a leading, trailing or double '/')")
                segment_start = segment_empty = True
                continue
            if segment_start and char in "._":
                raise fail(
                    f"a path segment may not start with {char!r}",
                    hint="Readers such as Spark and Athena skip such paths",
                )
            segment_start = segment_empty = False
    if segment_empty:
        raise fail("empty path segment (a leading, trailing or double '/')")


__all__ = [
    "LITERAL_CHARS",
    "TIME_PLACEHOLDERS",
    "PartitionField",
    "compile_layout",
    "partition_field",
]

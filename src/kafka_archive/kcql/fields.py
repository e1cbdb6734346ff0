"""Field paths of ``SELECT`` and ``PARTITIONBY``: what a path's first name means (a record
part, or a value field), where each part may be used, and Lenses' older ``_.`` spelling."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from kafka_archive.kcql.dates import compile_pattern
from kafka_archive.kcql.errors import KcqlSemanticError, did_you_mean
from kafka_archive.kcql.plan import FieldRef, Format, SelectField, Source
from kafka_archive.kcql.syntax import Path, SelectItem, Word

UNSTRUCTURED_FORMATS = frozenset({Format.TEXT, Format.BYTES})

# Record sources: what a path's first name can mean.
_SOURCES: Mapping[str, Source] = MappingProxyType({source.value: source for source in Source})
_METADATA = frozenset({Source.TOPIC, Source.PARTITION, Source.OFFSET, Source.TIMESTAMP})
_SELECT_SOURCES = frozenset(Source) - {Source.DATE}
_PARTITION_SOURCES = frozenset(Source) - {Source.OFFSET, Source.TIMESTAMP}
# Besides letters and digits, what a date pattern may hold: separators that are safe in a key
# segment, and quotes around literal text.
_DATE_OTHER = frozenset("-_.'")


class Use(enum.Enum):
    SELECT = "SELECT"
    PARTITIONBY = "PARTITIONBY"


def field_ref(path: Path, use: Use) -> FieldRef:
    """Resolve a written path to the record part it reads."""
    first, *rest = path.segments
    if first.text == _UNDERSCORE and not first.quoted and rest:
        return _underscore_ref(path, use)
    source = _SOURCES.get(first.text) if not first.quoted else None
    if source is None:
        if not first.quoted and first.text.startswith("_"):
            close = did_you_mean(first.text, _SOURCES, cutoff=0.75)
            if close is not None:
                raise KcqlSemanticError(
                    f"unknown record part {first.text!r}",
                    span=first.span,
                    hint=f"{close} (for a value field write _value.{first.text})",
                    label="unknown-source",
                )
        return FieldRef(Source.VALUE, tuple(w.text for w in path.segments), path.span)
    names = tuple(w.text for w in rest)
    allowed = _SELECT_SOURCES if use is Use.SELECT else _PARTITION_SOURCES
    if source not in allowed:
        hint = (
            "Partition by time with _date.<pattern>, such as _date.uuuu, _date.LL, _date.dd"
            if use is Use.PARTITIONBY
            else "Add _timestamp to the SELECT list and partition with PARTITIONBY _date.<pattern>"
        )
        raise KcqlSemanticError(
            f"{first.text} cannot be used in {use.value}",
            span=path.span,
            hint=hint,
            label="source-not-allowed",
        )
    if source in _METADATA and names:
        raise KcqlSemanticError(
            f"{first.text} has no fields",
            span=path.span,
            hint=f"Write {first.text}",
            label="metadata-path",
        )
    if source is Source.HEADER and not names:
        raise KcqlSemanticError(
            "_header needs a header name",
            span=path.span,
            hint="Write _header.<name>, such as _header.country",
            label="header-name",
        )
    if source is Source.DATE:
        _check_date_pattern(path, rest)
    return FieldRef(source, names, path.span)


# Lenses' older spelling of record parts: _.topic, _.partition, _.offset, _.timestamp and
# _.key.<field> (io.lenses.kcql.Field.from); it refuses '_' followed by anything else.
_UNDERSCORE = "_"
_UNDERSCORE_METADATA: Mapping[str, Source] = MappingProxyType(
    {
        "topic": Source.TOPIC,
        "partition": Source.PARTITION,
        "offset": Source.OFFSET,
        "timestamp": Source.TIMESTAMP,
    }
)
_UNDERSCORE_HINT = "Write _.topic, _.partition, _.offset, _.timestamp or _.key.<field> (or _key)"


def _underscore_ref(path: Path, use: Use) -> FieldRef:
    """``_.topic`` is ``_topic`` and ``_.key.a`` is ``_key.a``, as Lenses reads them in SELECT
    (a lone ``_`` is a value field there, as in Lenses)."""
    rest = path.segments[1:]
    if use is Use.PARTITIONBY:
        raise KcqlSemanticError(
            "'_.' is ambiguous in PARTITIONBY: Lenses reads it as a value field named '_'",
            span=path.span,
            hint="Write _topic, _partition or _key.<field>; for a value field named '_' write "
            "_value._." + ".".join(w.text for w in rest),
            label="underscore-path",
        )
    second, *names = rest
    name = second.text.lower()
    if name in _UNDERSCORE_METADATA and not second.quoted:
        if names:
            raise KcqlSemanticError(
                f"_.{second.text} has no fields",
                span=path.span,
                hint=f"Write _.{second.text}",
                label="metadata-path",
            )
        return FieldRef(_UNDERSCORE_METADATA[name], (), path.span)
    if name == "key" and not second.quoted:
        if not names:
            raise KcqlSemanticError(
                "_.key needs a field after it (Lenses refuses a bare _.key)",
                span=path.span,
                hint="Write _.key.<field>, or _key for the whole key",
                label="underscore-path",
            )
        return FieldRef(Source.KEY, tuple(w.text for w in names), path.span)
    raise KcqlSemanticError(
        f"'_' must be followed by key.<field>, topic, partition, timestamp or offset, "
        f"not {second.text!r}",
        span=second.span,
        hint=_UNDERSCORE_HINT + "; for a value field named '_' write _value._." + second.text,
        label="underscore-path",
    )


def _check_date_pattern(path: Path, rest: list[Word]) -> None:
    hint = "Use DateTimeFormatter letters, such as _date.uuuu, _date.MM, _date.dd, _date.HH"
    if len(rest) != 1:
        raise KcqlSemanticError(
            "_date takes exactly one pattern",
            span=path.span,
            hint=hint + "; put a pattern with dots in back-ticks: _date.`uuuu.MM`",
            label="date-pattern",
        )
    (pattern,) = rest
    for char in pattern.text:
        if not (char.isascii() and (char.isalnum() or char in _DATE_OTHER)):
            raise KcqlSemanticError(
                f"{char!r} is not allowed in the date pattern {pattern.text!r}",
                span=pattern.span,
                hint=hint + "; other characters: digits, - _ . and 'quoted' letters",
                label="date-pattern",
            )
    try:
        compile_pattern(pattern.text)
    except ValueError as exc:
        raise KcqlSemanticError(
            str(exc), span=pattern.span, hint=hint, label="date-pattern"
        ) from None


def compile_select(items: tuple[SelectItem, ...], fmt: Format) -> tuple[SelectField, ...]:
    if fmt in UNSTRUCTURED_FORMATS:
        raise KcqlSemanticError(
            f"a SELECT list cannot apply to {fmt.value}, which stores each value as it is",
            span=items[0].span,
            hint="Write SELECT *, or store as JSON, AVRO or PARQUET",
            label="select-unstructured",
        )
    fields: list[SelectField] = []
    seen: dict[str, SelectItem] = {}
    for item in items:
        ref = field_ref(item.path, Use.SELECT)
        field = SelectField(ref, item.alias.text if item.alias else None, item.span)
        name = field.output_name
        if name in seen:
            raise KcqlSemanticError(
                f"two SELECT fields are stored as {name!r}",
                span=item.span,
                hint="Give one of them another name with AS",
                label="duplicate-field",
            )
        seen[name] = item
        fields.append(field)
    return tuple(fields)


def compile_partition_by(paths: tuple[Path, ...], fmt: Format) -> tuple[FieldRef, ...]:
    refs: list[FieldRef] = []
    for path in paths:
        ref = field_ref(path, Use.PARTITIONBY)
        if ref in refs:
            raise KcqlSemanticError(
                "this PARTITIONBY entry is already listed",
                span=path.span,
                hint="Remove the duplicate",
                label="duplicate-partition",
            )
        if (
            fmt in UNSTRUCTURED_FORMATS
            and ref.source is Source.VALUE
            and (ref.path or fmt is Format.BYTES)
        ):
            raise KcqlSemanticError(
                f"cannot partition {fmt.value} by a value field: {fmt.value} values have no fields",
                span=path.span,
                hint="Partition by _key, _header.<name>, _topic, _partition or _date.<pattern>",
                label="value-partition-unstructured",
            )
        refs.append(ref)
    return tuple(refs)

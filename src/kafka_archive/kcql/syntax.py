"""The KCQL syntax tree: what was written, where, with no meaning attached yet.

``transform.py`` builds these from the Lark tree; ``compile.py`` turns them into a
:class:`~kafka_archive.kcql.plan.Plan`. Names keep whether they were back-ticked, values keep
their spelling, and every node has a :class:`~kafka_archive.kcql.plan.Span`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafka_archive.kcql.plan import Span


@dataclass(frozen=True, slots=True)
class Word:
    """A name as written: ``text`` without back-ticks, ``quoted`` if it had them."""

    text: str
    quoted: bool
    span: Span


@dataclass(frozen=True, slots=True)
class TargetText:
    """``bucket[:prefix]``, split at the first colon. ``prefix`` is ``None`` without a colon."""

    bucket: str
    bucket_span: Span
    prefix: str | None
    prefix_span: Span | None
    quoted: bool
    span: Span


@dataclass(frozen=True, slots=True)
class Path:
    """A dotted path such as ``_key.`cost.centre.id``` (segments in order)."""

    segments: tuple[Word, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class SelectItem:
    """One entry of a SELECT list: ``path [AS alias]``."""

    path: Path
    alias: Word | None
    span: Span


class ValueKind(enum.Enum):
    """How a PROPERTIES value was spelled."""

    STRING = "string"  # 'text'
    NUMBER = "number"  # 5000
    WORD = "word"  # true, LeftPad


@dataclass(frozen=True, slots=True)
class Value:
    """A PROPERTIES value; ``text`` is unquoted (``''`` already turned into ``'``)."""

    text: str
    kind: ValueKind
    span: Span


@dataclass(frozen=True, slots=True)
class Property:
    """``'key'=value`` inside PROPERTIES(...)."""

    key: str
    key_span: Span
    value: Value
    span: Span


@dataclass(frozen=True, slots=True)
class LegacySetting:
    """A 5.x-6.x clause: ``WITH_FLUSH_COUNT = 5000`` or ``WITHPARTITIONER = Values``.

    ``keyword`` is upper-cased; ``value`` is the right-hand side as written.
    """

    keyword: str
    value: Value
    span: Span


@dataclass(frozen=True, slots=True)
class Statement:
    """One ``INSERT INTO … SELECT … FROM …`` statement, clause by clause.

    ``fields`` is ``None`` for ``SELECT *``. ``partition_by`` is ``None`` when there is no
    PARTITIONBY clause; ``no_partition`` is the span of ``NOPARTITION`` when written.
    ``legacy`` holds WITHPARTITIONER and the WITH_FLUSH_* clauses in text order;
    ``properties`` is ``None`` without a PROPERTIES clause.
    """

    target: TargetText
    fields: tuple[SelectItem, ...] | None
    fields_span: Span
    topic: Word
    partition_by: tuple[Path, ...] | None
    no_partition: Span | None
    format: Word | None
    legacy: tuple[LegacySetting, ...]
    properties: tuple[Property, ...] | None
    span: Span
    # STOREAS `X` (k=v, …), as Lenses' KCQL parses them (and its S3 sink ignores them).
    format_parameters: tuple[Property, ...] = ()

"""Lark tree -> :mod:`~kafka_archive.kcql.syntax` nodes. A thin mapping: no defaults, no checks.

The grammar shapes the tree so that each callback below only unwraps tokens and records
spans. Meaning (which names are formats, which paths are record sources, …) is left to
``compile.py``.
"""

from __future__ import annotations

from typing import Any

from lark import Token, Transformer, v_args
from lark.tree import Meta

from kafka_archive.kcql.plan import Span
from kafka_archive.kcql.syntax import (
    LegacySetting,
    Path,
    Property,
    SelectItem,
    Statement,
    TargetText,
    Value,
    ValueKind,
    Word,
)

_VALUE_KINDS = {"STRING": ValueKind.STRING, "INT": ValueKind.NUMBER, "NAME": ValueKind.WORD}


def token_span(token: Token) -> Span:
    """The span of one token."""
    assert token.line is not None and token.column is not None
    assert token.end_line is not None and token.end_column is not None
    return Span(token.line, token.column, token.end_line, token.end_column)


def _meta_span(meta: Meta) -> Span:
    return Span(meta.line, meta.column, meta.end_line, meta.end_column)


def _word(token: Token) -> Word:
    """A name; back-ticked, or (a target or topic) in single quotes, as Lenses reads them."""
    if token.type == "STRING":
        return Word(_unquote(token), True, token_span(token))
    quoted = token.type == "QUOTED"
    return Word(token.value[1:-1] if quoted else token.value, quoted, token_span(token))


def _unquote(token: Token) -> str:
    """The text of a 'string' token without its quotes, ``''`` read as one quote."""
    text: str = token.value
    return text[1:-1].replace("''", "'")


def _value(token: Token) -> Value:
    text = _unquote(token) if token.type == "STRING" else token.value
    return Value(text, _VALUE_KINDS[token.type], token_span(token))


@v_args(meta=True)
class ToSyntax(Transformer[Token, tuple[Statement, ...]]):
    """Turns the tree of ``kcql.lark`` into a tuple of :class:`Statement`."""

    def start(self, meta: Meta, children: list[Statement]) -> tuple[Statement, ...]:
        return tuple(children)

    def statement(self, meta: Meta, children: list[Any]) -> Statement:
        _insert, target, (fields, fields_span), topic, partitioning, storeas, partitioner = (
            children[:7]
        )
        *flush, properties = children[7:]
        partition_by, no_partition = partitioning if partitioning is not None else (None, None)
        legacy = tuple(setting for setting in (partitioner, *flush) if setting is not None)
        return Statement(
            target=target,
            fields=fields,
            fields_span=fields_span,
            topic=topic,
            partition_by=partition_by,
            no_partition=no_partition,
            format=storeas[0] if storeas is not None else None,
            format_parameters=storeas[1] if storeas is not None else (),
            legacy=legacy,
            properties=properties,
            span=_meta_span(meta),
        )

    def target(self, meta: Meta, children: list[Token]) -> TargetText:
        if len(children) == 2:  # `bucket`:`prefix`
            bucket, prefix = (_word(token) for token in children)
            return TargetText(
                bucket.text, bucket.span, prefix.text, prefix.span, True, _meta_span(meta)
            )
        (token,) = children
        word = _word(token)
        bucket_text, colon, prefix_text = word.text.partition(":")
        first = word.span.column + (1 if word.quoted else 0)
        line = word.span.line
        after = first + len(bucket_text) + 1
        return TargetText(
            bucket=bucket_text,
            bucket_span=Span(line, first, line, first + len(bucket_text)),
            prefix=prefix_text if colon else None,
            prefix_span=Span(line, after, line, after + len(prefix_text)) if colon else None,
            quoted=word.quoted,
            span=word.span,
        )

    def select_all(self, meta: Meta, children: list[Token]) -> tuple[None, Span]:
        return None, _meta_span(meta)

    def select_fields(
        self, meta: Meta, children: list[SelectItem]
    ) -> tuple[tuple[SelectItem, ...], Span]:
        return tuple(children), _meta_span(meta)

    def select_field(self, meta: Meta, children: list[Any]) -> SelectItem:
        path, alias = children
        return SelectItem(path, alias, _meta_span(meta))

    def alias(self, meta: Meta, children: list[Token]) -> Word:
        (token,) = children
        return _word(token)

    def path(self, meta: Meta, children: list[Token]) -> Path:
        return Path(tuple(_word(token) for token in children), _meta_span(meta))

    def topic(self, meta: Meta, children: list[Token]) -> Word:
        (token,) = children
        return _word(token)

    def partition_by(self, meta: Meta, children: list[Path]) -> tuple[tuple[Path, ...], None]:
        return tuple(children), None

    def no_partition(self, meta: Meta, children: list[Token]) -> tuple[None, Span]:
        (token,) = children
        return None, token_span(token)

    def storeas(self, meta: Meta, children: list[Any]) -> tuple[Word, tuple[Property, ...]]:
        token, *groups = children
        return _word(token), tuple(p for group in groups for p in group)

    def storeas_parameters(self, meta: Meta, children: list[Property]) -> tuple[Property, ...]:
        return tuple(children)

    def partitioner(self, meta: Meta, children: list[Token]) -> LegacySetting:
        keyword, value = children
        word = _word(value)
        kind = ValueKind.WORD if not word.quoted else ValueKind.STRING
        return LegacySetting(
            keyword.value.upper(), Value(word.text, kind, word.span), _meta_span(meta)
        )

    def flush_setting(self, meta: Meta, children: list[Token]) -> LegacySetting:
        keyword, number = children
        return LegacySetting(keyword.value.upper(), _value(number), _meta_span(meta))

    def properties(self, meta: Meta, children: list[Property]) -> tuple[Property, ...]:
        return tuple(children)

    def property(self, meta: Meta, children: list[Any]) -> Property:
        (key, key_span), value = children
        return Property(key, key_span, _value(value), _meta_span(meta))

    def property_key(self, meta: Meta, children: list[Token]) -> tuple[str, Span]:
        if len(children) == 1 and children[0].type == "STRING":
            return _unquote(children[0]), token_span(children[0])
        return ".".join(token.value for token in children), _meta_span(meta)

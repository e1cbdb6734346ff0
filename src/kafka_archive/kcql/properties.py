"""The one table of properties: what ``PROPERTIES('key'=value)`` accepts, per key.

Each entry says the value's kind (which decides how it is checked, normalized and rendered),
its bounds and choices, and what it does. :func:`normalize_value` checks one value against
its spec and returns the canonical string; ``compile.py`` turns the canonical strings into the
typed fields of a :class:`~kafka_archive.kcql.plan.Route`. Extending the language with a
property is one entry here and one typed field there.

Limits follow the Lenses S3 sink (stream-reactor ``cloud-common``): whole numbers are a Java
int or long there, and so are they here.
"""

from __future__ import annotations

import enum
import re
import unicodedata
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kafka_archive.kcql.errors import KcqlSemanticError, did_you_mean, one_of
from kafka_archive.kcql.plan import (
    DEFAULT_FLUSH_COUNT,
    DEFAULT_FLUSH_INTERVAL_SECONDS,
    DEFAULT_FLUSH_SIZE,
    Compression,
    ErrorPolicy,
    Format,
    LayoutKind,
    Padding,
    SchemaCompatibility,
    Source,
    Span,
    TableFormat,
)
from kafka_archive.kcql.syntax import Value, ValueKind

_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
_MAX_PAD_WIDTH = 255  # a key segment's worth: wider cannot fit S3's 1,024-byte keys
_MAX_DIGITS = len(str(_LONG_MAX))

# ------------------------------------------------------------------------------------------
# Properties: the one table of what PROPERTIES('key'=value) accepts.


class Kind(enum.Enum):
    """The type of a property value, which decides how it is checked and rendered."""

    INT = "a whole number"
    BOOL = "true or false"
    CHOICE = "one of a fixed set of names"
    CHAR = "a single character"
    KEY_TEXT = "text that can go into an object key"
    TIME_ZONE = "an IANA time zone name"
    TEMPLATE = "an object key template"
    FIELD = "a record field, such as _value.created_at, _key.ts or _header.time"
    PATH = "a file path"
    CALLABLE = "a Python function, as package.module:function"
    TABLE = "a table name, as namespace.table"
    NAME = "a name of letters, digits, '_' and '-'"

    @property
    def bare(self) -> bool:
        """Whether canonical KCQL writes the value without quotes."""
        return self in (Kind.INT, Kind.BOOL)


@dataclass(frozen=True, slots=True)
class PropertySpec:
    """What one property accepts. ``minimum``/``maximum`` bound INT values."""

    kind: Kind
    description: str
    choices: tuple[str, ...] = ()
    minimum: int = 1
    maximum: int | None = None


PROPERTY_SPECS: Mapping[str, PropertySpec] = MappingProxyType(
    {
        # Lenses stream-reactor names and defaults.
        # Lenses: flush.count and flush.size are a Java long, flush.interval an int.
        "flush.count": PropertySpec(
            Kind.INT, f"records per object (default {DEFAULT_FLUSH_COUNT})", maximum=_LONG_MAX
        ),
        "flush.size": PropertySpec(
            Kind.INT,
            f"bytes per object, counted before whole-object compression (default "
            f"{DEFAULT_FLUSH_SIZE})",
            maximum=_LONG_MAX,
        ),
        "flush.interval": PropertySpec(
            Kind.INT,
            f"seconds of record time per object (default {DEFAULT_FLUSH_INTERVAL_SECONDS}; "
            "see flush.interval.time)",
            maximum=_INT_MAX,
        ),
        "partition.include.keys": PropertySpec(
            Kind.BOOL, "with PARTITIONBY: name=value path segments (default true), or values only"
        ),
        "padding.type": PropertySpec(
            Kind.CHOICE, "how offsets are padded in keys", tuple(p.value for p in Padding)
        ),
        "padding.char": PropertySpec(Kind.CHAR, "the padding character (default '0')"),
        # Lenses reads 'padding.length.<field>' as one map: stating any entry pads only the
        # fields it names (the offset's default of 12 then no longer applies).
        "padding.length.offset": PropertySpec(
            Kind.INT, "width of the padded offset (default 12)", minimum=0, maximum=_MAX_PAD_WIDTH
        ),
        "padding.length.partition": PropertySpec(
            Kind.INT,
            "width of the padded partition (default 0: unpadded)",
            minimum=0,
            maximum=_MAX_PAD_WIDTH,
        ),
        "store.envelope": PropertySpec(Kind.BOOL, "store key, value, headers and metadata"),
        "store.envelope.fields.key": PropertySpec(Kind.BOOL, "keep the key in the envelope"),
        "store.envelope.fields.value": PropertySpec(Kind.BOOL, "keep the value in the envelope"),
        "store.envelope.fields.headers": PropertySpec(Kind.BOOL, "keep headers in the envelope"),
        "store.envelope.fields.metadata": PropertySpec(Kind.BOOL, "keep metadata in the envelope"),
        "key.suffix": PropertySpec(Kind.KEY_TEXT, "text added to object names"),
        # kafka-archive's own keys, in the same dotted style.
        "flush.interval.time": PropertySpec(
            Kind.CHOICE,
            "what flush.interval measures: record (default: an object rolls when its records' "
            "timestamps span the interval, backfills too) or arrival (as Lenses' wall clock: "
            "no roll inside a read; --follow holds young objects back for the interval)",
            ("record", "arrival"),
        ),
        "partition.timezone": PropertySpec(
            Kind.TIME_ZONE, "time zone of _date.<pattern> partitions (default UTC)"
        ),
        "partition.time.field": PropertySpec(
            Kind.FIELD,
            "the field holding the time of _date partitions and time layouts "
            "(epoch milliseconds or ISO-8601; default: the record timestamp)",
        ),
        "layout": PropertySpec(
            Kind.CHOICE,
            "where objects go: lenses (default), confluent, hive, or template",
            tuple(k.value for k in LayoutKind),
        ),
        "layout.template": PropertySpec(
            Kind.TEMPLATE, "the key template of 'layout'='template', e.g. '{topic}/{offset}.{ext}'"
        ),
        "error.policy": PropertySpec(
            Kind.CHOICE,
            "a record the format cannot store: fail (default), skip, or dead-letter",
            tuple(p.value for p in ErrorPolicy),
        ),
        "store.compression": PropertySpec(
            Kind.CHOICE,
            "whole-object compression of JSON, CSV, TEXT, BYTES (default none)",
            tuple(c.value for c in Compression),
        ),
        "store.gzip.block.bytes": PropertySpec(
            Kind.INT,
            "with 'store.compression'='gzip': seekable gzip blocks of about this "
            "many uncompressed bytes, and an index object",
            minimum=1024,
        ),
        "avro.codec": PropertySpec(
            Kind.CHOICE,
            "AVRO block compression (default null)",
            ("null", "deflate", "snappy", "zstandard", "bzip2", "xz"),
        ),
        "parquet.codec": PropertySpec(
            Kind.CHOICE,
            "PARQUET compression (default snappy)",
            ("snappy", "zstd", "gzip", "lz4", "brotli", "none"),
        ),
        "avro.schema.file": PropertySpec(
            Kind.PATH,
            "an Avro schema (.avsc) every AVRO object of the route is written with "
            "(PARQUET: whose columns it has); values must match it",
        ),
        "avro.schema.subject": PropertySpec(
            Kind.KEY_TEXT,
            "a Schema Registry subject whose schema (latest, or 'avro.schema.subject.version') "
            "is the route's, as with 'avro.schema.file' (from --schema-registry-url)",
        ),
        "avro.schema.subject.version": PropertySpec(
            Kind.INT, "the version of 'avro.schema.subject' (default: its latest)", minimum=1
        ),
        "parquet.row.group.records": PropertySpec(
            Kind.INT, "records per PARQUET row group (default 10000)"
        ),
        "schema.compatibility": PropertySpec(
            Kind.CHOICE,
            "AVRO, PARQUET: which value schema changes keep an object open (Confluent's "
            "meaning; default NONE: every change rolls)",
            tuple(c.value for c in SchemaCompatibility),
        ),
        "transform": PropertySpec(
            Kind.CALLABLE,
            "a Python function run on each batch of records before they are "
            "stored: package.module:function",
        ),
        # Tables instead of loose objects (kafka-archive's own; see README "Iceberg tables").
        "table.format": PropertySpec(
            Kind.CHOICE,
            "objects (default) or iceberg: append to an Apache Iceberg table",
            tuple(t.value for t in TableFormat),
        ),
        "iceberg.table": PropertySpec(
            Kind.TABLE, "the Iceberg table to append to, as namespace.table (created if missing)"
        ),
        "iceberg.catalog": PropertySpec(
            Kind.NAME,
            "the pyiceberg catalog holding the table (.pyiceberg.yaml or "
            "PYICEBERG_CATALOG__<NAME>__* variables; default 'default')",
        ),
    }
)

# Legacy clauses and the property each one states.
LEGACY_PROPERTIES: Mapping[str, str] = MappingProxyType(
    {
        "WITH_FLUSH_COUNT": "flush.count",
        "WITH_FLUSH_SIZE": "flush.size",
        "WITH_FLUSH_INTERVAL": "flush.interval",
        "WITHPARTITIONER": "partition.include.keys",
    }
)
PARTITIONERS: Mapping[str, str] = MappingProxyType({"KeysAndValues": "true", "Values": "false"})


def normalize_value(key: str, spec: PropertySpec, value: Value) -> str:
    """Return the canonical string of a property value, or raise saying what was expected."""

    def fail(what: str, hint: str | None = None) -> KcqlSemanticError:
        return KcqlSemanticError(
            f"{key!r} must be {what}, not {_shown(value)}",
            span=value.span,
            hint=hint,
            label="bad-property-value",
            setting=key,
        )

    text = value.text
    if spec.kind is Kind.INT:
        if value.kind is ValueKind.WORD or not text.isascii() or not text.isdigit():
            raise fail("a whole number")
        if len(text.lstrip("0")) > _MAX_DIGITS:
            raise fail(f"at most {spec.maximum if spec.maximum is not None else _LONG_MAX}")
        number = int(text)
        if number < spec.minimum:
            raise fail(
                "a positive whole number" if spec.minimum == 1 else f"at least {spec.minimum}"
            )
        if spec.maximum is not None and number > spec.maximum:
            raise fail(f"at most {spec.maximum}")
        return str(number)
    if spec.kind is Kind.BOOL:
        if text.lower() not in ("true", "false") or value.kind is ValueKind.NUMBER:
            raise fail("true or false")
        return text.lower()
    if spec.kind is Kind.CHOICE:
        for choice in spec.choices:
            if choice.casefold() == text.casefold():
                return choice
        raise fail(one_of(spec.choices), did_you_mean(text, spec.choices))
    if spec.kind is Kind.CHAR:
        if len(text) != 1 or text not in _KEY_CHARS:
            raise fail("a single ASCII letter, digit, '-', '_' or '.' (it goes into keys)")
        return text
    if spec.kind is Kind.KEY_TEXT:
        if "/" in text or has_control(text):
            raise fail("text without '/' or control characters")
        return text
    if spec.kind is Kind.TEMPLATE:
        if has_control(text) or not text:
            raise fail("a template without control characters")
        return text
    if spec.kind is Kind.FIELD:
        return _time_field(text, fail)
    if spec.kind is Kind.PATH:
        if not text.strip() or has_control(text):
            raise fail("a file path")
        return text
    if spec.kind is Kind.CALLABLE:
        if not _CALLABLE.fullmatch(text):
            raise fail(
                "a Python function as package.module:function",
                "Name a module importable where kafka-archive runs and a function in it, "
                "e.g. 'transforms.pii:drop_pii'",
            )
        return text
    if spec.kind is Kind.TABLE:
        if not _TABLE.fullmatch(text):
            raise fail(
                "a table name as namespace.table",
                "Use names of letters, digits and '_', e.g. 'db.orders'",
            )
        return text
    if spec.kind is Kind.NAME:
        if not _NAME.fullmatch(text):
            raise fail("a name of letters, digits, '_' and '-'", "e.g. 'default' or 'prod'")
        return text
    assert spec.kind is Kind.TIME_ZONE
    try:
        zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise fail(
            "a time zone name", "Use an IANA name such as 'UTC' or 'Europe/Berlin'"
        ) from None
    return text


_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_TABLE = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+")
_NAME = re.compile(r"[A-Za-z0-9_-]+")
_CALLABLE = re.compile(rf"{_IDENTIFIER}(\.{_IDENTIFIER})*:{_IDENTIFIER}(\.{_IDENTIFIER})*")
_TIME_FIELD_SOURCES = frozenset({Source.VALUE, Source.KEY, Source.HEADER})


def _time_field(text: str, fail: Callable[[str, str | None], KcqlSemanticError]) -> str:
    what = "a record field, such as '_value.created_at', '_key.ts' or '_header.time'"
    names = text.split(".")
    if not text or any(not n or has_control(n) or n != n.strip() for n in names):
        raise fail(what, None)
    source = _ALL_SOURCES.get(names[0])
    if source is not None and source not in _TIME_FIELD_SOURCES:
        raise fail(what, "The record timestamp is the default; other record parts hold no time")
    if source is Source.HEADER and len(names) < 2:
        raise fail(what, "Write _header.<name>")
    if source is None and names[0].startswith("_"):
        raise fail(what, "For a value field write _value." + text)
    return text


def _shown(value: Value) -> str:
    return repr(value.text) if value.kind is ValueKind.STRING else value.text


_ALL_SOURCES: Mapping[str, Source] = MappingProxyType({source.value: source for source in Source})


def has_control(text: str) -> bool:
    """Whether ``text`` has a control (or other non-printing, category C) character."""
    return any(unicodedata.category(c).startswith("C") for c in text)


# Properties that apply to some formats only, and the formats they apply to.
FORMAT_PROPERTIES: Mapping[str, frozenset[Format]] = MappingProxyType(
    {
        "store.compression": frozenset(
            {Format.JSON, Format.CSV, Format.CSV_WITHHEADERS, Format.TEXT, Format.BYTES}
        ),
        "store.gzip.block.bytes": frozenset({Format.JSON, Format.TEXT, Format.BYTES}),
        "avro.codec": frozenset({Format.AVRO}),
        "avro.schema.file": frozenset({Format.AVRO, Format.PARQUET}),
        "avro.schema.subject": frozenset({Format.AVRO, Format.PARQUET}),
        "avro.schema.subject.version": frozenset({Format.AVRO, Format.PARQUET}),
        "parquet.codec": frozenset({Format.PARQUET}),
        "parquet.row.group.records": frozenset({Format.PARQUET}),
        "schema.compatibility": frozenset({Format.AVRO, Format.PARQUET}),
    }
)


@dataclass(frozen=True, slots=True)
class Setting:
    """One stated setting: its canonical value, where it was stated (the whole entry and the
    value as written), and how (for messages)."""

    value: str
    span: Span
    written: Value
    stated_as: str  # "WITH_FLUSH_COUNT = 5000" or "'flush.count'=5000"


class Settings(dict[str, Setting]):
    """A statement's settings by property key, legacy clauses mapped onto their properties."""

    def integer(self, key: str, default: int) -> int:
        setting = self.get(key)
        return int(setting.value) if setting is not None else default

    def text(self, key: str, default: str) -> str:
        setting = self.get(key)
        return setting.value if setting is not None else default

    def optional(self, key: str) -> str | None:
        setting = self.get(key)
        return None if setting is None else setting.value


def value_span(value: Value, start: int, end: int) -> Span:
    """The span of ``value.text[start:end]`` in the KCQL text (a quoted value counts its
    opening quote and the doubled quotes before ``start``)."""
    if value.kind is not ValueKind.STRING:
        first = value.span.column + start
        return Span(value.span.line, first, value.span.line, first + max(end - start, 1))
    text = value.text
    first = value.span.column + 1 + start + text[:start].count("'")
    last = value.span.column + 1 + end + text[:end].count("'")
    return Span(value.span.line, first, value.span.line, max(last, first + 1))

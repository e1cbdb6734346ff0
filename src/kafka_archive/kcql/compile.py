"""Syntax -> :class:`~kafka_archive.kcql.plan.Plan`: meaning, defaults and every semantic check.

Each check raises :class:`KcqlSemanticError` with the span of the offending text, a stable
label and, where one exists, a fix ("Did you mean 'AVRO'?"). The named choices (formats,
record sources, properties and their types) live in the tables at the top of this module:
extending the language with a property is one line in :data:`PROPERTY_SPECS`.
"""

from __future__ import annotations

import enum
import ipaddress
import re
import unicodedata
import zoneinfo
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from kafka_archive.kcql.errors import KcqlSemanticError, did_you_mean, one_of
from kafka_archive.kcql.plan import (
    ALL_TOPICS,
    DEFAULT_FLUSH_COUNT,
    DEFAULT_FLUSH_INTERVAL_SECONDS,
    DEFAULT_FLUSH_SIZE,
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
from kafka_archive.kcql.syntax import (
    LegacySetting,
    Path,
    SelectItem,
    Statement,
    TargetText,
    Value,
    ValueKind,
    Word,
)

_JAVA_INT_MAX = 2**31 - 1  # Lenses reads whole-number properties as a Java int or long
_LONG_MAX = 2**63 - 1
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
        "flush.count": PropertySpec(Kind.INT, "records per object"),
        "flush.size": PropertySpec(Kind.INT, "bytes per object"),
        "flush.interval": PropertySpec(Kind.INT, "seconds of record time per object"),
        "partition.include.keys": PropertySpec(Kind.BOOL, "write field=value path segments"),
        "padding.type": PropertySpec(
            Kind.CHOICE, "how offsets are padded in keys", tuple(p.value for p in Padding)
        ),
        "padding.char": PropertySpec(Kind.CHAR, "the padding character (default '0')"),
        # Lenses reads 'padding.length.<field>' as one map: stating any entry pads only the
        # fields it names (the offset's default of 12 then no longer applies).
        "padding.length.offset": PropertySpec(
            Kind.INT, "width of the padded offset (default 12)", minimum=0, maximum=_JAVA_INT_MAX
        ),
        "padding.length.partition": PropertySpec(
            Kind.INT, "width of the padded partition (default 0: unpadded)", minimum=0,
            maximum=_JAVA_INT_MAX,
        ),
        "store.envelope": PropertySpec(Kind.BOOL, "store key, value, headers and metadata"),
        "store.envelope.fields.key": PropertySpec(Kind.BOOL, "keep the key in the envelope"),
        "store.envelope.fields.value": PropertySpec(Kind.BOOL, "keep the value in the envelope"),
        "store.envelope.fields.headers": PropertySpec(Kind.BOOL, "keep headers in the envelope"),
        "store.envelope.fields.metadata": PropertySpec(Kind.BOOL, "keep metadata in the envelope"),
        "key.suffix": PropertySpec(Kind.KEY_TEXT, "text added to object names"),
        # kafka-archive's own keys, in the same dotted style.
        "partition.timezone": PropertySpec(
            Kind.TIME_ZONE, "time zone of _date.<pattern> partitions (default UTC)"
        ),
        "partition.time.field": PropertySpec(
            Kind.FIELD, "the field holding the time of _date partitions and time layouts "
            "(epoch milliseconds or ISO-8601; default: the record timestamp)"
        ),
        "layout": PropertySpec(
            Kind.CHOICE,
            "where objects go: lenses (default), confluent, hive, or template",
            ("lenses", "confluent", "hive", "template"),
        ),
        "layout.template": PropertySpec(
            Kind.TEMPLATE, "the key template of 'layout'='template', e.g. '{topic}/{offset}.{ext}'"
        ),
        "error.policy": PropertySpec(
            Kind.CHOICE,
            "a record the format cannot store: fail (default), skip, or dead-letter",
            ("fail", "skip", "dead-letter"),
        ),
        "store.compression": PropertySpec(
            Kind.CHOICE,
            "whole-object compression of JSON, CSV, TEXT, BYTES (default none)",
            ("none", "gzip", "bzip2", "zstd"),
        ),
        "store.gzip.block.bytes": PropertySpec(
            Kind.INT, "with 'store.compression'='gzip': seekable gzip blocks of about this "
            "many uncompressed bytes, and an index object", minimum=1024,
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
            Kind.PATH, "an Avro schema (.avsc) every AVRO object of the route is written with "
            "(PARQUET: whose columns it has); values must match it"
        ),
        "parquet.row.group.records": PropertySpec(
            Kind.INT, "records per PARQUET row group (default 10000)"
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
_PARTITIONERS: Mapping[str, str] = MappingProxyType({"KeysAndValues": "true", "Values": "false"})

_ENVELOPE_FIELDS = ("key", "value", "headers", "metadata")
_ENVELOPE_FORMATS = frozenset({Format.JSON, Format.AVRO, Format.PARQUET})
_UNSTRUCTURED_FORMATS = frozenset({Format.TEXT, Format.BYTES})

# ------------------------------------------------------------------------------------------
# Record sources: what a path's first name can mean.

_SOURCES: Mapping[str, Source] = MappingProxyType({source.value: source for source in Source})
_METADATA = frozenset({Source.TOPIC, Source.PARTITION, Source.OFFSET, Source.TIMESTAMP})
_SELECT_SOURCES = frozenset(Source) - {Source.DATE}
_PARTITION_SOURCES = frozenset(Source) - {Source.OFFSET, Source.TIMESTAMP}

# java.time.format.DateTimeFormatter pattern letters, and the other characters we let
# through into a key segment.
_DATE_LETTERS = frozenset("GuyDMLdQqYwWEecFaBhKkHmsSAnNVvzOXxZ")
_DATE_OTHER = frozenset("-_.")

# ------------------------------------------------------------------------------------------
# S3 bucket naming rules (general purpose buckets).

_BUCKET_CHARS = re.compile(r"[a-z0-9.-]+")
_RESERVED_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_RESERVED_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
_MAX_TOPIC_LENGTH = 249


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
    target = _target(statement.target)
    topic = _topic(statement.topic)
    fmt = _format(statement.format)
    fields = _select(statement.fields, fmt) if statement.fields is not None else None
    partition_by = _partition_by(statement.partition_by or (), fmt)
    settings = _settings(statement)
    envelope = _envelope(settings, fmt)
    _check_format_properties(settings, fmt)
    return Route(
        target=target,
        topic=topic,
        fields=fields,
        partition_by=partition_by,
        # Lenses writes name=value segments unless told otherwise ('partition.include.keys'
        # or WITHPARTITIONER): PartitionSelection's default display is KeysAndValues.
        include_keys=settings.text(
            "partition.include.keys", "true" if partition_by else "false"
        ) == "true",
        format=fmt,
        flush=FlushPolicy(
            count=settings.integer("flush.count", DEFAULT_FLUSH_COUNT),
            size=settings.integer("flush.size", DEFAULT_FLUSH_SIZE),
            interval_seconds=settings.integer("flush.interval", DEFAULT_FLUSH_INTERVAL_SECONDS),
            interval_set="flush.interval" in settings,
        ),
        naming=KeyNaming(
            padding=Padding(settings.text("padding.type", Padding.LEFT.value)),
            padding_char=settings.text("padding.char", "0"),
            offset_width=settings.integer(
                "padding.length.offset", 0 if "padding.length.partition" in settings else 12
            ),
            partition_width=settings.integer("padding.length.partition", 0),
        ),
        envelope=envelope,
        properties=tuple(sorted((key, setting.value) for key, setting in settings.items())),
        span=statement.span,
    )


# ------------------------------------------------------------------------------------------
# Target and topic.


def _target(target: TargetText) -> Target:
    _check_bucket(target.bucket, target.bucket_span)
    prefix = ""
    if target.prefix is not None:
        assert target.prefix_span is not None
        prefix = _prefix(target.prefix, target.prefix_span)
    return Target(target.bucket, prefix)


def _check_bucket(bucket: str, span: Span) -> None:
    """Raise unless ``bucket`` follows S3's naming rules; the message names the rule."""

    def fail(rule: str, hint: str | None = None) -> KcqlSemanticError:
        return KcqlSemanticError(
            f"invalid bucket name {bucket!r}: {rule}", span=span, hint=hint, label="bad-bucket"
        )

    if not 3 <= len(bucket) <= 63:
        raise fail(f"S3 bucket names are 3 to 63 characters long, this one has {len(bucket)}")
    if bucket != bucket.lower():
        lowered = bucket.lower()
        hint = f"Did you mean {lowered!r}?" if _BUCKET_CHARS.fullmatch(lowered) else None
        raise fail("S3 bucket names are lower case", hint)
    if not _BUCKET_CHARS.fullmatch(bucket):
        bad = next(c for c in bucket if not _BUCKET_CHARS.fullmatch(c))
        raise fail(
            f"S3 bucket names contain only lower-case letters, digits, '.' and '-', not {bad!r}"
        )
    if not (bucket[0].isalnum() and bucket[-1].isalnum()):
        raise fail("S3 bucket names begin and end with a letter or a digit")
    if ".." in bucket:
        raise fail("S3 bucket names do not contain two adjacent periods")
    try:
        ipaddress.IPv4Address(bucket)
    except ValueError:
        pass
    else:
        raise fail("S3 bucket names are not formatted as IP addresses")
    for reserved in _RESERVED_BUCKET_PREFIXES:
        if bucket.startswith(reserved):
            raise fail(f"the prefix {reserved!r} is reserved by S3")
    for reserved in _RESERVED_BUCKET_SUFFIXES:
        if bucket.endswith(reserved):
            raise fail(f"the suffix {reserved!r} is reserved by S3")


def _prefix(prefix: str, span: Span) -> str:
    """Return ``prefix`` if it is a clean key prefix: no empty, ``.`` or ``..`` segments."""

    def fail(message: str, hint: str | None = None) -> KcqlSemanticError:
        return KcqlSemanticError(message, span=span, hint=hint, label="bad-prefix")

    if not prefix:
        raise fail("empty prefix after ':'", "Name a prefix, or drop the ':'")
    if _has_control(prefix):
        raise fail(f"the prefix {prefix!r} contains a control character")
    segments = prefix.split("/")
    if "" in segments:
        cleaned = "/".join(s for s in segments if s)
        raise fail(
            f"the prefix {prefix!r} has an empty path segment (a leading, trailing or double '/')",
            f"Write {cleaned!r}" if cleaned else None,
        )
    if any(s in (".", "..") for s in segments):
        raise fail(f"the prefix {prefix!r} has a '.' or '..' path segment")
    return prefix


def _topic(word: Word) -> str:
    topic = word.text

    def fail(message: str, hint: str | None = None) -> KcqlSemanticError:
        return KcqlSemanticError(message, span=word.span, hint=hint, label="bad-topic")

    if topic == ALL_TOPICS:
        return topic
    if topic in (".", ".."):
        raise fail(f"{topic!r} is not a valid Kafka topic name")
    if len(topic) > _MAX_TOPIC_LENGTH:
        raise fail(f"Kafka topic names have at most {_MAX_TOPIC_LENGTH} characters")
    if _has_control(topic) or any(c.isspace() for c in topic):
        raise fail(f"the topic {topic!r} contains whitespace or a control character")
    return topic


def _has_control(text: str) -> bool:
    return any(unicodedata.category(c).startswith("C") for c in text)


# ------------------------------------------------------------------------------------------
# STOREAS.


def _format(word: Word | None) -> Format:
    if word is None:
        return Format.JSON
    for fmt in Format:
        if fmt.value.casefold() == word.text.casefold():
            return fmt
    raise KcqlSemanticError(
        f"unknown STOREAS format {word.text!r}",
        span=word.span,
        hint=did_you_mean(word.text, Format.names()) or f"Formats: {one_of(Format.names())}",
        expected=Format.names(),
        label="unknown-format",
    )


# ------------------------------------------------------------------------------------------
# Field paths: SELECT and PARTITIONBY.


class _Use(enum.Enum):
    SELECT = "SELECT"
    PARTITIONBY = "PARTITIONBY"


def field_ref(path: Path, use: _Use) -> FieldRef:
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
    allowed = _SELECT_SOURCES if use is _Use.SELECT else _PARTITION_SOURCES
    if source not in allowed:
        hint = (
            "Partition by time with _date.<pattern>, such as _date.uuuu, _date.LL, _date.dd"
            if use is _Use.PARTITIONBY
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


def _underscore_ref(path: Path, use: _Use) -> FieldRef:
    """``_.topic`` is ``_topic`` and ``_.key.a`` is ``_key.a``, as Lenses reads them in SELECT
    (a lone ``_`` is a value field there, as in Lenses)."""
    rest = path.segments[1:]
    if use is _Use.PARTITIONBY:
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
    hint = "Use DateTimeFormatter letters, such as _date.uuuu, _date.LL, _date.dd, _date.HH"
    if len(rest) != 1:
        raise KcqlSemanticError(
            "_date takes exactly one pattern",
            span=path.span,
            hint=hint + "; put a pattern with dots in back-ticks: _date.`uuuu.LL`",
            label="date-pattern",
        )
    (pattern,) = rest
    for char in pattern.text:
        if char not in _DATE_LETTERS and char not in _DATE_OTHER and not char.isdigit():
            raise KcqlSemanticError(
                f"{char!r} is not allowed in the date pattern {pattern.text!r}",
                span=pattern.span,
                hint=hint,
                label="date-pattern",
            )


def _select(items: tuple[SelectItem, ...], fmt: Format) -> tuple[SelectField, ...]:
    if fmt in _UNSTRUCTURED_FORMATS:
        raise KcqlSemanticError(
            f"a SELECT list cannot apply to {fmt.value}, which stores each value as it is",
            span=items[0].span,
            hint="Write SELECT *, or store as JSON, AVRO or PARQUET",
            label="select-unstructured",
        )
    fields: list[SelectField] = []
    seen: dict[str, SelectItem] = {}
    for item in items:
        ref = field_ref(item.path, _Use.SELECT)
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


def _partition_by(paths: tuple[Path, ...], fmt: Format) -> tuple[FieldRef, ...]:
    refs: list[FieldRef] = []
    for path in paths:
        ref = field_ref(path, _Use.PARTITIONBY)
        if ref in refs:
            raise KcqlSemanticError(
                "this PARTITIONBY entry is already listed",
                span=path.span,
                hint="Remove the duplicate",
                label="duplicate-partition",
            )
        if fmt in _UNSTRUCTURED_FORMATS and ref.source is Source.VALUE and (
            ref.path or fmt is Format.BYTES
        ):
            raise KcqlSemanticError(
                f"cannot partition {fmt.value} by a value field: {fmt.value} values have no fields",
                span=path.span,
                hint="Partition by _key, _header.<name>, _topic, _partition or _date.<pattern>",
                label="value-partition-unstructured",
            )
        refs.append(ref)
    return tuple(refs)


# ------------------------------------------------------------------------------------------
# Settings: legacy clauses and PROPERTIES, merged into one canonical table.


@dataclass(frozen=True, slots=True)
class _Setting:
    """One stated setting: its canonical value, where it was stated, and how."""

    value: str
    span: Span
    stated_as: str  # "WITH_FLUSH_COUNT = 5000" or "'flush.count'=5000"


class _Settings(dict[str, _Setting]):
    def integer(self, key: str, default: int) -> int:
        setting = self.get(key)
        return int(setting.value) if setting is not None else default

    def text(self, key: str, default: str) -> str:
        setting = self.get(key)
        return setting.value if setting is not None else default


def _settings(statement: Statement) -> _Settings:
    settings = _Settings()
    for legacy in statement.legacy:
        key = LEGACY_PROPERTIES[legacy.keyword]
        if key in settings:
            raise KcqlSemanticError(
                f"{legacy.keyword} is given twice",
                span=legacy.span,
                hint="State each setting once",
                label="duplicate-setting",
            )
        settings[key] = _Setting(
            _legacy_value(legacy, key), legacy.span, f"{legacy.keyword} = {legacy.value.text}"
        )
    stated: set[str] = set()
    for prop in statement.properties or ():
        spec = PROPERTY_SPECS.get(prop.key)
        if spec is None:
            raise KcqlSemanticError(
                f"unknown property {prop.key!r}",
                span=prop.key_span,
                hint=did_you_mean(prop.key, PROPERTY_SPECS),
                expected=tuple(PROPERTY_SPECS),
                label="unknown-property",
            )
        if prop.key in stated:
            raise KcqlSemanticError(
                f"property {prop.key!r} is given twice",
                span=prop.span,
                hint="State each setting once",
                label="duplicate-setting",
            )
        stated.add(prop.key)
        value = normalize_value(prop.key, spec, prop.value)
        earlier = settings.get(prop.key)
        if earlier is not None and earlier.value != value:
            raise KcqlSemanticError(
                f"'{prop.key}'={prop.value.text} conflicts with {earlier.stated_as}",
                span=prop.span,
                hint="State the setting once; the WITH_* clauses are the older spelling of "
                "the same properties",
                label="conflicting-setting",
            )
        settings[prop.key] = _Setting(value, prop.span, f"'{prop.key}'={prop.value.text}")
    return settings


def _legacy_value(legacy: LegacySetting, key: str) -> str:
    if legacy.keyword != "WITHPARTITIONER":
        return normalize_value(key, PROPERTY_SPECS[key], legacy.value)
    for name, value in _PARTITIONERS.items():
        if name.casefold() == legacy.value.text.casefold():
            return value
    raise KcqlSemanticError(
        f"unknown partitioner {legacy.value.text!r}",
        span=legacy.value.span,
        hint=did_you_mean(legacy.value.text, _PARTITIONERS)
        or f"Write {one_of(_PARTITIONERS)}",
        expected=tuple(_PARTITIONERS),
        label="unknown-partitioner",
    )


def normalize_value(key: str, spec: PropertySpec, value: Value) -> str:
    """Return the canonical string of a property value, or raise saying what was expected."""

    def fail(what: str, hint: str | None = None) -> KcqlSemanticError:
        return KcqlSemanticError(
            f"{key!r} must be {what}, not {_shown(value)}",
            span=value.span,
            hint=hint,
            label="bad-property-value",
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
        if len(text) != 1 or text == "/" or _has_control(text) or text.isspace():
            raise fail("a single character other than '/' and whitespace")
        return text
    if spec.kind is Kind.KEY_TEXT:
        if "/" in text or _has_control(text):
            raise fail("text without '/' or control characters")
        return text
    if spec.kind is Kind.TEMPLATE:
        if _has_control(text) or not text:
            raise fail("a template without control characters")
        return text
    if spec.kind is Kind.FIELD:
        return _time_field(text, fail)
    if spec.kind is Kind.PATH:
        if not text.strip() or _has_control(text):
            raise fail("a file path")
        return text
    assert spec.kind is Kind.TIME_ZONE
    try:
        zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise fail(
            "a time zone name", "Use an IANA name such as 'UTC' or 'Europe/Berlin'"
        ) from None
    return text


_TIME_FIELD_SOURCES = frozenset({Source.VALUE, Source.KEY, Source.HEADER})


def _time_field(text: str, fail: Callable[[str, str | None], KcqlSemanticError]) -> str:
    what = "a record field, such as '_value.created_at', '_key.ts' or '_header.time'"
    names = text.split(".")
    if not text or any(not n or _has_control(n) or n != n.strip() for n in names):
        raise fail(what, None)
    source = _SOURCES.get(names[0])
    if source is not None and source not in _TIME_FIELD_SOURCES:
        raise fail(what, "The record timestamp is the default; other record parts hold no time")
    if source is Source.HEADER and len(names) < 2:
        raise fail(what, "Write _header.<name>")
    if source is None and names[0].startswith("_"):
        raise fail(what, "For a value field write _value." + text)
    return text


def _shown(value: Value) -> str:
    return repr(value.text) if value.kind is ValueKind.STRING else value.text


# Properties that apply to some formats only, and the formats they apply to.
_FORMAT_PROPERTIES: Mapping[str, frozenset[Format]] = MappingProxyType(
    {
        "store.compression": frozenset(
            {Format.JSON, Format.CSV, Format.CSV_WITHHEADERS, Format.TEXT, Format.BYTES}
        ),
        "store.gzip.block.bytes": frozenset({Format.JSON, Format.TEXT, Format.BYTES}),
        "avro.codec": frozenset({Format.AVRO}),
        "avro.schema.file": frozenset({Format.AVRO, Format.PARQUET}),
        "parquet.codec": frozenset({Format.PARQUET}),
        "parquet.row.group.records": frozenset({Format.PARQUET}),
    }
)


def _check_format_properties(settings: _Settings, fmt: Format) -> None:
    blocks, codec = settings.get("store.gzip.block.bytes"), settings.get("store.compression")
    if blocks is not None and (codec is None or codec.value.strip("'") != "gzip"):
        raise KcqlSemanticError(
            "'store.gzip.block.bytes' needs 'store.compression'='gzip'",
            span=blocks.span,
            hint="Add 'store.compression'='gzip', or remove the block size",
            label="blocks-without-gzip",
        )
    schema_file, envelope = settings.get("avro.schema.file"), settings.get("store.envelope")
    if schema_file is not None and envelope is not None and envelope.value == "true":
        raise KcqlSemanticError(
            "'avro.schema.file' does not apply to an envelope (its schema is fixed)",
            span=schema_file.span,
            hint="Remove 'avro.schema.file', or 'store.envelope'",
            label="schema-file-with-envelope",
        )
    for key, formats in _FORMAT_PROPERTIES.items():
        setting = settings.get(key)
        if setting is not None and fmt not in formats:
            names = ", ".join(sorted(f.value for f in formats))
            raise KcqlSemanticError(
                f"{key!r} does not apply to STOREAS {fmt.value}",
                span=setting.span,
                hint=f"It applies to {names}; remove it, or change STOREAS",
                label="property-format",
            )


def _envelope(settings: _Settings, fmt: Format) -> Envelope:
    enabled = settings.get("store.envelope")
    fields = {name: settings.get(f"store.envelope.fields.{name}") for name in _ENVELOPE_FIELDS}
    if enabled is None or enabled.value != "true":
        stray = next((s for s in fields.values() if s is not None), None)
        if stray is not None:
            raise KcqlSemanticError(
                "store.envelope.fields.* has no effect without 'store.envelope'=true",
                span=stray.span,
                hint="Add 'store.envelope'=true, or remove the setting",
                label="envelope-fields-without-envelope",
            )
        return Envelope()
    if fmt not in _ENVELOPE_FORMATS:
        raise KcqlSemanticError(
            f"{fmt.value} cannot store an envelope",
            span=enabled.span,
            hint="Store envelopes as JSON, AVRO or PARQUET",
            label="envelope-format",
        )
    chosen = {name: s.value == "true" if s is not None else True for name, s in fields.items()}
    if not any(chosen.values()):
        raise KcqlSemanticError(
            "the envelope keeps no fields",
            span=enabled.span,
            hint="Keep at least one of key, value, headers and metadata",
            label="empty-envelope",
        )
    return Envelope(enabled=True, **chosen)


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

"""Syntax -> :class:`~kafka_archive.kcql.plan.Plan`: meaning, defaults and every semantic check.

Each check raises :class:`KcqlSemanticError` with the span of the offending text, a stable
label and, where one exists, a fix ("Did you mean 'AVRO'?"). Properties are specified in
one table (``properties.py``), date patterns by ``dates.py`` and layouts by ``layout.py``;
this module turns a statement's clauses and settings into the typed fields of a
:class:`~kafka_archive.kcql.plan.Route`.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from kafka_archive.kcql.dates import DatePattern, compile_pattern
from kafka_archive.kcql.errors import KcqlSemanticError, did_you_mean, one_of
from kafka_archive.kcql.layout import compile_layout
from kafka_archive.kcql.plan import (
    ALL_TOPICS,
    DEFAULT_AVRO_CODEC,
    DEFAULT_FLUSH_COUNT,
    DEFAULT_FLUSH_INTERVAL_SECONDS,
    DEFAULT_FLUSH_SIZE,
    DEFAULT_ICEBERG_CATALOG,
    DEFAULT_PARQUET_CODEC,
    DEFAULT_PARQUET_ROW_GROUP_RECORDS,
    Codecs,
    Compression,
    Envelope,
    ErrorPolicy,
    FieldRef,
    FlushPolicy,
    Format,
    IcebergTable,
    KeyNaming,
    Padding,
    Plan,
    Route,
    SchemaCompatibility,
    SelectField,
    Source,
    Span,
    TableFormat,
    Target,
    TimeTransform,
)
from kafka_archive.kcql.properties import (
    FORMAT_PROPERTIES,
    LEGACY_PROPERTIES,
    PARTITIONERS,
    PROPERTY_SPECS,
    Setting,
    Settings,
    has_control,
    normalize_value,
)
from kafka_archive.kcql.syntax import (
    LegacySetting,
    Path,
    Property,
    SelectItem,
    Statement,
    TargetText,
    Word,
)

_ENVELOPE_FIELDS = ("key", "value", "headers", "metadata")
_ENVELOPE_FORMATS = frozenset({Format.JSON, Format.AVRO, Format.PARQUET})
_UNSTRUCTURED_FORMATS = frozenset({Format.TEXT, Format.BYTES})

# ------------------------------------------------------------------------------------------
# Record sources: what a path's first name can mean.

_SOURCES: Mapping[str, Source] = MappingProxyType({source.value: source for source in Source})
_METADATA = frozenset({Source.TOPIC, Source.PARTITION, Source.OFFSET, Source.TIMESTAMP})
_SELECT_SOURCES = frozenset(Source) - {Source.DATE}
_PARTITION_SOURCES = frozenset(Source) - {Source.OFFSET, Source.TIMESTAMP}
# Besides letters and digits, what a date pattern may hold: separators that are safe in a key
# segment, and quotes around literal text.
_DATE_OTHER = frozenset("-_.'")

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
    _refuse_format_parameters(statement.format_parameters, fmt)
    fields = _select(statement.fields, fmt) if statement.fields is not None else None
    partition_by = _partition_by(statement.partition_by or (), fmt)
    settings = _settings(statement)
    envelope = _envelope(settings, fmt)
    _check_format_properties(settings, fmt)
    iceberg = _iceberg(settings, fmt, statement, partition_by)
    blocks = settings.optional("store.gzip.block.bytes")
    return Route(
        target=target,
        topic=topic,
        fields=fields,
        partition_by=partition_by,
        # Lenses writes name=value segments unless told otherwise ('partition.include.keys'
        # or WITHPARTITIONER): PartitionSelection's default display is KeysAndValues.
        include_keys=settings.text("partition.include.keys", "true" if partition_by else "false")
        == "true",
        format=fmt,
        flush=FlushPolicy(
            count=settings.integer("flush.count", DEFAULT_FLUSH_COUNT),
            size=settings.integer("flush.size", DEFAULT_FLUSH_SIZE),
            interval_seconds=settings.integer("flush.interval", DEFAULT_FLUSH_INTERVAL_SECONDS),
            interval_set="flush.interval" in settings,
            interval_by_record_time=settings.text("flush.interval.time", "record") == "record",
        ),
        naming=_naming(settings),
        envelope=envelope,
        codecs=Codecs(
            compression=Compression(settings.text("store.compression", Compression.NONE.value)),
            gzip_block_bytes=int(blocks) if blocks is not None else None,
            avro=settings.text("avro.codec", DEFAULT_AVRO_CODEC),
            parquet=settings.text("parquet.codec", DEFAULT_PARQUET_CODEC),
            parquet_row_group_records=settings.integer(
                "parquet.row.group.records", DEFAULT_PARQUET_ROW_GROUP_RECORDS
            ),
        ),
        error_policy=ErrorPolicy(settings.text("error.policy", ErrorPolicy.FAIL.value)),
        avro_schema_file=settings.optional("avro.schema.file"),
        schema_compatibility=SchemaCompatibility(
            settings.text("schema.compatibility", SchemaCompatibility.NONE.value)
        ),
        transform=settings.optional("transform"),
        layout=compile_layout(settings, partition_by, statement.span),
        iceberg=iceberg,
        properties=tuple(sorted((key, setting.value) for key, setting in settings.items())),
        spans=tuple(sorted((key, setting.span) for key, setting in settings.items())),
        span=statement.span,
    )


def _naming(settings: Settings) -> KeyNaming:
    """``padding.*``. Lenses reads ``padding.length.<field>`` as one map that replaces the
    default ``{offset: 12}``: stating the partition's width alone leaves offsets unpadded."""
    naming = KeyNaming(
        padding=Padding(settings.text("padding.type", Padding.LEFT.value)),
        padding_char=settings.text("padding.char", "0"),
        offset_width=settings.integer(
            "padding.length.offset", 0 if "padding.length.partition" in settings else 12
        ),
        partition_width=settings.integer("padding.length.partition", 0),
    )
    char = naming.padding_char
    if (
        naming.padding is not Padding.NONE
        and char.isdigit()
        and (naming.padding is Padding.RIGHT or char != "0")
    ):
        key = "padding.char" if naming.padding is Padding.LEFT else "padding.type"
        stated = settings.get(key) or settings.get("padding.char")
        assert stated is not None
        raise KcqlSemanticError(
            f"{naming.padding.value} with padding character {char!r} gives different offsets "
            "the same key (42 and 420 with RightPad '0')",
            span=stated.span,
            hint="Use LeftPad with '0' (the default), or a non-digit padding character",
            label="ambiguous-padding",
            setting=key,
        )
    return naming


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
    if has_control(prefix):
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
    if has_control(topic) or any(c.isspace() for c in topic):
        raise fail(f"the topic {topic!r} contains whitespace or a control character")
    return topic


# ------------------------------------------------------------------------------------------
# STOREAS.


def _refuse_format_parameters(parameters: Sequence[Property], fmt: Format) -> None:
    """``STOREAS `X` (k=v, …)``: Lenses' KCQL parses the parameters, but its S3 sink reads
    only the format's name (stream-reactor ``FormatSelection.fromKcql``) and drops them
    without a word. Refused, so that nobody believes they took effect."""
    if not parameters:
        return
    first = parameters[0]
    shown = ", ".join(f"{p.key}={p.value.text}" for p in parameters)
    last = parameters[-1].span
    known = [p for p in parameters if p.key.casefold() in PROPERTY_SPECS]
    as_properties = ", ".join(f"'{p.key.casefold()}'={p.value.text}" for p in known)
    hint = (
        f"Write PROPERTIES({as_properties}) instead"
        if len(known) == len(parameters)
        else "Remove them; settings go in PROPERTIES('key'=value, …)"
    )
    raise KcqlSemanticError(
        f"STOREAS {fmt.value} ({shown}): the Lenses S3 sink ignores parameters after the "
        "format, so they would not mean what they say",
        span=Span(first.span.line, first.span.column, last.end_line, last.end_column),
        hint=hint,
        label="storeas-parameters",
    )


def _format(word: Word | None) -> Format:
    if word is None:
        return Format.JSON
    for fmt in Format:
        if fmt.value.casefold() == word.text.casefold():
            return fmt
    if word.text.upper().startswith("BYTES_"):
        # Lenses 5.x's BYTES_KeyAndValueWithSizes, BYTES_ValueOnly, …; Lenses refuses them now.
        raise KcqlSemanticError(
            f"STOREAS {word.text} is no longer supported (nor by the Lenses sink)",
            span=word.span,
            hint="Store values as BYTES, or keys, values and headers with "
            "'store.envelope'=true in JSON, AVRO or PARQUET",
            label="unknown-format",
        )
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
        if (
            fmt in _UNSTRUCTURED_FORMATS
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


# ------------------------------------------------------------------------------------------
# Settings: legacy clauses and PROPERTIES, merged into one canonical table.


def _settings(statement: Statement) -> Settings:
    settings = Settings()
    for legacy in statement.legacy:
        key = LEGACY_PROPERTIES[legacy.keyword]
        if key in settings:
            raise KcqlSemanticError(
                f"{legacy.keyword} is given twice",
                span=legacy.span,
                hint="State each setting once",
                label="duplicate-setting",
            )
        settings[key] = Setting(
            _legacy_value(legacy, key),
            legacy.span,
            legacy.value,
            f"{legacy.keyword} = {legacy.value.text}",
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
        stated_as = f"'{prop.key}'={prop.value.text}"
        settings[prop.key] = Setting(value, prop.span, prop.value, stated_as)
    return settings


def _legacy_value(legacy: LegacySetting, key: str) -> str:
    if legacy.keyword != "WITHPARTITIONER":
        return normalize_value(key, PROPERTY_SPECS[key], legacy.value)
    for name, value in PARTITIONERS.items():
        if name.casefold() == legacy.value.text.casefold():
            return value
    raise KcqlSemanticError(
        f"unknown partitioner {legacy.value.text!r}",
        span=legacy.value.span,
        hint=did_you_mean(legacy.value.text, PARTITIONERS) or f"Write {one_of(PARTITIONERS)}",
        expected=tuple(PARTITIONERS),
        label="unknown-partitioner",
    )


def _check_format_properties(settings: Settings, fmt: Format) -> None:
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
    for key, formats in FORMAT_PROPERTIES.items():
        setting = settings.get(key)
        if setting is not None and fmt not in formats:
            names = ", ".join(sorted(f.value for f in formats))
            raise KcqlSemanticError(
                f"{key!r} does not apply to STOREAS {fmt.value}",
                span=setting.span,
                hint=f"It applies to {names}; remove it, or change STOREAS",
                label="property-format",
            )


_ICEBERG_KEYS = ("iceberg.table", "iceberg.catalog")
# Where files go is the table's business: settings that place objects do not apply.
_OBJECT_PLACEMENT_KEYS = ("layout", "layout.template", "key.suffix")


def _iceberg(
    settings: Settings, fmt: Format, statement: Statement, partition_by: tuple[FieldRef, ...]
) -> IcebergTable | None:
    """``'table.format'``, ``'iceberg.table'``, ``'iceberg.catalog'``."""
    chosen = settings.get("table.format")
    if chosen is None or chosen.value == TableFormat.OBJECTS.value:
        stray = next((settings[k] for k in _ICEBERG_KEYS if k in settings), None)
        if stray is not None:
            raise KcqlSemanticError(
                f"{stray.stated_as.split('=')[0]} needs 'table.format'='iceberg'",
                span=stray.span,
                hint="Add 'table.format'='iceberg', or remove the setting",
                label="iceberg-without-table-format",
            )
        return None
    if fmt is not Format.PARQUET:
        raise KcqlSemanticError(
            f"an Iceberg table stores Parquet files, not STOREAS {fmt.value}",
            span=statement.format.span if statement.format is not None else chosen.span,
            hint="Write STOREAS PARQUET, or remove 'table.format'",
            label="iceberg-format",
        )
    table = settings.get("iceberg.table")
    if table is None:
        raise KcqlSemanticError(
            "'table.format'='iceberg' needs 'iceberg.table'",
            span=chosen.span,
            hint="Name the table: 'iceberg.table'='namespace.table', e.g. 'db.orders'",
            label="iceberg-without-table",
        )
    for key in _OBJECT_PLACEMENT_KEYS:
        if key in settings:
            raise KcqlSemanticError(
                f"{key!r} does not apply to an Iceberg table (the table places its files)",
                span=settings[key].span,
                hint="Remove it, or 'table.format'",
                label="iceberg-layout",
            )
    envelope = settings.get("store.envelope")
    time = _iceberg_time(settings, [ref for ref in partition_by if ref.source is Source.DATE])
    for ref in partition_by:
        if ref.source is Source.DATE:
            continue
        # A table is partitioned by its columns (identity): value fields, which are columns
        # unless the envelope keeps the value as bytes.
        if ref.source is not Source.VALUE or not ref.path:
            raise KcqlSemanticError(
                "an Iceberg table is partitioned by value fields (Iceberg identity "
                "partitions); this PARTITIONBY entry is not one",
                span=ref.span or chosen.span,
                hint="Partition by a field of the value, e.g. PARTITIONBY country, or remove "
                "the entry (query engines filter the table by any column)",
                label="iceberg-partition",
            )
        if envelope is not None and envelope.value == "true":
            raise KcqlSemanticError(
                "with 'store.envelope'=true the value is one bytes column: an Iceberg table "
                "cannot be partitioned by its fields",
                span=ref.span or chosen.span,
                hint="Remove PARTITIONBY, or 'store.envelope'",
                label="iceberg-partition",
            )
    catalog = settings.text("iceberg.catalog", DEFAULT_ICEBERG_CATALOG)
    return IcebergTable(table.value, catalog, time)


# The letters of a _date pattern that name a day (with a year, and month and day or day of
# year) and an hour of it: Iceberg's day and hour transforms, in UTC.
_DAY_LETTERS = frozenset("uyMLdD")
_HOUR_LETTERS = frozenset("Hk")
# The time zone database's names of UTC (its zone Etc/UTC and the links to it and to Etc/GMT,
# which has had offset zero always): Iceberg's transforms are in UTC.
_UTC_NAMES = frozenset(
    {"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"}
    | {"GMT", "Etc/GMT", "Etc/GMT0", "Etc/GMT+0", "Etc/GMT-0", "GMT0", "GMT+0", "GMT-0"}
    | {"Etc/Greenwich", "Greenwich"}
)


def _iceberg_time(settings: Settings, dates: Sequence[FieldRef]) -> TimeTransform | None:
    """The Iceberg transform the PARTITIONBY ``_date`` entries of a table route ask for:
    together their patterns must name a day (``day``) or an hour (``hour``), in UTC, of the
    record timestamp (the table's :data:`RECORD_TIME_COLUMN`)."""
    if not dates:
        return None
    hint = "Write _date.uuuu-MM-dd (Iceberg day partitions) or _date.uuuu-MM-dd-HH (hour)"
    patterns: list[tuple[FieldRef, DatePattern]] = [
        (ref, compile_pattern(ref.path[0])) for ref in dates
    ]
    for ref, pattern in patterns:
        extra = pattern.letters - _DAY_LETTERS - _HOUR_LETTERS
        if extra or pattern.reduced_year:
            what = (
                "a two-digit year"
                if not extra
                else "letter(s) " + ", ".join(repr(c) for c in sorted(extra))
            )
            raise KcqlSemanticError(
                f"an Iceberg table is partitioned by day or hour of the record time; the date "
                f"pattern {pattern.pattern!r} uses {what}, which no Iceberg transform has",
                span=ref.span,
                hint=hint,
                label="iceberg-partition",
            )
    letters = frozenset().union(*(pattern.letters for _, pattern in patterns))
    if not (
        letters & frozenset("uy")
        and ("D" in letters or ({"d"} <= letters and letters & frozenset("ML")))
    ):
        raise KcqlSemanticError(
            "an Iceberg table is partitioned by day or hour of the record time; the _date "
            "pattern(s) here do not name a day (a year, a month and a day, or a year and a "
            "day of the year)",
            span=dates[0].span,
            hint=hint,
            label="iceberg-partition",
        )
    zone = settings.get("partition.timezone")
    if zone is not None and zone.value not in _UTC_NAMES:
        raise KcqlSemanticError(
            "Iceberg's day and hour transforms are in UTC; a table route's _date partitions "
            "cannot use another time zone",
            span=zone.span,
            hint="Remove 'partition.timezone' (query engines convert times to any zone)",
            label="iceberg-partition",
        )
    time_field = settings.get("partition.time.field")
    if time_field is not None:
        raise KcqlSemanticError(
            "a table route's _date partitions are days or hours of the record timestamp (the "
            "table's _timestamp column), not of a field",
            span=time_field.span,
            hint="Remove 'partition.time.field', or partition by the field itself "
            "(PARTITIONBY <field>)",
            label="iceberg-partition",
        )
    return TimeTransform.HOUR if letters & _HOUR_LETTERS else TimeTransform.DAY


def _envelope(settings: Settings, fmt: Format) -> Envelope:
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

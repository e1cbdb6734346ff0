"""The resolved, validated plan: the only kcql types that ``archiver/`` imports.

A :class:`Plan` holds one :class:`Route` per KCQL statement. Everything here is frozen and
hashable; source positions live in ``span`` fields that take no part in equality, so that
``parse(render(plan)) == plan`` holds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from dataclasses import field as dataclass_field


@dataclass(frozen=True, slots=True)
class Span:
    """Where a piece of KCQL text sits: 1-based lines and columns, end exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int


class Format(enum.Enum):
    """What ``STOREAS`` selects. The value is the canonical KCQL spelling."""

    JSON = "JSON"
    AVRO = "AVRO"
    PARQUET = "PARQUET"
    CSV = "CSV"
    CSV_WITHHEADERS = "CSV_WITHHEADERS"
    TEXT = "TEXT"
    BYTES = "BYTES"

    @property
    def extension(self) -> str:
        """The object file extension, as the Lenses sink names it."""
        return _EXTENSIONS[self]

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(member.value for member in cls)


_EXTENSIONS = {
    Format.JSON: "json",
    Format.AVRO: "avro",
    Format.PARQUET: "parquet",
    Format.CSV: "csv",
    Format.CSV_WITHHEADERS: "csv",
    Format.TEXT: "text",
    Format.BYTES: "bytes",
}


class Source(enum.Enum):
    """Which part of a Kafka record a field path reads."""

    VALUE = "_value"
    KEY = "_key"
    HEADER = "_header"
    TOPIC = "_topic"
    PARTITION = "_partition"
    OFFSET = "_offset"
    TIMESTAMP = "_timestamp"
    DATE = "_date"


@dataclass(frozen=True, slots=True)
class FieldRef:
    """A path into a record.

    ``source`` says which part of the record; ``path`` the names below it. Examples:
    ``_value.a.b`` is ``FieldRef(Source.VALUE, ("a", "b"))``; ``_header.country`` is
    ``FieldRef(Source.HEADER, ("country",))``; ``_key`` is ``FieldRef(Source.KEY, ())``;
    ``_date.uuuu`` is ``FieldRef(Source.DATE, ("uuuu",))`` (the pattern is the one name).
    """

    source: Source
    path: tuple[str, ...] = ()
    span: Span | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        """The last path name, or the source without its underscore (``key`` for ``_key``)."""
        return self.path[-1] if self.path else self.source.value.lstrip("_")


@dataclass(frozen=True, slots=True)
class SelectField:
    """One entry of a SELECT list: a path and the name it is stored under."""

    ref: FieldRef
    alias: str | None = None
    span: Span | None = field(default=None, compare=False, repr=False)

    @property
    def output_name(self) -> str:
        return self.alias if self.alias is not None else self.ref.name


@dataclass(frozen=True, slots=True)
class Target:
    """``INSERT INTO bucket[:prefix]``; ``prefix`` has no leading or trailing ``/``."""

    bucket: str
    prefix: str = ""

    def __str__(self) -> str:
        return f"{self.bucket}:{self.prefix}" if self.prefix else self.bucket

    @property
    def head(self) -> str:
        """The prefix as the start of a key: ``prefix/``, or nothing without a prefix."""
        return f"{self.prefix}/" if self.prefix else ""


DEFAULT_FLUSH_COUNT = 50_000
DEFAULT_FLUSH_SIZE = 500_000_000
DEFAULT_FLUSH_INTERVAL_SECONDS = 3_600


@dataclass(frozen=True, slots=True)
class FlushPolicy:
    """When an open object is rolled. Whichever limit is reached first wins.

    ``interval_seconds`` is measured on record timestamps (never the wall clock), so that a
    retry chunks identically. ``interval_set`` records whether the user stated it: only an
    explicit interval holds back young tails at the end of a bounded run.
    ``interval_by_record_time`` (``'flush.interval.time'``): True (``record``), an object
    also rolls before a record a full interval after its first; False (``arrival``, Lenses'
    wall-clock interval made deterministic), the interval only holds young objects back.
    """

    count: int = DEFAULT_FLUSH_COUNT
    size: int = DEFAULT_FLUSH_SIZE
    interval_seconds: int = DEFAULT_FLUSH_INTERVAL_SECONDS
    interval_set: bool = False
    interval_by_record_time: bool = True


class Padding(enum.Enum):
    LEFT = "LeftPad"
    RIGHT = "RightPad"
    NONE = "NoOp"


@dataclass(frozen=True, slots=True)
class KeyNaming:
    """How offsets and partitions are written into object keys (Lenses ``padding.*``)."""

    padding: Padding = Padding.LEFT
    padding_char: str = "0"
    offset_width: int = 12
    partition_width: int = 0


@dataclass(frozen=True, slots=True)
class Envelope:
    """``store.envelope``: keep key, value, headers and metadata with each stored record."""

    enabled: bool = False
    key: bool = True
    value: bool = True
    headers: bool = True
    metadata: bool = True


def field_path(text: str) -> FieldRef:
    """A dotted field path as written in a property value: ``_value.a.b``, ``a.b`` (a value
    field), ``_key.a``, ``_header.name``. The KCQL compiler has validated it."""
    first, *rest = text.split(".")
    sources = {source.value: source for source in Source}
    if first in sources:
        return FieldRef(sources[first], tuple(rest))
    return FieldRef(Source.VALUE, (first, *rest))


class Compression(enum.Enum):
    """``'store.compression'``: whole-object compression of JSON, CSV, TEXT and BYTES."""

    NONE = "none"
    GZIP = "gzip"
    BZIP2 = "bzip2"
    ZSTD = "zstd"


class ErrorPolicy(enum.Enum):
    """``'error.policy'``: what happens to a record the format cannot store."""

    FAIL = "fail"
    SKIP = "skip"
    DEAD_LETTER = "dead-letter"


class SchemaCompatibility(enum.Enum):
    """``'schema.compatibility'`` (Confluent's ``schema.compatibility``): which changes of the
    value schema keep an AVRO or PARQUET object open, the record projected onto the object's
    schema. NONE (default): any change rolls the object. BACKWARD and FULL: a record with an
    older compatible schema is projected onto the object's (newer) one; a newer schema rolls.
    FORWARD: a record with a newer compatible schema is projected onto the object's (older)
    one; an older schema rolls. An incompatible change always rolls."""

    NONE = "NONE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"


DEFAULT_AVRO_CODEC = "null"
DEFAULT_PARQUET_CODEC = "snappy"
DEFAULT_PARQUET_ROW_GROUP_RECORDS = 10_000


@dataclass(frozen=True, slots=True)
class Codecs:
    """How objects are compressed and cut: ``store.compression`` (and its seekable gzip
    blocks), ``avro.codec``, ``parquet.codec``, ``parquet.row.group.records``."""

    compression: Compression = Compression.NONE
    gzip_block_bytes: int | None = None
    avro: str = DEFAULT_AVRO_CODEC
    parquet: str = DEFAULT_PARQUET_CODEC
    parquet_row_group_records: int = DEFAULT_PARQUET_ROW_GROUP_RECORDS


class LayoutKind(enum.Enum):
    """``'layout'``: where a route's objects go."""

    LENSES = "lenses"
    CONFLUENT = "confluent"
    HIVE = "hive"
    TEMPLATE = "template"


class Placeholder(enum.Enum):
    """A ``{name}`` of ``'layout.template'``."""

    TOPIC = "topic"
    PARTITION = "partition"
    OFFSET = "offset"
    EXT = "ext"
    SUFFIX = "suffix"
    YEAR = "year"
    MONTH = "month"
    DAY = "day"
    HOUR = "hour"
    MINUTE = "minute"
    SECOND = "second"
    DATE = "date"
    FIELD = "field"


TIME_PLACEHOLDERS: tuple[Placeholder, ...] = (
    Placeholder.YEAR,
    Placeholder.MONTH,
    Placeholder.DAY,
    Placeholder.HOUR,
    Placeholder.MINUTE,
    Placeholder.SECOND,
    Placeholder.DATE,
)


@dataclass(frozen=True, slots=True)
class TemplateText:
    """Literal text of a template (ASCII, may contain ``/``)."""

    text: str


@dataclass(frozen=True, slots=True)
class TemplateSlot:
    """A placeholder of a template; ``field`` indexes PARTITIONBY for ``{field:NAME}``."""

    placeholder: Placeholder
    field: int = -1
    span: Span | None = dataclass_field(default=None, compare=False, repr=False)


TemplatePart = TemplateText | TemplateSlot


@dataclass(frozen=True, slots=True)
class LayoutSpec:
    """Where a route's objects go, compiled from ``layout``, ``layout.template``,
    ``key.suffix``, ``partition.timezone`` and ``partition.time.field``.

    ``template`` holds the parsed ``layout.template`` (its ``{prefix}/`` opening dropped: keys
    always start with the prefix) and is empty for the other kinds. ``time_field`` None means
    the record timestamp. ``span`` is where the layout was stated (the template's value, or
    the ``layout`` entry), for errors found when the layout is built.
    """

    kind: LayoutKind = LayoutKind.LENSES
    template: tuple[TemplatePart, ...] = ()
    key_suffix: str = ""
    timezone: str = "UTC"
    time_field: FieldRef | None = None
    span: Span | None = dataclass_field(default=None, compare=False, repr=False)


class TableFormat(enum.Enum):
    """``'table.format'``: loose objects (the default) or an Apache Iceberg table."""

    OBJECTS = "objects"
    ICEBERG = "iceberg"


DEFAULT_ICEBERG_CATALOG = "default"


RECORD_TIME_COLUMN = "_timestamp"
"""The column of a table partitioned by ``_date`` that holds the record timestamp (named as
KCQL names it; Iceberg ``timestamptz``), whose day or hour the partition is."""


class TimeTransform(enum.Enum):
    """The Iceberg transform of a table's record-time column that PARTITIONBY ``_date``
    entries compile to: a daily pattern (``_date.uuuu-MM-dd``) is ``day``, an hourly one
    (``_date.uuuu-MM-dd-HH``) ``hour``."""

    DAY = "day"
    HOUR = "hour"


@dataclass(frozen=True, slots=True)
class IcebergTable:
    """``'table.format'='iceberg'``: the route appends its Parquet files to ``table``
    (``namespace.table``) of the pyiceberg catalog named ``catalog``; the table's location,
    when the run creates it, is the route's ``bucket:prefix``. ``time`` is the transform of
    the record-time column that the route's PARTITIONBY ``_date`` entries ask for (None:
    no ``_date`` entry); it sits in the partition spec where the first ``_date`` entry is."""

    table: str
    catalog: str = DEFAULT_ICEBERG_CATALOG
    time: TimeTransform | None = None


ALL_TOPICS = "*"
"""The topic of ``FROM `*```: every topic the job is given (a topics list or regex option)."""

DEFAULT_TIMEZONE = "UTC"


@dataclass(frozen=True, slots=True)
class Route:
    """One statement: which topic goes where, in what shape — every setting compiled.

    ``fields`` is ``None`` for ``SELECT *``. The typed fields hold every setting the archiver
    uses; ``properties`` keeps what was stated (PROPERTIES entries and the legacy ``WITH_*``
    clauses mapped onto them) as canonical strings sorted by key, for rendering only, and
    ``spans`` where each was stated, for errors.
    """

    target: Target
    topic: str
    fields: tuple[SelectField, ...] | None = None
    partition_by: tuple[FieldRef, ...] = ()
    include_keys: bool = False
    format: Format = Format.JSON
    flush: FlushPolicy = FlushPolicy()
    naming: KeyNaming = KeyNaming()
    envelope: Envelope = Envelope()
    codecs: Codecs = Codecs()
    error_policy: ErrorPolicy = ErrorPolicy.FAIL
    avro_schema_file: str | None = None
    # A Schema Registry subject whose schema is the route's, as a file's would be; its
    # version (digits), None: the latest when the run starts.
    avro_schema_subject: str | None = None
    avro_schema_version: str | None = None
    schema_compatibility: SchemaCompatibility = SchemaCompatibility.NONE
    transform: str | None = None
    layout: LayoutSpec = LayoutSpec()
    iceberg: IcebergTable | None = None
    properties: tuple[tuple[str, str], ...] = ()
    spans: tuple[tuple[str, Span], ...] = field(default=(), compare=False, repr=False)
    span: Span | None = field(default=None, compare=False, repr=False)
    # One topic of a ``FROM `*``` statement, as the archiver resolved it (never parsed).
    matched: bool = field(default=False, compare=False)

    @property
    def all_topics(self) -> bool:
        """Whether this route reads every topic the job is given (``FROM `*```)."""
        return self.topic == ALL_TOPICS

    def span_of(self, key: str | None) -> Span | None:
        """Where setting ``key`` was stated; the statement's span when it was not (or None)."""
        for name, span in self.spans:
            if name == key:
                return span
        return self.span


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything a run needs to know from KCQL: one route per statement, in order."""

    routes: tuple[Route, ...]

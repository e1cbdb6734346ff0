"""The resolved, validated plan: the only kcql types that ``archiver/`` imports.

A :class:`Plan` holds one :class:`Route` per KCQL statement. Everything here is frozen and
hashable; source positions live in ``span`` fields that take no part in equality, so that
``parse(render(plan)) == plan`` holds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


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


DEFAULT_FLUSH_COUNT = 50_000
DEFAULT_FLUSH_SIZE = 500_000_000
DEFAULT_FLUSH_INTERVAL_SECONDS = 3_600


@dataclass(frozen=True, slots=True)
class FlushPolicy:
    """When an open object is rolled. Whichever limit is reached first wins.

    ``interval_seconds`` is measured on record timestamps (never the wall clock), so that a
    retry chunks identically. ``interval_set`` records whether the user stated it: only an
    explicit interval holds back young tails at the end of a bounded run.
    """

    count: int = DEFAULT_FLUSH_COUNT
    size: int = DEFAULT_FLUSH_SIZE
    interval_seconds: int = DEFAULT_FLUSH_INTERVAL_SECONDS
    interval_set: bool = False


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


ALL_TOPICS = "*"
"""The topic of ``FROM `*```: every topic the job is given (a topics list or regex option)."""

DEFAULT_TIMEZONE = "UTC"


@dataclass(frozen=True, slots=True)
class Route:
    """One statement: which topic goes where, in what shape.

    ``fields`` is ``None`` for ``SELECT *``. ``properties`` holds every PROPERTIES entry
    (and the legacy ``WITH_*`` clauses mapped onto them) as canonical strings, sorted by key.
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
    properties: tuple[tuple[str, str], ...] = ()
    span: Span | None = field(default=None, compare=False, repr=False)

    @property
    def all_topics(self) -> bool:
        """Whether this route reads every topic the job is given (``FROM `*```)."""
        return self.topic == ALL_TOPICS

    @property
    def timezone(self) -> str:
        """The IANA time zone of ``_date.<pattern>`` partitions (``'partition.timezone'``)."""
        return self.property("partition.timezone") or DEFAULT_TIMEZONE

    @property
    def time_field(self) -> FieldRef | None:
        """The field whose value is the record time of ``_date`` partitions and time
        placeholders (``'partition.time.field'``); None: the record timestamp."""
        text = self.property("partition.time.field")
        return None if text is None else field_path(text)

    def property(self, key: str, default: str | None = None) -> str | None:
        """The value of one PROPERTIES entry, or ``default``."""
        for name, value in self.properties:
            if name == key:
                return value
        return default


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything a run needs to know from KCQL: one route per statement, in order."""

    routes: tuple[Route, ...]

"""Object layouts: where in the bucket a route's objects go.

A route picks its layout with ``PROPERTIES('layout'='…')``. Every layout is compiled, once
per route, into a :class:`Layout`: a sequence of literal text and slots (topic, partition,
start offset, PARTITIONBY values, record-time fields) that :meth:`Layout.key` fills in.
The compiled form is validated so that every key it can produce

- starts with ``<prefix>/`` and stays below it (values are encoded by
  :func:`~kafka_archive.archiver.partition.values.safe_segment`);
- names its topic, partition and start offset unambiguously, so two partitions or two
  objects can never share a key;
- is at most 1,024 UTF-8 bytes (S3's limit), whatever the values: the room left by the
  fixed parts (counting the longest topic, partition and offset) is shared between the
  value slots, and a longer value is cut and hashed.

The layouts (one example key each in :mod:`~kafka_archive.archiver.partition.keys`):

- ``lenses`` (default): ``<prefix>/<topic>/<partition>/<offset>.<ext>`` without PARTITIONBY,
  ``<prefix>/<v1>/<v2>/<topic>(<partition>_<offset>).<ext>`` with it, and
  ``<prefix>/<k1>=<v1>/<k2>=<v2>/<topic>(<partition>_<offset>).<ext>`` with
  ``WITHPARTITIONER=KeysAndValues``;
- ``confluent``: ``<prefix>/<topic>/partition=<partition>/<topic>+<partition>+<offset>.<ext>``,
  and ``<prefix>/<topic>/<k1>=<v1>/<topic>+<partition>+<offset>.<ext>`` with PARTITIONBY (the
  Confluent default and field partitioners);
- ``hive``: ``<prefix>/<topic>/[<k1>=<v1>/…]year=YYYY/month=MM/day=dd/hour=HH/`` then
  ``<topic>+<partition>+<offset>.<ext>``, the time from the record timestamp in the route's
  time zone (Confluent's time-based partitioner with the Hive path format);
- ``template``: the user's ``layout.template``.

The route's typed :class:`~kafka_archive.kcql.plan.LayoutSpec` says which layout, the
template (parsed and checked by the KCQL compiler, ``kcql/layout.py``, which documents its
grammar), ``key.suffix`` (text added after the start offset, before ``.<ext>``) and the time
zone of record-time values. What is checked here depends on how values are encoded: that
every placeholder's end can be found, and S3's key length.

In ``name=value`` segments the name of a PARTITIONBY field is its last path name (``country``
for ``_header.country``, ``key`` for ``_key``); a ``_date`` field is named for what its
pattern shows: ``year`` (``uuuu``/``yyyy``), ``month``, ``day``, ``hour``, ``minute``,
``second``, ``quarter``, ``dayofyear``, or ``date`` for a pattern with several fields
(``yyyy-MM-dd``), as Lenses names every date field.
"""

from __future__ import annotations

import enum
import functools
import itertools
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import tzinfo
from types import MappingProxyType

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.formats import compression
from kafka_archive.archiver.partition.values import (
    HIVE_NULL_SEGMENT,
    MIN_SEGMENT_BYTES,
    MISSING_SEGMENT,
    SEGMENT_MAX_BYTES,
    escape_text,
    safe_segment,
    topic_segment,
)
from kafka_archive.kcql.dates import (
    DatePattern,
    compile_pattern,
    field_name,
    local_time,
    time_zone,
)
from kafka_archive.kcql.plan import (
    FieldRef,
    KeyNaming,
    LayoutKind,
    Padding,
    Placeholder,
    Route,
    Source,
    Span,
    TemplatePart,
    TemplateText,
)

KEY_MAX_BYTES = 1024
"""S3's limit on the length of an object key, in UTF-8 bytes."""

_PARTITION_DIGITS = 10  # 2**31 - 1
_OFFSET_DIGITS = 19  # 2**63 - 1
MAX_PARTITION = 2**31 - 1
MAX_OFFSET = 2**63 - 1

_DIGITS = frozenset(string.digits)
_ALNUM = frozenset(string.ascii_letters + string.digits)
# ASCII characters an encoded value may contain (non-ASCII characters are never delimiters:
# template literals are ASCII).
_TOPIC_CHARS = _ALNUM | frozenset("-._%~")
_VALUE_CHARS = _TOPIC_CHARS | frozenset("()")  # plus the fallbacks "(missing)", "(empty)"

TIME_PLACEHOLDERS: Mapping[str, str] = MappingProxyType(
    {
        "year": "uuuu",
        "month": "MM",
        "day": "dd",
        "hour": "HH",
        "minute": "mm",
        "second": "ss",
        "date": "uuuu-MM-dd",
    }
)
"""The record-time placeholders of templates and the Java pattern of each."""

_TIME_MAX_BYTES = max(len(HIVE_NULL_SEGMENT), len("uuuu-MM-dd"))


class LayoutError(ValueError):
    """A route's layout settings cannot produce safe, unique keys.

    ``property`` names the route property at fault (None for the prefix or PARTITIONBY);
    ``span`` where in the KCQL text, when known more closely (a template's placeholder);
    ``hint`` says what to write instead.
    """

    def __init__(
        self,
        message: str,
        *,
        property: str | None = None,
        hint: str | None = None,
        span: Span | None = None,
    ) -> None:
        super().__init__(message + (f". {hint}" if hint else ""))
        self.message = message
        self.property = property
        self.hint = hint
        self.span = span


class SlotKind(enum.Enum):
    TOPIC = "topic"
    PARTITION = "partition"
    OFFSET = "offset"
    FIELD = "field"
    TIME = "time"


_KEY_SLOTS = {
    Placeholder.TOPIC: SlotKind.TOPIC,
    Placeholder.PARTITION: SlotKind.PARTITION,
    Placeholder.OFFSET: SlotKind.OFFSET,
}


@dataclass(frozen=True, slots=True)
class Text:
    """Literal text of a layout (may contain ``/``)."""

    text: str


@dataclass(frozen=True, slots=True)
class Slot:
    """A place a key fills in. ``index`` is into the object group (FIELD and TIME only);
    ``keyed`` says the slot follows ``name=``, which picks the missing-value fallback."""

    kind: SlotKind
    index: int = 0
    keyed: bool = False


Part = Text | Slot


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One PARTITIONBY field as a layout sees it."""

    ref: FieldRef
    name: str
    path: str
    date: DatePattern | None = None


@dataclass(frozen=True, slots=True)
class Layout:
    """A route's compiled, validated layout. Build it with :func:`layout_for`."""

    kind: LayoutKind
    prefix: str
    parts: tuple[Part, ...]
    fields: tuple[FieldSpec, ...]
    times: tuple[DatePattern, ...]
    zone: tzinfo
    naming: KeyNaming
    value_max_bytes: int
    uses_time: bool

    def group(
        self, values: Sequence[str | None], timestamp_ms: int | None = None
    ) -> tuple[str | None, ...]:
        """Return the encoded values that place a record's object, apart from tp and offset.

        Records with equal groups (same tp) belong in the same open object. None marks a
        missing value or time.

        Raises:
            ValueError: ``values`` does not have one entry per PARTITIONBY field, or the value
                of a ``_date`` field is not epoch milliseconds and no ``timestamp_ms`` is given.
        """
        if len(values) != len(self.fields):
            raise ValueError(f"expected {len(self.fields)} PARTITIONBY values, got {len(values)}")
        local = None
        if timestamp_ms is not None and self.uses_time:
            local = local_time(timestamp_ms, self.zone)
        out: list[str | None] = []
        for spec, value in zip(self.fields, values, strict=True):
            text = value
            if spec.ref.source is Source.PARTITION and value is not None and value.isdigit():
                # Lenses pads a PARTITIONBY _partition value as it pads the partition.
                text = _pad(int(value), self.naming.partition_width, self.naming)
            elif spec.date is not None:
                if timestamp_ms is not None:
                    text = None if local is None else spec.date.render(local)
                elif value is not None:
                    text = spec.date.format(_epoch_ms(value, spec.path), self.zone)
            out.append(None if text is None else safe_segment(text, self.value_max_bytes))
        out.extend(None if local is None else pattern.render(local) for pattern in self.times)
        return tuple(out)

    def key(self, tp: TopicPartition, start_offset: int, group: tuple[str | None, ...]) -> str:
        """Return the key of the object of ``tp`` whose first record is at ``start_offset``.

        Raises:
            ValueError: an empty topic, a partition or offset out of Kafka's range, or a group
                of the wrong length.
        """
        if not tp.topic:
            raise ValueError("empty topic name")
        if not 0 <= tp.partition <= MAX_PARTITION:
            raise ValueError(f"partition {tp.partition} out of range")
        if not 0 <= start_offset <= MAX_OFFSET:
            raise ValueError(f"offset {start_offset} out of range")
        if len(group) != len(self.fields) + len(self.times):
            raise ValueError("object group does not belong to this layout")
        naming = self.naming
        out = [self.prefix, "/"] if self.prefix else []
        for part in self.parts:
            if isinstance(part, Text):
                out.append(part.text)
            elif part.kind is SlotKind.TOPIC:
                out.append(topic_segment(tp.topic))
            elif part.kind is SlotKind.PARTITION:
                out.append(_pad(tp.partition, naming.partition_width, naming))
            elif part.kind is SlotKind.OFFSET:
                out.append(_pad(start_offset, naming.offset_width, naming))
            else:
                value = group[part.index]
                if value is None:
                    value = HIVE_NULL_SEGMENT if part.keyed else MISSING_SEGMENT
                out.append(value)
        return "".join(out)

    def partition_text(self, partition: int) -> str:
        """A partition number as this layout writes it into keys (padded as configured)."""
        return _pad(partition, self.naming.partition_width, self.naming)

    @property
    def template(self) -> str:
        """The layout written as a template (for messages and documentation)."""
        names = {
            SlotKind.TOPIC: "{topic}",
            SlotKind.PARTITION: "{partition}",
            SlotKind.OFFSET: "{offset}",
        }
        time_names = {pattern: name for name, pattern in TIME_PLACEHOLDERS.items()}
        out = ["{prefix}/"] if self.prefix else []
        for part in self.parts:
            if isinstance(part, Text):
                out.append(part.text)
            elif part.kind is SlotKind.FIELD:
                out.append("{field:" + self.fields[part.index].name + "}")
            elif part.kind is SlotKind.TIME:
                pattern = self.times[part.index - len(self.fields)].pattern
                out.append("{" + time_names[pattern] + "}")
            else:
                out.append(names[part.kind])
        return "".join(out)


def _epoch_ms(value: str, path: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(
            f"the value of {path} must be the record timestamp in epoch milliseconds "
            "(or pass timestamp_ms)"
        ) from None


def _pad(number: int, width: int, naming: KeyNaming) -> str:
    text = str(number)
    if naming.padding is Padding.LEFT:
        return text.rjust(width, naming.padding_char)
    if naming.padding is Padding.RIGHT:
        return text.ljust(width, naming.padding_char)
    return text


# ------------------------------------------------------------------------------------------
# Compiling a route's layout.


@functools.lru_cache(maxsize=256)
def layout_for(route: Route) -> Layout:
    """Return the compiled layout of ``route``; the same route always gives the same layout.

    Call it when planning a run, so that bad layout settings fail before any record is read.

    Raises:
        LayoutError: an unknown layout, a bad template, time zone or date pattern, padding
            that would make two offsets share a key, or a prefix too long for S3's limit.
    """
    spec = route.layout
    kind = spec.kind
    _check_prefix(route.target.prefix)
    try:
        zone = time_zone(spec.timezone)
    except ValueError as exc:
        raise LayoutError(str(exc), property="partition.timezone") from None
    fields = tuple(_field_spec(ref) for ref in route.partition_by)
    suffix = escape_text(spec.key_suffix)
    ext = compression.extension(route)
    times: list[str] = []
    if kind is LayoutKind.TEMPLATE:
        parts = _from_template(spec.template, times, suffix, ext)
    else:
        parts = _preset(kind, route, fields, times, suffix, ext)
    resolved = tuple(
        Slot(SlotKind.TIME, len(fields) + times.index(p.text), p.keyed)
        if isinstance(p, _TimeRef)
        else p
        for p in parts
    )
    # A template gives one part per piece, so part i is the template's piece i.
    spans = tuple(getattr(piece, "span", None) for piece in spec.template)
    _check_unambiguous(resolved, route.naming, kind, spans)
    value_max = _value_budget(route.target.prefix, resolved, route.naming)
    return Layout(
        kind=kind,
        prefix=route.target.prefix,
        parts=resolved,
        fields=fields,
        times=tuple(compile_pattern(TIME_PLACEHOLDERS[name]) for name in times),
        zone=zone,
        naming=route.naming,
        value_max_bytes=value_max,
        uses_time=bool(times) or any(spec.date is not None for spec in fields),
    )


@dataclass(frozen=True, slots=True)
class _TimeRef:
    """A time placeholder before group indexes are known: ``text`` is its name."""

    text: str
    keyed: bool


def _check_prefix(prefix: str) -> None:
    if not prefix:
        return
    try:
        prefix.encode()
    except UnicodeEncodeError:
        raise LayoutError(f"the prefix {prefix!r} is not valid Unicode text") from None
    for segment in prefix.split("/"):
        if segment in ("", ".", ".."):
            raise LayoutError(f"the prefix {prefix!r} has an empty, '.' or '..' segment")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in prefix):
        raise LayoutError(f"the prefix {prefix!r} contains a control character")


def _field_spec(ref: FieldRef) -> FieldSpec:
    path = ref.source.value + "".join("." + name for name in ref.path)
    if ref.source is not Source.DATE:
        return FieldSpec(ref, ref.name, path)
    pattern = ref.path[0] if ref.path else ""
    try:
        date = compile_pattern(pattern)
    except ValueError as exc:
        raise LayoutError(f"PARTITIONBY {path}: {exc}") from None
    return FieldSpec(ref, field_name(date), path, date)


def _tail(suffix: str, ext: str, sep: tuple[str, str, str]) -> list[Part]:
    """The object name: ``<topic><a><partition><b><offset><c><suffix>.<ext>``."""
    return [
        Slot(SlotKind.TOPIC),
        Text(sep[0]),
        Slot(SlotKind.PARTITION),
        Text(sep[1]),
        Slot(SlotKind.OFFSET),
        Text(f"{sep[2]}{suffix}.{ext}"),
    ]


def _keyed_fields(fields: tuple[FieldSpec, ...]) -> list[Part]:
    parts: list[Part] = []
    for index, spec in enumerate(fields):
        parts += [Text(safe_segment(spec.name) + "="), Slot(SlotKind.FIELD, index, True), Text("/")]
    return parts


def _preset(
    kind: LayoutKind,
    route: Route,
    fields: tuple[FieldSpec, ...],
    times: list[str],
    suffix: str,
    ext: str,
) -> list[Part | _TimeRef]:
    parts: list[Part | _TimeRef] = []
    if kind is LayoutKind.LENSES:
        if not fields:
            return [
                Slot(SlotKind.TOPIC),
                Text("/"),
                Slot(SlotKind.PARTITION),
                Text("/"),
                Slot(SlotKind.OFFSET),
                Text(f"{suffix}.{ext}"),
            ]
        if route.include_keys:
            parts += _keyed_fields(fields)
        else:
            for index in range(len(fields)):
                parts += [Slot(SlotKind.FIELD, index), Text("/")]
        return parts + _tail(suffix, ext, ("(", "_", ")"))
    parts += [Slot(SlotKind.TOPIC), Text("/")]
    if kind is LayoutKind.CONFLUENT and not fields:
        parts += [Text("partition="), Slot(SlotKind.PARTITION), Text("/")]
    parts += _keyed_fields(fields)
    if kind is LayoutKind.HIVE:
        for name in ("year", "month", "day", "hour"):
            times.append(name)
            parts += [Text(f"{name}="), _TimeRef(name, True), Text("/")]
    return parts + _tail(suffix, ext, ("+", "+", ""))


def _from_template(
    template: tuple[TemplatePart, ...], times: list[str], suffix: str, ext: str
) -> list[Part | _TimeRef]:
    """The parts of a template the KCQL compiler has parsed and checked (placeholders,
    literals, segments, required and PARTITIONBY fields)."""
    parts: list[Part | _TimeRef] = []
    for piece in template:
        keyed = bool(parts) and isinstance(parts[-1], Text) and parts[-1].text.endswith("=")
        if isinstance(piece, TemplateText):
            parts.append(Text(piece.text))
        elif piece.placeholder in _KEY_SLOTS:
            parts.append(Slot(_KEY_SLOTS[piece.placeholder]))
        elif piece.placeholder is Placeholder.EXT:
            parts.append(Text(ext))
        elif piece.placeholder is Placeholder.SUFFIX:
            parts.append(Text(suffix))
        elif piece.placeholder is Placeholder.FIELD:
            parts.append(Slot(SlotKind.FIELD, piece.field, keyed))
        else:
            name = piece.placeholder.value
            if name not in times:
                times.append(name)
            parts.append(_TimeRef(name, keyed))
    return parts


def _slot_chars(slot: Slot, naming: KeyNaming) -> frozenset[str] | None:
    """The ASCII characters a slot's text may contain; None for self-delimiting slots."""
    if slot.kind is SlotKind.TIME:
        return None
    if slot.kind is SlotKind.TOPIC:
        return _TOPIC_CHARS
    if slot.kind is SlotKind.FIELD:
        return _VALUE_CHARS
    if naming.padding is Padding.NONE:
        return _DIGITS
    return _DIGITS | {naming.padding_char}


def _check_unambiguous(
    parts: Sequence[Part | _TimeRef],
    naming: KeyNaming,
    kind: LayoutKind,
    spans: Sequence[Span | None] = (),
) -> None:
    """Check that a key can be read left to right: every slot but the last ends where the
    first character its text cannot contain appears."""
    slots = [(i, part) for i, part in enumerate(parts) if not isinstance(part, Text)]
    for (i, slot), (j, _) in itertools.pairwise(slots):
        if isinstance(slot, _TimeRef):
            continue
        chars = _slot_chars(slot, naming)
        if chars is None:
            continue
        between = "".join(p.text for p in parts[i + 1 : j] if isinstance(p, Text))
        if not any(c.isascii() and c not in chars for c in between):
            name = slot.kind.value
            raise LayoutError(
                f"the {kind.value} layout cannot tell where {{{name}}} ends: "
                f"{between!r} follows it",
                property="layout.template" if kind is LayoutKind.TEMPLATE else "padding.char",
                hint="Separate it from the next placeholder with '/' (or '+', '=', '(')",
                span=spans[i] if i < len(spans) else None,
            )


def _slot_max_bytes(slot: Slot, naming: KeyNaming) -> int:
    if slot.kind is SlotKind.TOPIC:
        return SEGMENT_MAX_BYTES
    if slot.kind is SlotKind.PARTITION:
        return max(_PARTITION_DIGITS, naming.partition_width)
    if slot.kind is SlotKind.OFFSET:
        return max(_OFFSET_DIGITS, naming.offset_width)
    return _TIME_MAX_BYTES


def _value_budget(prefix: str, parts: tuple[Part, ...], naming: KeyNaming) -> int:
    """Return the byte cap of one value so that no key exceeds :data:`KEY_MAX_BYTES`."""
    fixed = len(prefix.encode()) + 1 if prefix else 0
    value_slots = 0
    for part in parts:
        if isinstance(part, Text):
            fixed += len(part.text.encode())
        elif part.kind is SlotKind.FIELD:
            value_slots += 1
        else:
            fixed += _slot_max_bytes(part, naming)
    room = KEY_MAX_BYTES - fixed
    cap = min(SEGMENT_MAX_BYTES, room // value_slots) if value_slots else SEGMENT_MAX_BYTES
    if room < 0 or cap < MIN_SEGMENT_BYTES:
        raise LayoutError(
            f"keys could exceed S3's {KEY_MAX_BYTES}-byte limit: the prefix and fixed parts "
            f"take {fixed} bytes, leaving {max(room, 0)} for {value_slots} values",
            hint="Shorten the prefix, key.suffix or template, or partition by fewer fields",
        )
    return cap

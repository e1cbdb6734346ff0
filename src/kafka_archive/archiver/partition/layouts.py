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

Properties read from ``route.properties``:

- ``layout``: ``lenses`` | ``confluent`` | ``hive`` | ``template``. Default ``lenses``, or
  ``template`` when ``layout.template`` is set.
- ``layout.template``: the template of ``layout=template``. Placeholders: ``{topic}``,
  ``{partition}``, ``{offset}`` (all three required), ``{ext}``, ``{suffix}`` (the
  ``key.suffix`` text; required when ``key.suffix`` is set), ``{year}`` ``{month}``
  ``{day}`` ``{hour}`` ``{minute}`` ``{second}`` ``{date}`` (``uuuu-MM-dd``) from the record
  timestamp, and ``{field:NAME}`` for a PARTITIONBY field, by its name (``country`` for
  ``_header.country``; ``year`` for ``_date.uuuu``) or its path (``_header.country``). Every
  PARTITIONBY field must appear. ``{prefix}/`` may open the template; the key always starts
  with the prefix. Literal text may use ASCII letters, digits and ``- _ . / = + ( ) ~ @ ! ,``.
  Each placeholder other than the last and the time ones must be followed by literal text
  containing a character its value cannot contain (``/`` always works), so that topic,
  partition and offset can be read back from every key.
- ``key.suffix``: text added after the start offset, before ``.<ext>``.
- ``partition.timezone`` (through ``Route.timezone``): the IANA zone of record-time values;
  default ``UTC``.

In ``name=value`` segments the name of a PARTITIONBY field is its last path name (``country``
for ``_header.country``, ``key`` for ``_key``); a ``_date`` field is named for what its
pattern shows: ``year`` (``uuuu``/``yyyy``), ``month``, ``day``, ``hour``, ``minute``,
``second``, ``quarter``, ``dayofyear``, or ``date`` for a pattern with several fields
(``yyyy-MM-dd``), as Lenses names every date field.
"""

from __future__ import annotations

import difflib
import enum
import functools
import itertools
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import tzinfo
from types import MappingProxyType
from typing import Protocol

from kafka_archive.archiver.formats import compression
from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.partition.dates import (
    DatePattern,
    compile_pattern,
    local_time,
    time_zone,
)
from kafka_archive.archiver.partition.values import (
    HIVE_NULL_SEGMENT,
    MIN_SEGMENT_BYTES,
    MISSING_SEGMENT,
    SEGMENT_MAX_BYTES,
    escape_text,
    safe_segment,
)
from kafka_archive.kcql.plan import FieldRef, KeyNaming, Padding, Route, Source

KEY_MAX_BYTES = 1024
"""S3's limit on the length of an object key, in UTF-8 bytes."""

_PARTITION_DIGITS = 10  # 2**31 - 1
_OFFSET_DIGITS = 19  # 2**63 - 1
_MAX_PARTITION = 2**31 - 1
_MAX_OFFSET = 2**63 - 1
_MAX_PAD_WIDTH = 255  # a key segment's worth; wider padding only eats the 1,024-byte budget

_DIGITS = frozenset(string.digits)
_ALNUM = frozenset(string.ascii_letters + string.digits)
# ASCII characters an encoded value may contain (non-ASCII characters are never delimiters:
# template literals are ASCII).
_TOPIC_CHARS = _ALNUM | frozenset("-._%~")
_VALUE_CHARS = _TOPIC_CHARS | frozenset("()")  # plus the fallbacks "(missing)", "(empty)"
_LITERAL_CHARS = _ALNUM | frozenset("-_./=+()~@!,")
_PAD_CHARS = _ALNUM | frozenset("-._")

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

_DATE_NAMES = {
    frozenset("u"): "year",
    frozenset("y"): "year",
    frozenset("M"): "month",
    frozenset("L"): "month",
    frozenset("d"): "day",
    frozenset("D"): "dayofyear",
    frozenset("H"): "hour",
    frozenset("k"): "hour",
    frozenset("K"): "hour",
    frozenset("h"): "hour",
    frozenset("m"): "minute",
    frozenset("s"): "second",
    frozenset("Q"): "quarter",
    frozenset("q"): "quarter",
}


class _Fail(Protocol):
    def __call__(self, message: str, hint: str | None = None) -> LayoutError: ...


class LayoutKind(enum.Enum):
    """The ``layout`` property's choices."""

    LENSES = "lenses"
    CONFLUENT = "confluent"
    HIVE = "hive"
    TEMPLATE = "template"


class LayoutError(ValueError):
    """A route's layout settings cannot produce safe, unique keys.

    ``property`` names the route property at fault (None for the prefix or PARTITIONBY);
    ``hint`` says what to write instead.
    """

    def __init__(self, message: str, *, property: str | None = None, hint: str | None = None):
        super().__init__(message + (f". {hint}" if hint else ""))
        self.message = message
        self.property = property
        self.hint = hint


class SlotKind(enum.Enum):
    TOPIC = "topic"
    PARTITION = "partition"
    OFFSET = "offset"
    FIELD = "field"
    TIME = "time"


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
        if not 0 <= tp.partition <= _MAX_PARTITION:
            raise ValueError(f"partition {tp.partition} out of range")
        if not 0 <= start_offset <= _MAX_OFFSET:
            raise ValueError(f"offset {start_offset} out of range")
        if len(group) != len(self.fields) + len(self.times):
            raise ValueError("object group does not belong to this layout")
        naming = self.naming
        out = [self.prefix, "/"] if self.prefix else []
        for part in self.parts:
            if isinstance(part, Text):
                out.append(part.text)
            elif part.kind is SlotKind.TOPIC:
                out.append(safe_segment(tp.topic, SEGMENT_MAX_BYTES))
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
        names = {SlotKind.TOPIC: "{topic}", SlotKind.PARTITION: "{partition}",
                 SlotKind.OFFSET: "{offset}"}  # fmt: skip
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
    kind = _kind(route)
    _check_prefix(route.target.prefix)
    _check_padding(route.naming)
    try:
        zone = time_zone(route.timezone)
    except ValueError as exc:
        raise LayoutError(str(exc), property="partition.timezone") from None
    fields = tuple(_field_spec(ref) for ref in route.partition_by)
    suffix = escape_text(route.property("key.suffix") or "")
    ext = compression.extension(route)
    times: list[str] = []
    if kind is LayoutKind.TEMPLATE:
        parts = _parse_template(route, fields, times, suffix, ext)
    else:
        parts = _preset(kind, route, fields, times, suffix, ext)
    resolved = tuple(
        Slot(SlotKind.TIME, len(fields) + times.index(p.text), p.keyed)
        if isinstance(p, _TimeRef)
        else p
        for p in parts
    )
    _check_unambiguous(resolved, route.naming, kind)
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


def _kind(route: Route) -> LayoutKind:
    name = route.property("layout")
    template = route.property("layout.template")
    if name is None:
        return LayoutKind.TEMPLATE if template is not None else LayoutKind.LENSES
    try:
        kind = LayoutKind(name.lower())
    except ValueError:
        choices = [k.value for k in LayoutKind]
        close = difflib.get_close_matches(name.lower(), choices, n=1)
        raise LayoutError(
            f"unknown layout {name!r}, expected one of {', '.join(choices)}",
            property="layout",
            hint=f"Did you mean {close[0]!r}?" if close else None,
        ) from None
    if kind is LayoutKind.TEMPLATE and not template:
        raise LayoutError(
            "layout 'template' needs a template",
            property="layout.template",
            hint="Set 'layout.template'='{topic}/{partition}/{offset}.{ext}' or similar",
        )
    if kind is not LayoutKind.TEMPLATE and template is not None:
        raise LayoutError(
            f"'layout.template' is set but the layout is {name!r}",
            property="layout",
            hint="Set 'layout'='template' or remove 'layout.template'",
        )
    return kind


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


def _check_padding(naming: KeyNaming) -> None:
    if naming.padding is Padding.NONE:
        return
    for width, name in ((naming.offset_width, "offset"), (naming.partition_width, "partition")):
        if width > _MAX_PAD_WIDTH:
            raise LayoutError(
                f"a {name} padded to {width} characters cannot go into an object key "
                f"(S3 keys have at most {KEY_MAX_BYTES} bytes)",
                property=f"padding.length.{name}",
                hint=f"Use at most {_MAX_PAD_WIDTH}; Lenses' own tests use 12",
            )
    char = naming.padding_char
    if len(char) != 1 or char not in _PAD_CHARS:
        raise LayoutError(
            f"padding character {char!r} cannot go into an object key",
            property="padding.char",
            hint="Use '0' (or an ASCII letter, '-', '_' or '.')",
        )
    if char in _DIGITS and (naming.padding is Padding.RIGHT or char != "0"):
        raise LayoutError(
            f"{naming.padding.value} with padding character {char!r} gives different offsets "
            "the same key (42 and 420 with RightPad '0')",
            property="padding.char" if naming.padding is Padding.LEFT else "padding.type",
            hint="Use LeftPad with '0' (the default), or a non-digit padding character",
        )


def _field_spec(ref: FieldRef) -> FieldSpec:
    path = ref.source.value + "".join("." + name for name in ref.path)
    if ref.source is not Source.DATE:
        return FieldSpec(ref, ref.name, path)
    pattern = ref.path[0] if ref.path else ""
    try:
        date = compile_pattern(pattern)
    except ValueError as exc:
        raise LayoutError(f"PARTITIONBY {path}: {exc}") from None
    name = _DATE_NAMES.get(date.letters, "date")
    return FieldSpec(ref, name, path, date)


def _tail(suffix: str, ext: str, sep: tuple[str, str, str]) -> list[Part]:
    """The object name: ``<topic><a><partition><b><offset><c><suffix>.<ext>``."""
    return [
        Slot(SlotKind.TOPIC), Text(sep[0]), Slot(SlotKind.PARTITION), Text(sep[1]),
        Slot(SlotKind.OFFSET), Text(f"{sep[2]}{suffix}.{ext}"),
    ]  # fmt: skip


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
                Slot(SlotKind.TOPIC), Text("/"), Slot(SlotKind.PARTITION), Text("/"),
                Slot(SlotKind.OFFSET), Text(f"{suffix}.{ext}"),
            ]  # fmt: skip
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


_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


def _parse_template(
    route: Route,
    fields: tuple[FieldSpec, ...],
    times: list[str],
    suffix: str,
    ext: str,
) -> list[Part | _TimeRef]:
    template = route.property("layout.template") or ""

    def fail(message: str, hint: str | None = None) -> LayoutError:
        return LayoutError(f"layout.template {template!r}: {message}",
                           property="layout.template", hint=hint)  # fmt: skip

    text = template
    if text.startswith("{prefix}"):
        text = text[len("{prefix}") :]
        if not text.startswith("/"):
            raise fail("'{prefix}' must be followed by '/'")
        text = text[1:]
    parts: list[Part | _TimeRef] = []
    used_fields: set[int] = set()
    position = 0
    for match in _PLACEHOLDER.finditer(text):
        _append_literal(parts, text[position : match.start()], fail)
        position = match.end()
        name = match.group(1)
        keyed = bool(parts) and isinstance(parts[-1], Text) and parts[-1].text.endswith("=")
        if name in ("topic", "partition", "offset"):
            parts.append(Slot(SlotKind(name)))
        elif name == "ext":
            parts.append(Text(ext))
        elif name == "suffix":
            parts.append(Text(suffix))
        elif name in TIME_PLACEHOLDERS:
            if name not in times:
                times.append(name)
            parts.append(_TimeRef(name, keyed))
        elif name.startswith("field:"):
            index = _field_index(name[len("field:") :], fields, fail)
            used_fields.add(index)
            parts.append(Slot(SlotKind.FIELD, index, keyed))
        elif name == "prefix":
            raise fail("'{prefix}' may only open the template")
        else:
            known = ["topic", "partition", "offset", "ext", "suffix", "prefix",
                     *TIME_PLACEHOLDERS, "field:NAME"]  # fmt: skip
            close = difflib.get_close_matches(name, known, n=1)
            raise fail(
                f"unknown placeholder {{{name}}}",
                f"Did you mean {{{close[0]}}}?" if close else "Known: " + ", ".join(known),
            )
    _append_literal(parts, text[position:], fail)
    kinds = {p.kind for p in parts if isinstance(p, Slot)}
    for required in (SlotKind.TOPIC, SlotKind.PARTITION, SlotKind.OFFSET):
        if required not in kinds:
            raise fail(
                f"every key must contain the topic, partition and start offset; "
                f"{{{required.value}}} is missing",
                "Otherwise two partitions or two objects could get the same key",
            )
    if route.property("key.suffix") and "{suffix}" not in template:
        raise fail("'key.suffix' is set but the template has no {suffix}")
    _check_segments(parts, fail)
    _check_unambiguous(parts, route.naming, LayoutKind.TEMPLATE)
    unused = [spec for index, spec in enumerate(fields) if index not in used_fields]
    if unused:
        raise fail(
            f"PARTITIONBY {', '.join(spec.path for spec in unused)} not used",
            "Add {field:" + unused[0].name + "} or drop the field from PARTITIONBY",
        )
    return parts


def _append_literal(parts: list[Part | _TimeRef], literal: str, fail: _Fail) -> None:
    if not literal:
        return
    bad = sorted({c for c in literal if c not in _LITERAL_CHARS})
    if bad:
        raise fail(
            f"literal text may not contain {''.join(bad)!r}",
            "Use ASCII letters, digits and - _ . / = + ( ) ~ @ ! ,",
        )
    parts.append(Text(literal))


def _field_index(name: str, fields: tuple[FieldSpec, ...], fail: _Fail) -> int:
    by_path = [i for i, spec in enumerate(fields) if name in _paths(spec)]
    if by_path:
        return by_path[0]
    by_name = [i for i, spec in enumerate(fields) if name == spec.name]
    if len(by_name) == 1:
        return by_name[0]
    if by_name:
        paths = ", ".join(fields[i].path for i in by_name)
        raise fail(f"{{field:{name}}} is ambiguous ({paths})", "Name the field by its path")
    known = [spec.name for spec in fields] + [spec.path for spec in fields]
    close = difflib.get_close_matches(name, known, n=1)
    raise fail(
        f"{{field:{name}}} is not a PARTITIONBY field",
        f"Did you mean {{field:{close[0]}}}?" if close else
        "PARTITIONBY: " + (", ".join(spec.path for spec in fields) or "(none)"),
    )  # fmt: skip


def _paths(spec: FieldSpec) -> tuple[str, ...]:
    """The paths a template may name a field by: ``_value.a.b`` is also ``a.b``."""
    if spec.ref.source is Source.VALUE and spec.ref.path:
        return (spec.path, ".".join(spec.ref.path))
    return (spec.path,)


def _check_segments(parts: Sequence[Part | _TimeRef], fail: _Fail) -> None:
    """Reject empty segments and segments that start with ``.`` or ``_`` (hidden to Hadoop
    readers; ``.kafka-archive`` is the state's namespace)."""
    segment_start = True
    segment_empty = True
    for part in parts:
        if not isinstance(part, Text):
            segment_start = segment_empty = False
            continue
        for char in part.text:
            if char == "/":
                if segment_empty:
                    raise fail("empty path segment (a leading, trailing or double '/')")
                segment_start = segment_empty = True
                continue
            if segment_start and char in "._":
                raise fail(f"a path segment may not start with {char!r}",
                           "Readers such as Spark and Athena skip such paths")  # fmt: skip
            segment_start = segment_empty = False
    if segment_empty:
        raise fail("empty path segment (a leading, trailing or double '/')")


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
    parts: Sequence[Part | _TimeRef], naming: KeyNaming, kind: LayoutKind
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

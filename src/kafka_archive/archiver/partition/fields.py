"""Fields of one record: PARTITIONBY values (what :func:`~.keys.object_group` takes) and
SELECT projections.

A route's PARTITIONBY entries are compiled once into :class:`FieldReader` (cached per
route); reading a record parses its key, value or a header as JSON only when an entry looks
inside it, and at most once per record.

What a value becomes (before :mod:`~.values` makes it key-safe):

- a JSON string: the string; a number, ``true``/``false``: its JSON text (``42``, ``1.5``,
  ``true``); an object or array: its compact JSON text;
- JSON ``null``, a missing field, a missing header, a tombstone's value, a record without
  key: None — the record is kept, under the layout's missing-value segment;
- ``_key`` or ``_header.h`` without a path: the bytes as UTF-8 text (bytes that are not
  UTF-8 are kept reversibly as surrogate escapes, which the key encoding escapes as ``%XX``);
- ``_topic``, ``_partition``: the record's; ``_date.<pattern>``: the record time (the
  record timestamp, or the ``'partition.time.field'`` value), which the layout formats in
  the route's time zone.

A key, value or header that must be looked into but is not JSON makes the record
unroutable: :class:`~kafka_archive.archiver.formats.base.BadRecordError`, handled by the
error policy like any record the format cannot store.
"""

from __future__ import annotations

import datetime
import functools
import json
from collections.abc import Callable
from typing import Any

from kafka_archive.archiver.core import jsontext
from kafka_archive.archiver.core.errors import BadRecordError
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry, decoded
from kafka_archive.kcql.plan import FieldRef, Route, SelectField, Source

_MISSING = object()


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _scalar(value: Any) -> str | None:
    if value is None or value is _MISSING:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _walk(document: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        if not isinstance(document, dict) or name not in document:
            return _MISSING
        document = document[name]
    return document


class _Parsed:
    """The JSON documents of one record, parsed on first use."""

    __slots__ = ("_cache", "record", "registry")

    def __init__(self, record: Record, registry: SchemaRegistry | None = None) -> None:
        self.record = record
        self.registry = registry
        self._cache: dict[tuple[str, str], Any] = {}

    def json(self, part: str, name: str, data: bytes | None) -> Any:
        if data is None:
            return _MISSING
        slot = (part, name)
        if slot not in self._cache and part in ("v", "k"):
            framed, datum = decoded(self.registry, data)  # Confluent-framed Avro
            if framed:
                self._cache[slot] = datum
        if slot not in self._cache:
            try:
                self._cache[slot] = jsontext.loads(data)
            except (ValueError, UnicodeDecodeError):
                what = "value" if part == "v" else "key" if part == "k" else f"header {name!r}"
                raise BadRecordError(
                    f"the record's {what} is not JSON, so PARTITIONBY cannot read a field of it"
                ) from None
        return self._cache[slot]


def _header(record: Record, name: str) -> bytes | None:
    for key, value in record.headers:
        if key == name:
            return value
    return None


Extract = Callable[[_Parsed], Any]


def _extractor(ref: FieldRef) -> Extract:
    """A function from a parsed record to the raw value of ``ref`` (or ``MISSING``)."""
    path = ref.path
    if ref.source is Source.VALUE:
        if not path:
            return lambda p: p.json("v", "", p.record.value)
        return lambda p: _walk(p.json("v", "", p.record.value), path)
    if ref.source is Source.KEY:
        if not path:
            return lambda p: None if p.record.key is None else _text(p.record.key)
        return lambda p: _walk(p.json("k", "", p.record.key), path)
    if ref.source is Source.HEADER:
        name, inner = path[0], path[1:]
        if not inner:
            return lambda p: _optional_text(_header(p.record, name))
        return lambda p: _walk(p.json("h", name, _header(p.record, name)), inner)
    if ref.source is Source.TOPIC:
        return lambda p: p.record.topic
    if ref.source is Source.PARTITION:
        return lambda p: p.record.partition
    if ref.source is Source.OFFSET:
        return lambda p: p.record.offset
    # _date and _timestamp: the record time; the layout formats a _date pattern.
    return lambda p: p.record.timestamp


def _is_utf8(text: str) -> bool:
    """Whether ``text`` (decoded with surrogate escapes) came from valid UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _optional_text(data: bytes | None) -> str | None:
    return None if data is None else _text(data)


class Projector:
    """Applies a SELECT list: each record becomes ``{output name: raw JSON value}``.

    A missing field, a tombstone's value field or a record without key give None (JSON
    null). Raises BadRecordError where a field must be read from bytes that are not JSON.
    """

    def __init__(self, fields: tuple[SelectField, ...]) -> None:
        self._fields = tuple((f.output_name, _extractor(f.ref)) for f in fields)
        # `_key` and `_header.h` (no path) are the bytes as text: bytes that are not UTF-8
        # (kept as surrogate escapes for PARTITIONBY) cannot be a stored string.
        self._raw = {
            f.output_name: "key" if f.ref.source is Source.KEY else f"header {f.ref.path[0]!r}"
            for f in fields
            if (f.ref.source is Source.KEY and not f.ref.path)
            or (f.ref.source is Source.HEADER and len(f.ref.path) == 1)
        }

    def project(self, record: Record, registry: SchemaRegistry | None = None) -> dict[str, Any]:
        parsed = _Parsed(record, registry)
        out: dict[str, Any] = {}
        for name, extract in self._fields:
            value = extract(parsed)
            out[name] = None if value is _MISSING else value
        for name, what in self._raw.items():
            text = out[name]
            if isinstance(text, str) and not text.isascii() and not _is_utf8(text):
                raise BadRecordError(
                    f"the record's {what} is not UTF-8 text, which a SELECT field cannot "
                    "hold; use PROPERTIES('store.envelope'=true) to keep binary keys and headers"
                )
        return out


@functools.lru_cache(maxsize=256)
def projector_for(route: Route) -> Projector | None:
    """The (cached) projector of ``route``'s SELECT list; None for ``SELECT *``."""
    return None if route.fields is None else Projector(route.fields)


def epoch_ms(value: Any) -> int | None:
    """A record time read from a field: epoch milliseconds (a number, or digits), or an
    ISO-8601 date-time (``2026-11-23T10:00:00Z``; without an offset it is UTC). None for
    anything else, or a time outside the years 1 to 9999."""
    if isinstance(value, bool) or value is None or value is _MISSING:
        return None
    if isinstance(value, int | float):
        millis = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            millis = int(text)
        else:
            try:
                moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=datetime.UTC)
            millis = int(moment.timestamp() * 1000)
    else:
        return None
    return millis if _MIN_MS <= millis <= _MAX_MS else None


_MIN_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z
_MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


class FieldReader:
    """Reads a route's PARTITIONBY values, and its record time, from records.

    The record time is the record timestamp, or with ``time_field`` the value of that field
    (:func:`epoch_ms`); ``_date`` fields format it.
    """

    def __init__(self, fields: tuple[FieldRef, ...], time_field: FieldRef | None = None) -> None:
        self._time: Extract | None = None
        if time_field is not None:
            read = _extractor(time_field)
            self._time = lambda p: epoch_ms(read(p))
        self._extract = tuple(
            self._time if ref.source is Source.DATE and self._time is not None else _extractor(ref)
            for ref in fields
        )

    def place(
        self, record: Record, registry: SchemaRegistry | None = None
    ) -> tuple[tuple[str | None, ...], int | None]:
        """The record's raw PARTITIONBY values and its record time (epoch ms or None).

        Raises:
            BadRecordError: a field must be read from a key, value or header that is not JSON.
        """
        if self._time is None:
            return self.values(record, registry), record.timestamp
        parsed = _Parsed(record, registry)
        values = tuple(_scalar(extract(parsed)) for extract in self._extract)
        return values, self._time(parsed)

    def values(
        self, record: Record, registry: SchemaRegistry | None = None
    ) -> tuple[str | None, ...]:
        """The record's raw PARTITIONBY values, in PARTITIONBY order.

        Raises:
            BadRecordError: a field must be read from a key, value or header that is not JSON.
        """
        if not self._extract:
            return ()
        parsed = _Parsed(record, registry)
        return tuple(_scalar(extract(parsed)) for extract in self._extract)


@functools.lru_cache(maxsize=256)
def reader_for(route: Route) -> FieldReader:
    """The (cached) reader of ``route``'s PARTITIONBY values and record time."""
    return FieldReader(route.partition_by, route.layout.time_field)


def partition_values(
    route: Route, record: Record, registry: SchemaRegistry | None = None
) -> tuple[str | None, ...]:
    """The record's raw PARTITIONBY values for ``route``; see :class:`FieldReader`."""
    return reader_for(route).values(record, registry)

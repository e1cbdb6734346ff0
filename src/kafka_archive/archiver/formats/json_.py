"""STOREAS JSON: JSON Lines, one record value per line."""

from __future__ import annotations

import collections
import json
import operator
import threading
from collections.abc import Sequence
from itertools import repeat
from typing import Any, BinaryIO, cast

import simdjson

from kafka_archive.archiver.core import jsontext
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.base import BadRecordError, EncodedBatch
from kafka_archive.archiver.formats.envelope import to_json_document
from kafka_archive.archiver.formats.lines import LineWriter
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry, decoded
from kafka_archive.archiver.partition.fields import projector_for
from kafka_archive.kcql.plan import Route


class JsonWriter(LineWriter):
    """Writes each value as one line of JSON.

    A value that is already compact JSON on one line is copied as it is; a value spread over
    several lines is re-serialized compactly; a tombstone becomes ``null``. A value that is
    not JSON raises :class:`BadRecordError`.

    With a SELECT list, each line is the object of the selected fields under their names.
    With the envelope, each line is the record's envelope (:mod:`.envelope`): any key and
    value bytes can be stored, JSON or not.
    """

    def __init__(
        self, sink: BinaryIO, route: Route, registry: SchemaRegistry | None = None
    ) -> None:
        super().__init__(sink, route, registry)
        self._envelope = route.envelope if route.envelope.enabled else None
        self._projector = projector_for(route)

    def encode(self, record: Record) -> bytes:
        value = record.value
        document: Any
        if self._envelope is not None:
            document = to_json_document(record, self._envelope)
        elif self._projector is not None:
            document = self._projector.project(record, self._registry)
        elif (framed := decoded(self._registry, value))[0]:
            document = framed[1]
        else:
            return pass_through_line(value)
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def pass_through_line(value: bytes | None) -> bytes:
    """The JSON Lines line of a plain value: checked to be JSON, copied when compact."""
    if value is None:
        return b"null\n"
    try:
        jsontext.loads(value)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRecordError(f"value is not JSON ({type(exc).__name__})") from None
    if b"\n" in value or b"\r" in value:
        return json.dumps(json.loads(value), separators=(",", ":")).encode() + b"\n"
    return value.strip() + b"\n"


def encode_values(values: Sequence[bytes | None]) -> EncodedBatch:
    """The lines of a batch of plain values (no SELECT, envelope or registry), back to back.

    Raises :class:`BadRecordError` if any value is not JSON, before anything is written.
    The common batch (no tombstone, every value strict JSON with no line break and nothing
    to strip) is checked and joined with C-level passes and no Python step per value:
    simdjson validates each value (its strict JSON is a subset of what
    :func:`pass_through_line` accepts), each value and then the joined batch are searched
    for line breaks (memchr: an int needle, one buffer), and the values' first and last
    bytes for whitespace. Any other batch goes value by value
    through :func:`pass_through_line`, so the bytes written never depend on the path.
    """
    if values and None not in values:
        present = cast(Sequence[bytes], values)
        try:
            collections.deque(map(_parser().parse, present), maxlen=0)
            # Values a line each; the trailing empty value ends the last line.
            joined = b"\n".join([*present, b""])
            # The values' first and last bytes, gathered in C (half the cost of asking
            # each value startswith/endswith).
            edges = bytes(map(_FIRST, present)) + bytes(map(_LAST, present))
            clean = (
                not any(map(operator.contains, present, repeat(_NEWLINE)))
                and b"\r" not in joined
                and not any(map(edges.__contains__, _BLANK))
            )
        except Exception:  # not strict JSON (NaN, big integers, ...) or bytes-like values
            clean = False
        if clean:
            return EncodedBatch.framed(present, 1, joined)
    return EncodedBatch.of([pass_through_line(v) for v in values])


_NEWLINE = ord("\n")
# What bytes.strip() would remove from a value simdjson accepts without a line break.
_BLANK = (b" ", b"\t")
_FIRST, _LAST = operator.itemgetter(0), operator.itemgetter(-1)
_local = threading.local()


def _parser() -> simdjson.Parser:
    """This thread's simdjson parser (a parser holds one document; units run on threads)."""
    parser: simdjson.Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = simdjson.Parser()
    return parser

"""How ``cat`` prints a record: one JSON document per record (``--output jsonl``), or the
value's bytes as stored (``--output raw``).

The document, keys in this order::

    {"topic": "orders", "partition": 0, "offset": 42, "offset_exact": true,
     "timestamp": 1714999980000, "key": "k1", "key_encoding": "text",
     "headers": [["country", "DE", "text"], ["trace", null, null]],
     "value": {"id": 1}, "value_encoding": "json", "object": "archive/orders/0/…json"}

Every value that is Kafka bytes (an envelope's key, value and header values; a BYTES value)
is printed in the most readable form that gives the same bytes back, the envelope's rule
(:mod:`kafka_archive.archiver.formats.envelope`), and its ``*_encoding`` says which:

- ``json``: the bytes are UTF-8 JSON that serializes compactly to exactly the same bytes;
- ``text``: other UTF-8;
- ``base64``: anything else.

Values of the other formats print as the object holds them: ``json`` for JSON, and for AVRO
and PARQUET rows in their JSON form (bytes as base64, decimals and UUIDs as strings, dates
and times ISO-8601); ``text`` for TEXT; ``csv`` for a CSV row, as the list of its cells. The
line is strict JSON (RFC 8259: what jq, ``JSON.parse`` and strict parsers read): a value or
key whose JSON form holds NaN or ±Infinity, which strict JSON cannot write, prints as
``text`` instead, the JSON text it is stored as (``"{\"x\":NaN}"``), so its bytes still come
back exactly. ``null`` with a ``null`` encoding is no value: a tombstone, or a key or header
value that is absent. ``key`` and ``headers`` are ``null`` when the format does not keep
them (without the envelope); ``headers`` is a list of ``[name, value, encoding]``, in order,
so repeated names and values without bytes stay as they were. ``timestamp`` is milliseconds
since the epoch (envelope only). The document is deterministic: the same record always
prints the same line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.model import S3Requests, TopicPartition
from kafka_archive.archiver.formats import envelope as env
from kafka_archive.archiver.read import listing
from kafka_archive.archiver.read.committed import committed_view
from kafka_archive.archiver.read.seek import FoundRecord, find_records
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Format, Plan

JSON, TEXT, BASE64, CSV = env.JSON, env.TEXT, env.BASE64, "csv"

Headers = tuple[tuple[str, bytes | None], ...]


def _finite(value: Any) -> bool:
    """Whether strict JSON can hold ``value``: no NaN or ±Infinity at any depth."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def _bytes(data: bytes | None, strict: bool = False) -> tuple[Any, str | None]:
    if data is None:
        return None, None
    stored, encoding = env.encode_bytes(data)
    if strict and encoding == JSON and not _finite(stored):
        return data.decode("utf-8"), TEXT  # JSON bytes are UTF-8
    return stored, encoding


def _value(record: FoundRecord, strict: bool = False) -> tuple[Any, str | None]:
    stored = record.stored
    if stored.has_envelope or record.fmt is Format.BYTES:
        return _bytes(stored.raw, strict)
    content = stored.content
    if content is None:
        return None, None
    if record.fmt is Format.TEXT:
        return content, TEXT
    if record.fmt in (Format.CSV, Format.CSV_WITHHEADERS):
        return list(content), CSV
    if strict and not _finite(content) and stored.raw is not None:
        return stored.raw.decode("utf-8"), TEXT  # the stored line, or the row's JSON
    return content, JSON


def document(record: FoundRecord, *, strict: bool = False) -> dict[str, Any]:
    """The JSON document of one record (see the module doc); ``strict``: values whose JSON
    form strict JSON cannot hold (NaN, ±Infinity) as ``text``."""
    stored = record.stored
    key, key_encoding = _bytes(stored.key, strict)
    value, value_encoding = _value(record, strict)
    headers = (
        None
        if stored.headers is None
        else [[name, *_bytes(v, strict)] for name, v in stored.headers]
    )
    return {
        "topic": record.tp.topic,
        "partition": record.tp.partition,
        "offset": record.offset,
        "offset_exact": record.offset_exact,
        "timestamp": stored.timestamp,
        "key": key,
        "key_encoding": key_encoding,
        "headers": headers,
        "value": value,
        "value_encoding": value_encoding,
        "object": record.key,
    }


def to_jsonl(record: FoundRecord) -> str:
    """One line of ``cat --output jsonl``: strict JSON (see the module doc)."""
    try:
        return _line(document(record))
    except ValueError:  # NaN or ±Infinity somewhere: those values as their text
        return _line(document(record, strict=True))


def _line(doc: dict[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def raw(record: FoundRecord) -> bytes:
    """``cat --output raw``: the value's bytes as stored (nothing for a tombstone).

    The envelope and BYTES store the Kafka value itself; JSON and TEXT a line (without its
    line break); CSV a row (without its line break); AVRO and PARQUET a row, printed as
    compact JSON."""
    return record.stored.raw or b""


def parsed_bytes(value: Any, encoding: str | None) -> bytes | None:
    """The bytes a printed key, value or header value stands for (``None``: no bytes).

    Raises:
        ValueError: ``encoding`` is not json, text or base64, or ``value`` does not fit it.
    """
    if encoding is None:
        if value is not None:
            raise ValueError("a value without encoding must be null")
        return None
    return env.decode_bytes(value, encoding)


def parsed_headers(headers: list[list[Any]]) -> Headers:
    """The headers a printed ``headers`` list stands for."""
    return tuple((str(name), parsed_bytes(value, encoding)) for name, value, encoding in headers)


def cat(
    settings: Settings,
    plan: Plan | None,
    location: str,
    topic: str,
    partition: int,
    offset: int,
    count: int,
    output: str = "jsonl",
    spent: Callable[[S3Requests], None] | None = None,
) -> Iterator[bytes]:
    """Up to ``count`` archived records of a partition from ``offset`` on, rendered for
    ``output``: ``jsonl``, one JSON line each (:func:`to_jsonl`), or ``raw``, each value's
    bytes as stored. ``spent`` is told the S3 requests it sent, by type, once the last
    record is out.

    Without a plan the archive must use the default layout (its format is told by the
    objects' extension); with one, the route writing ``topic`` to ``location`` is used.
    """
    target = listing.parse_location(location)
    tp = TopicPartition(topic, partition)
    store = S3Store(settings.s3)
    route = listing.archived_route(store, plan, target, topic)
    view = committed_view(store, target)
    if view.from_log:  # the objects the log names: no listing
        committed, objects = view.partition_objects(store, route, tp)
        removed = tuple((r.first, r.last) for r in view.removed().get(tp, ()))
        found = find_records(
            store, route, tp, offset, count, committed=committed, objects=objects, removed=removed
        )
    else:
        committed = listing.committed_offsets(store, target).get(tp)
        found = find_records(store, route, tp, offset, count, committed=committed)
    for record in found:
        if output == "raw":
            yield raw(record)
        else:
            yield to_jsonl(record).encode("utf-8") + b"\n"
    if spent is not None:
        spent(store.requests.read())

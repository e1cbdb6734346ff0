"""The envelope (``PROPERTIES('store.envelope'=true)``): a stored record keeps its key,
value, headers and metadata, so that it can be restored into Kafka exactly.

In JSON a record is one line::

    {"key": "k1", "value": {"id": 1}, "headers": [{"name": "country", "value": "DE"}],
     "metadata": {"topic": "orders", "partition": 0, "offset": 42, "timestamp": 1714999980000},
     "encoding": {"key": "text"}}

Kafka keys, values and header values are bytes; each is stored in the most readable form
that gives the same bytes back, and ``encoding`` names every one that is not JSON:

- ``json`` (the default, not written): the bytes are UTF-8 JSON that serializes back to
  exactly the same bytes compactly (``{"id":1}``), stored as that JSON;
- ``text``: other UTF-8 (and the JSON ``null``, to tell it from a tombstone), stored as a
  string;
- ``base64``: anything else, stored as base64 text.

``null`` is a missing key, a tombstone or a header without value. Header encodings sit in
each header entry. Binary formats (AVRO, PARQUET) store the bytes themselves and need none
of this.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from kafka_archive.archiver.core.record import Record
from kafka_archive.kcql.plan import Envelope

JSON, TEXT, BASE64 = "json", "text", "base64"
KEYS = frozenset({"key", "value", "headers", "metadata", "encoding"})

Headers = tuple[tuple[str, bytes | None], ...]


class EnvelopeError(ValueError):
    """A stored envelope is not one this module writes."""


def encode_bytes(data: bytes) -> tuple[Any, str]:
    """The stored form of ``data`` and its encoding (see the module doc)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), BASE64
    try:
        parsed = json.loads(text)
    except ValueError:
        return text, TEXT
    # JSON null is stored as text: a stored null means no bytes at all (a tombstone).
    if parsed is not None and json.dumps(parsed, separators=(",", ":"), ensure_ascii=False) == text:
        return parsed, JSON
    return text, TEXT


def decode_bytes(stored: Any, encoding: str) -> bytes:
    """The bytes :func:`encode_bytes` stored as ``stored`` with ``encoding``."""
    if encoding == JSON:
        return json.dumps(stored, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    if not isinstance(stored, str):
        raise EnvelopeError(f"a {encoding} field must be a string")
    if encoding == TEXT:
        return stored.encode("utf-8")
    if encoding == BASE64:
        try:
            return base64.b64decode(stored, validate=True)
        except binascii.Error:
            raise EnvelopeError("a base64 field is not base64") from None
    raise EnvelopeError(f"unknown encoding {encoding!r}")


def to_json_document(record: Record, envelope: Envelope) -> dict[str, Any]:
    """The JSON envelope of ``record`` (only the parts ``envelope`` keeps)."""
    document: dict[str, Any] = {}
    encoding: dict[str, str] = {}
    for part, data in (("key", record.key), ("value", record.value)):
        if not getattr(envelope, part):
            continue
        if data is None:
            document[part] = None
        else:
            document[part], enc = encode_bytes(data)
            if enc != JSON:
                encoding[part] = enc
    if envelope.headers:
        entries = []
        for name, data in record.headers:
            entry: dict[str, Any] = {"name": name, "value": None}
            if data is not None:
                entry["value"], enc = encode_bytes(data)
                if enc != JSON:
                    entry["encoding"] = enc
            entries.append(entry)
        document["headers"] = entries
    if envelope.metadata:
        document["metadata"] = {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
        }
    if encoding:
        document["encoding"] = encoding
    return document


def is_json_envelope(document: Any) -> bool:
    """Whether a JSON line holds an envelope (its keys are envelope keys, with metadata)."""
    return (
        isinstance(document, dict)
        and "metadata" in document
        and set(document) <= KEYS
        and isinstance(document["metadata"], dict)
        and "offset" in document["metadata"]
    )


def from_json_document(document: dict[str, Any]) -> Record:
    """The record a JSON envelope holds; parts it does not keep come back empty.

    Raises:
        EnvelopeError: the document is not an envelope this module writes.
    """
    try:
        encoding = document.get("encoding") or {}
        parts: dict[str, bytes | None] = {}
        for part in ("key", "value"):
            stored = document.get(part)
            parts[part] = None if stored is None else decode_bytes(stored, encoding.get(part, JSON))
        headers = tuple(
            (
                str(entry["name"]),
                None
                if entry["value"] is None
                else decode_bytes(entry["value"], entry.get("encoding", JSON)),
            )
            for entry in document.get("headers") or ()
        )
        meta = document.get("metadata") or {}
        return Record(
            topic=str(meta.get("topic", "")),
            partition=int(meta.get("partition", -1)),
            # -1: no metadata kept ('store.envelope.fields.metadata'=false)
            offset=int(meta["offset"]) if "metadata" in document else -1,
            timestamp=None if meta.get("timestamp") is None else int(meta["timestamp"]),
            key=parts["key"],
            value=parts["value"],
            headers=headers,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, EnvelopeError):
            raise
        raise EnvelopeError(f"not an envelope ({type(exc).__name__})") from None


def comparable(record: Record, envelope: Envelope) -> tuple[Any, ...]:
    """What ``verify`` compares between Kafka and an envelope: the kept parts, as bytes."""
    return (
        record.key if envelope.key else None,
        record.value if envelope.value else None,
        record.headers if envelope.headers else None,
        record.timestamp if envelope.metadata else None,
    )

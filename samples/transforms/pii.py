"""A sample transform: drop personal data from JSON values before they are archived.

Use it with ``PROPERTIES('transform'='pii:drop_pii')``, running kafka-archive from this
directory (or with it on ``PYTHONPATH``; ``submit`` ships the module to the cluster):

    cd samples/transforms && kafka-archive run --kcql "INSERT INTO bkt:orders SELECT * \\
        FROM orders STOREAS JSON PROPERTIES('transform'='pii:drop_pii')" ...

Every record of a batch comes back: JSON objects without the fields named in
``PII_FIELDS`` (at any depth) and without the ``x-user-email`` header; other values (not
JSON, not an object, tombstones) unchanged. Records marked ``{"test": true}`` are dropped.
It depends on the record alone, so it is deterministic, as a transform must be.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from kafka_archive.archiver.core.record import Record

PII_FIELDS = frozenset({"email", "phone", "ssn", "card_number"})
PII_HEADERS = frozenset({"x-user-email"})


def drop_pii(records: list[Record]) -> list[Record]:
    out = []
    for record in records:
        value = _json_object(record.value)
        if value is None:
            out.append(_without_pii_headers(record))
            continue
        if value.get("test") is True:
            continue  # test traffic is not archived
        cleaned = json.dumps(_scrubbed(value), separators=(",", ":")).encode()
        out.append(_without_pii_headers(dataclasses.replace(record, value=cleaned)))
    return out


def _json_object(value: bytes | None) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _scrubbed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items() if k not in PII_FIELDS}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def _without_pii_headers(record: Record) -> Record:
    if not any(name in PII_HEADERS for name, _ in record.headers):
        return record
    headers = tuple((n, v) for n, v in record.headers if n not in PII_HEADERS)
    return dataclasses.replace(record, headers=headers)

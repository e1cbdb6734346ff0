"""Confluent wire-format Avro values, decoded with writer schemas from a Schema Registry.

A framed value is magic byte 0, a 4-byte big-endian schema id, then the Avro binary datum.
Schemas are fetched with a plain HTTP GET ``{url}/schemas/ids/{id}`` and cached for the life of
the process (an id names one schema forever).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

from fastavro import parse_schema, schemaless_reader
from fastavro.read import SchemaResolutionError

from kafka_archive.archiver.core.errors import (
    BadRecordError,
    ConfigError,
    SchemaRegistryUnavailableError,
)

MAGIC = 0
_TIMEOUT_SECONDS = 30
_CACHE: dict[tuple[str, int], tuple[Any, Any]] = {}
_LOCK = threading.Lock()


def schema_id(value: bytes | None) -> int | None:
    """The schema id of a Confluent-framed value, or None if the value is not framed."""
    if value is None or len(value) < 5 or value[0] != MAGIC:
        return None
    return int.from_bytes(value[1:5], "big")


class SchemaRegistry:
    """Fetches (once per process) the writer schemas of a Confluent Schema Registry."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def schema(self, ident: int) -> tuple[Any, Any]:
        """(the schema as JSON, the parsed schema) of ``ident``. Raises ConfigError (an id
        it does not know, an answer that is not a schema) or SchemaRegistryUnavailableError
        (not reached, a server error)."""
        key = (self.url, ident)
        with _LOCK:
            if key in _CACHE:
                return _CACHE[key]
        body = self._get(f"/schemas/ids/{ident}", f"schema id {ident}")
        try:
            raw = json.loads(body["schema"])
            parsed = parse_schema(raw)
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(
                f"cannot fetch schema id {ident} from the schema registry ({type(exc).__name__})",
                hint="Check --schema-registry-url / KAFKA_ARCHIVE_SCHEMA_REGISTRY_URL",
            ) from None
        with _LOCK:
            _CACHE[key] = (raw, parsed)
        return raw, parsed

    def subject_schema(self, subject: str, version: str | None = None) -> tuple[int, str]:
        """(schema id, the Avro schema's text) of ``subject``'s ``version`` (digits; None:
        the latest), from ``GET /subjects/{subject}/versions/{version}``. Raises ConfigError
        (no such subject or version, not an Avro schema) or SchemaRegistryUnavailableError."""
        which = f"subject {subject!r} version {version or 'latest'}"
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{version or 'latest'}"
        body = self._get(path, which)
        kind = body.get("schemaType", "AVRO")
        if kind != "AVRO":
            raise ConfigError(
                f"the schema registry's {which} is a {kind} schema, not an Avro one",
                hint="Name a subject with an Avro schema, or declare it with 'avro.schema.file'",
            )
        text, ident = body.get("schema"), body.get("id")
        if not isinstance(text, str) or not isinstance(ident, int):
            raise ConfigError(
                f"the schema registry's answer for {which} holds no schema",
                hint="Check --schema-registry-url / KAFKA_ARCHIVE_SCHEMA_REGISTRY_URL",
            )
        return ident, text

    def _get(self, path: str, what: str) -> dict[str, Any]:
        """The JSON object the registry answers ``GET {url}{path}`` with (``what``: what is
        asked, for messages). Raises ConfigError (4xx, not JSON) or
        SchemaRegistryUnavailableError (not reached, 5xx)."""
        try:
            with urllib.request.urlopen(f"{self.url}{path}", timeout=_TIMEOUT_SECONDS) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code >= 500:
                raise SchemaRegistryUnavailableError(
                    f"the schema registry answered HTTP {exc.code} for {what}",
                    hint="Check that it is up; the next run resumes from the last committed offset",
                ) from None
            raise ConfigError(
                f"the schema registry answered HTTP {exc.code} for {what}{_reason(exc)}",
                hint="Check --schema-registry-url / KAFKA_ARCHIVE_SCHEMA_REGISTRY_URL",
            ) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            # Not reached, or no answer in time: an outage (or a wrong host).
            raise SchemaRegistryUnavailableError(
                f"cannot reach the schema registry for {what} ({type(exc).__name__})",
                hint="Check that it is up and --schema-registry-url / "
                "KAFKA_ARCHIVE_SCHEMA_REGISTRY_URL; the next run resumes from the last "
                "committed offset",
            ) from None
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"cannot fetch {what} from the schema registry ({type(exc).__name__})",
                hint="Check --schema-registry-url / KAFKA_ARCHIVE_SCHEMA_REGISTRY_URL",
            ) from None
        if not isinstance(body, dict):
            raise ConfigError(
                f"the schema registry's answer for {what} is not a JSON object",
                hint="Check --schema-registry-url / KAFKA_ARCHIVE_SCHEMA_REGISTRY_URL",
            )
        return body

    def decode(self, value: bytes) -> tuple[int, Any, Any]:
        """(schema id, schema as JSON, datum) of a framed value. Raises BadRecordError."""
        ident = schema_id(value)
        if ident is None:
            raise BadRecordError("value is not in the Confluent Avro wire format")
        raw, parsed = self.schema(ident)
        try:
            datum = schemaless_reader(io.BytesIO(value[5:]), parsed, None)
        except (ValueError, EOFError, IndexError, UnicodeDecodeError) as exc:
            raise BadRecordError(
                f"value does not decode with schema id {ident} ({type(exc).__name__})"
            ) from None
        return ident, raw, datum

    def resolve(self, value: bytes, reader: int) -> Any | None:
        """The datum of a framed value read with the schema of id ``reader`` (Avro schema
        resolution: defaults for fields the writer lacked, promotions), or None when the
        writer schema does not resolve to it."""
        ident = schema_id(value)
        if ident is None:
            return None
        written = self.schema(ident)[1]
        wanted = self.schema(reader)[1]
        try:
            return schemaless_reader(io.BytesIO(value[5:]), written, wanted)
        except (SchemaResolutionError, ValueError, EOFError, IndexError, UnicodeDecodeError):
            return None


def _reason(exc: urllib.error.HTTPError) -> str:
    """The registry's own words for a refusal (``{"error_code": 40401, "message": "Subject
    not found."}``), or nothing."""
    try:
        body = json.loads(exc.read())
        message = str(body["message"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    return f": {message[:200]}" if message.isprintable() else ""


def jsonable(datum: Any) -> Any:
    """An Avro datum in its JSON form: bytes as base64 text, decimals and UUIDs as strings,
    dates and times ISO-8601 — what the JSON, AVRO and PARQUET writers store of it."""
    if isinstance(datum, dict):
        return {str(k): jsonable(v) for k, v in datum.items()}
    if isinstance(datum, list | tuple):
        return [jsonable(v) for v in datum]
    if isinstance(datum, bytes | bytearray):
        return base64.b64encode(bytes(datum)).decode("ascii")
    if isinstance(datum, decimal.Decimal | uuid.UUID):
        return str(datum)
    if isinstance(datum, dt.datetime | dt.date | dt.time):
        return datum.isoformat()
    return datum


def decoded(registry: SchemaRegistry | None, value: bytes | None) -> tuple[bool, Any]:
    """(True, the JSON form of the datum) for a framed value with a registry; else (False, None)."""
    if registry is None or schema_id(value) is None:
        return False, None
    assert value is not None
    return True, jsonable(registry.decode(value)[2])

"""User-given Avro schemas (``PROPERTIES('avro.schema.file'='orders.avsc')``, or a Schema
Registry subject: ``'avro.schema.subject'='orders-value'``).

The driver reads and checks each file once, before anything runs, and the schema's text
travels with the work units: executors on a cluster need not see the driver's files.
AVRO objects are written with the schema; PARQUET objects take their columns from it (in
the values' JSON form, as for Schema Registry values).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import fastavro
from fastavro import parse_schema
from fastavro.schema import SchemaParseException
from fastavro.validation import validate

from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.formats import schema as schemas
from kafka_archive.archiver.formats.base import BadRecordError
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry, jsonable
from kafka_archive.kcql.plan import Format, Plan

PROPERTY = "avro.schema.file"


def shipped_name(path: str) -> str:
    """The name under which ``kafka-archive submit`` ships the schema file ``path`` (as
    written in the KCQL) with ``--files``: a cluster-mode driver finds it in its working
    directory, wherever the file was on the submitting machine."""
    return f"kafka-archive-avsc-{hashlib.sha256(path.encode()).hexdigest()[:16]}.avsc"


def _source(path: str) -> Path:
    shipped = Path(shipped_name(path))
    return shipped if shipped.is_file() else Path(path).expanduser()


def load(plan: Plan) -> dict[int, str]:
    """Route index -> schema text, for every route that names a schema file (the copy
    ``submit`` shipped, when there is one in the working directory).

    Raises:
        ConfigError: a file cannot be read or is not an Avro schema.
    """
    texts: dict[int, str] = {}
    for index, route in enumerate(plan.routes):
        path = route.avro_schema_file
        if path is None:
            continue
        try:
            text = _source(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read the Avro schema {path} of the route for {route.topic}: "
                f"{exc.strerror or exc}",
                hint="'avro.schema.file' is read on the machine that runs kafka-archive "
                "(kafka-archive submit ships it to the cluster)",
            ) from None
        parsed(text, path)  # refuse a bad schema before anything runs
        if route.format is Format.PARQUET and columns(text) is None:
            raise ConfigError(
                f"the Avro schema {path} of the route for {route.topic} gives no fixed "
                "PARQUET columns: it must be a record, without maps or unions of several "
                "non-null types",
                hint="Use the schema for STOREAS AVRO, or simplify it for PARQUET",
            )
        texts[index] = text
    return texts


def load_subjects(plan: Plan, registry_url: str | None) -> dict[int, str]:
    """Route index -> schema text, for every route that names a Schema Registry subject
    (``avro.schema.subject``, its version or the latest), fetched once here, on the driver:
    the text then travels with the units as a file's does.

    Raises:
        ConfigError: no registry URL, a subject or version the registry does not have, or
            not an Avro schema (exit 2).
        SchemaRegistryUnavailableError: the registry cannot be reached (exit 25).
    """
    texts: dict[int, str] = {}
    for index, route in enumerate(plan.routes):
        subject = route.avro_schema_subject
        if subject is None:
            continue
        if not registry_url:
            raise ConfigError(
                f"the route for {route.topic} names the Schema Registry subject {subject!r} "
                "but no registry is set",
                hint="Set --schema-registry-url / KAFKA_ARCHIVE_SCHEMA_REGISTRY_URL",
            )
        _, text = SchemaRegistry(registry_url).subject_schema(subject, route.avro_schema_version)
        source = f"the schema of subject {subject!r}"
        parsed(text, source)
        if route.format is Format.PARQUET and columns(text) is None:
            raise ConfigError(
                f"{source} (route for {route.topic}) gives no fixed PARQUET columns: it must "
                "be a record, without maps or unions of several non-null types",
                hint="Use the subject for STOREAS AVRO, or declare a simpler schema",
            )
        texts[index] = text
    return texts


def declared(plan: Plan, registry_url: str | None) -> dict[int, str]:
    """Route index -> the text of its declared schema: its file's (:func:`load`) or its
    subject's (:func:`load_subjects`)."""
    return {**load(plan), **load_subjects(plan, registry_url)}


@functools.lru_cache(maxsize=32)
def parsed(text: str, source: str = "avro.schema.file") -> Any:
    """The parsed schema of ``text``. Raises ConfigError when it is not an Avro schema."""
    try:
        return parse_schema(json.loads(text))
    except (ValueError, SchemaParseException, TypeError, KeyError, AttributeError) as exc:
        raise ConfigError(
            f"{source} is not an Avro schema ({type(exc).__name__}: {exc})",
            hint="Check it with any Avro tool; a .avsc holds one JSON schema",
        ) from None


@functools.lru_cache(maxsize=32)
def columns(text: str) -> schemas.Type | None:
    """The PARQUET columns of values written with schema ``text`` (their JSON form), or
    None when the schema has no fixed JSON shape (see :func:`.schema.from_avro`)."""
    return schemas.from_avro(json.loads(text))


def conformed(value: Any, text: str) -> Any:
    """``value`` as the schema ``text`` stores it, in JSON form: missing fields take the
    schema's defaults, fields the schema lacks are dropped, an int in a double becomes a
    float, logical types come back as text (dates, decimals, UUIDs).

    Raises:
        BadRecordError: the value does not match the schema.
    """
    schema_ = parsed(text)
    check(value, schema_)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema_, value)
    out.seek(0)
    return jsonable(fastavro.schemaless_reader(out, schema_, None))


def check(value: Any, schema_: Any) -> None:
    """Refuse a value that does not match the parsed schema of an 'avro.schema.file'.

    Raises:
        BadRecordError: a missing field, or a field of another type.
    """
    if not validate(value, schema_, raise_errors=False):
        raise BadRecordError(
            "the value does not match the schema of 'avro.schema.file' (a missing field, "
            "or a field of another type)"
        )

"""User-given Avro schemas (``PROPERTIES('avro.schema.file'='orders.avsc')``).

The driver reads and checks each file once, before anything runs, and the schema's text
travels with the work units: executors on a cluster need not see the driver's files.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from fastavro import parse_schema
from fastavro.schema import SchemaParseException

from kafka_archive.archiver.errors import ConfigError
from kafka_archive.kcql.plan import Plan

PROPERTY = "avro.schema.file"


def load(plan: Plan) -> dict[int, str]:
    """Route index -> schema text, for every route that names a schema file.

    Raises:
        ConfigError: a file cannot be read or is not an Avro schema.
    """
    texts: dict[int, str] = {}
    for index, route in enumerate(plan.routes):
        path = route.property(PROPERTY)
        if path is None:
            continue
        try:
            text = Path(path).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read the Avro schema {path} of the route for {route.topic}: "
                f"{exc.strerror or exc}",
                hint="'avro.schema.file' is read on the machine that runs kafka-archive",
            ) from None
        parsed(text, path)  # refuse a bad schema before anything runs
        texts[index] = text
    return texts


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

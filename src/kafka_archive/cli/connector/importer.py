"""``kafka-archive import-connector``: an existing Kafka Connect S3 sink configuration (Lenses
stream-reactor or Confluent) as the equivalent kafka-archive config file.

Every setting is either carried over (into KCQL or a run option) or named in a warning that
says why not — nothing is dropped silently. Credentials are never carried over: kafka-archive
takes them only from the AWS credential chain. The KCQL produced is parsed before it is
returned, so an import never yields a config that ``run`` would refuse for its syntax.

Each sink has its module (:mod:`.lenses`, :mod:`.confluent`); what they share is
:mod:`.common`; a connect-standalone file is read by :mod:`.properties`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from kafka_archive import kcql
from kafka_archive.cli.connector.common import Imported, ImportError_
from kafka_archive.cli.connector.confluent import confluent
from kafka_archive.cli.connector.lenses import lenses
from kafka_archive.cli.connector.properties import parse_properties

__all__ = ["ImportError_", "Imported", "convert", "load"]


def load(text: str) -> dict[str, str]:
    """The connector settings from a Connect REST body: ``{"name", "config": {…}}`` or the
    bare config object; or from a Java ``.properties`` file, as connect-standalone takes
    them (any text that does not start with ``{``)."""
    if not text.lstrip().startswith(("{", "[")):
        settings = parse_properties(text)
        if not settings:
            raise ImportError_("neither a JSON connector config nor a .properties file")
        return settings
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ImportError_(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ImportError_("expected a JSON object of connector settings")
    settings = document.get("config", document)
    if not isinstance(settings, dict):
        raise ImportError_("'config' must be an object of settings")
    out = {str(k): str(v) for k, v in settings.items()}
    if "name" in document and "name" not in out:
        out["name"] = str(document["name"])
    return out


def convert(settings: Mapping[str, str]) -> Imported:
    """Lenses when ``connect.s3.kcql`` is set, Confluent when ``s3.bucket.name`` is."""
    if "connect.s3.kcql" in settings:
        result = lenses(dict(settings))
    elif "s3.bucket.name" in settings:
        result = confluent(dict(settings))
    else:
        raise ImportError_(
            "neither a Lenses S3 sink (connect.s3.kcql) nor a Confluent S3 sink "
            "(s3.bucket.name) configuration"
        )
    statements = result.config.get("kcql", [])
    try:
        kcql.parse(";\n".join(statements))
    except kcql.KcqlError as exc:
        raise ImportError_(f"the converted KCQL is not valid: {exc}") from None
    return result

"""What every Kafka Connect S3 sink's settings have in common: the result (:class:`Imported`),
the framework's settings (name, topics, tasks, converters, credentials, the Kafka client's,
``errors.*``), the warning for whatever is left, and the rewrite of each converted
statement's PROPERTIES.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from kafka_archive import kcql
from kafka_archive.archiver.config.secrets import has_userinfo, is_secret, strip_userinfo
from kafka_archive.kcql.render import render

# Connect framework settings that need no counterpart (one Spark task per partition, Kafka
# read by librdkafka, values read as bytes).
_CONNECT_NOISE = {
    "connector.class",
    "key.converter",
    "value.converter",
    "header.converter",
    "key.converter.schemas.enable",
    "value.converter.schemas.enable",
    "value.converter.schema.registry.url",
    "key.converter.schema.registry.url",
    "errors.log.enable",
    "errors.log.include.messages",
    "storage.class",
    "schema.generator.class",
    "locale",
}

# Properties of a connector's Kafka consumer that librdkafka takes under the same name.
_KAFKA_CARRIED = {"security.protocol", "sasl.mechanism"}

Properties = tuple[tuple[str, str], ...]


class ImportError_(ValueError):  # ImportError is a builtin
    """The connector configuration cannot be read or converted."""


@dataclass
class Imported:
    """The config file to write, and what could not be carried over."""

    config: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def yaml(self) -> str:
        return yaml.safe_dump(self.config, sort_keys=False, width=1_000_000, allow_unicode=True)


def carry_common(settings: dict[str, str], result: Imported) -> None:
    """The connector's name (as the job name), topics, Schema Registry, tasks, framework
    noise, credentials (left out, said where they go) and Kafka client properties."""
    name = settings.pop("name", None)
    if name:
        job = re.sub(r"[^A-Za-z0-9._-]", "-", name).lstrip("._-")[:128]
        if job:
            result.config["job_name"] = job
    if settings.get("topics", "").strip() and settings.get("topics.regex", "").strip():
        # Connect's SinkConnectorConfig.validate refuses a connector with both.
        raise ImportError_(
            "topics and topics.regex are both set: Kafka Connect refuses such a connector "
            "(keep one)"
        )
    for key in ("topics", "topics.regex"):
        if key in settings:
            result.config[key.replace(".", "_")] = settings.pop(key)
    _registry(settings, result)
    tasks = settings.pop("tasks.max", None)
    if tasks is not None:
        result.warnings.append(
            f"tasks.max={tasks}: not needed; a run has one Spark task per "
            "topic-partition (use --master for more cores)"
        )
    for key in sorted(settings):
        if key in _CONNECT_NOISE:
            settings.pop(key)
        elif is_secret(key):
            settings.pop(key)
            result.warnings.append(f"{key}: credentials are not carried over; {_where(key)}")
        elif _kafka_property(key) in _KAFKA_CARRIED:
            # The connector's own Kafka client (a worker that allows overrides): librdkafka
            # reads these under the same names.
            kafka = result.config.setdefault("kafka", {})
            kafka[_kafka_property(key)] = settings.pop(key)


def _kafka_property(key: str) -> str:
    """``consumer.override.x`` (the connector's consumer, where the worker allows overrides)
    as the client property ``x``; other keys as they are."""
    return key.removeprefix("consumer.override.")


def _where(key: str) -> str:
    """Where a credential the import leaves out goes instead, by what it is for."""
    if key.startswith("consumer.") or key.startswith(("sasl.", "ssl.")):
        return (
            "put the Kafka client's credentials in the config file's kafka: section as "
            "librdkafka properties (sasl.username, sasl.password, ssl.key.password; the file "
            "mode 0600)"
        )
    if "converter" in key or "schema.registry" in key:
        return (
            "the Schema Registry's go in schema_registry_url as https://user:password@host "
            "in the config file (mode 0600)"
        )
    return "kafka-archive uses the AWS credential chain (environment, profile, role)"


def _registry(settings: dict[str, str], result: Imported) -> None:
    """The value converter's Schema Registry: values in Confluent's Avro wire format are
    decoded with it (--schema-registry-url); other registry formats stay bytes."""
    url = settings.pop("value.converter.schema.registry.url", None)
    converter = settings.get("value.converter", "")
    if url is None:
        return
    if not converter.endswith(".AvroConverter"):
        result.warnings.append(
            f"value.converter={converter}: values in its Schema Registry wire format are "
            "archived as bytes (only Avro is decoded): use STOREAS BYTES or the envelope"
        )
        return
    if has_userinfo(url):
        result.warnings.append(
            "value.converter.schema.registry.url: its user:password@ is not carried over; "
            "put the URL with them in the config file yourself (mode 0600)"
        )
        url = strip_userinfo(url)
    result.config["schema_registry_url"] = url


def warn_rest(settings: dict[str, str], result: Imported) -> None:
    """One warning for each setting left: nothing is dropped silently."""
    for key in sorted(settings):
        value = settings[key]
        shown = value if value.isprintable() else repr(value)  # one warning, one line
        result.warnings.append(f"{key}={shown}: not carried over (no equivalent)")


def carry_tolerance(settings: dict[str, str], props: dict[str, str], result: Imported) -> None:
    """Connect's ``errors.tolerance=all`` (records that fail conversion are dropped, or sent
    to ``errors.deadletterqueue.topic.name``) as the route's error policy, said aloud."""
    tolerance = settings.pop("errors.tolerance", None)
    queue = settings.pop("errors.deadletterqueue.topic.name", "").strip()
    for key in [k for k in settings if k.startswith("errors.deadletterqueue.")]:
        settings.pop(key)
    if tolerance != "all":
        return
    if queue:
        props["error.policy"] = "'dead-letter'"
        result.warnings.append(
            f"errors.deadletterqueue.topic.name={queue}: records that cannot be stored go to "
            "dead letters in S3 under the prefix (_dead-letter/), not to a Kafka topic "
            "('error.policy'='dead-letter')"
        )
    else:
        props["error.policy"] = "'skip'"
        result.warnings.append(
            "errors.tolerance=all: records that cannot be stored are skipped and counted "
            "('error.policy'='skip'), as Connect drops them; 'error.policy'='dead-letter' "
            "keeps them in S3 instead"
        )


def rewrite_properties(
    statements: list[str], change: Callable[[kcql.Route], Properties | None]
) -> None:
    """Each statement (of one route) re-rendered with the PROPERTIES ``change`` gives its
    route; where it gives None the text stays as it is. A statement that does not parse is
    left alone: the whole converted text is checked (and its error reported) later."""
    for i, statement in enumerate(statements):
        try:
            (route,) = kcql.parse(statement).routes
        except (kcql.KcqlError, ValueError):
            continue
        properties = change(route)
        if properties is not None:
            statements[i] = render(dataclasses.replace(route, properties=properties))

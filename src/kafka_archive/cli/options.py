"""The options several commands share, declared once, and what they become: the KCQL
(``--kcql``/``--config``) compiled into a Plan, the connection and job flags loaded into
Settings (config file < environment < flags).

``RUN_OPTIONS`` is the table of the options of ``run``, ``plan``, ``status``, ``verify``,
``restore`` (and, passed on, ``submit``); :func:`run_options` gives a command all of them as
one :class:`RunFlags`.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import click

from kafka_archive import kcql
from kafka_archive.archiver.commands import api
from kafka_archive.archiver.config.load import LoadedConfig, load_settings
from kafka_archive.archiver.core.errors import ConfigError


def kafka_properties(pairs: Sequence[str]) -> dict[str, str]:
    """``-X KEY=VALUE`` flags as librdkafka properties (the name stripped)."""
    props: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise click.UsageError(f"-X expects KEY=VALUE (a librdkafka property), got {pair!r}")
        props[name.strip()] = value
    return props


def spark_conf(items: Sequence[str], flag: str) -> list[tuple[str, str]]:
    """``--conf KEY=VALUE`` flags as Spark properties, in order."""
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=flag)
        out.append((key, value))
    return out


def load_config(config: Path | None, flags: dict[str, Any]) -> LoadedConfig:
    """Settings from the config file < environment < the flags given (not None)."""
    given = {k: v for k, v in flags.items() if v is not None}
    return load_settings(config, os.environ, given)


def compile_kcql(kcql_texts: Sequence[str], loaded: LoadedConfig) -> kcql.Plan:
    """The plan of the ``--kcql`` statements, else of the config file's ``kcql:``."""
    for text in kcql_texts:
        name = text.strip()
        if "\n" not in name and " " not in name and Path(name).is_file():
            raise ConfigError(
                f"--kcql takes KCQL statements, and {name!r} is a file",
                hint=f'Pass its text: --kcql "$(cat {name})", or list its statements under '
                "kcql: in a --config file",
            )
    if kcql_texts:
        return api.compile_plan(";\n".join(kcql_texts))
    if loaded.statements:
        return api.compile_plan(";\n".join(loaded.statements))
    raise ConfigError(
        "no KCQL statement given",
        hint='Pass --kcql "INSERT INTO bucket:prefix SELECT * FROM topic" or a --config file '
        "with a kcql: entry",
    )


kcql_option = click.option(
    "--kcql",
    "kcql_texts",
    multiple=True,
    metavar="TEXT",
    help="KCQL statement(s); repeatable, or several separated by ';'.",
)
archive_option = click.option(
    "--from",
    "location",
    required=True,
    metavar="BUCKET[:PREFIX]",
    help="Where the archive is (the INSERT INTO target).",
)
"""``--from`` of the commands that read our archive back (cat, restore)."""
config_option = click.option(
    "--config",
    type=click.Path(path_type=Path, dir_okay=False),
    help="YAML file with kcql: and any run option.",
)
report_option = click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the summary as JSON to this file, with the S3 requests by type and their "
    "estimated price.",
)
"""``--report FILE`` of every command but run (whose own says it is written on failure too):
status, verify, cat, compact, erase, expire (:func:`.output.write_report`)."""


@dataclass(frozen=True, slots=True)
class RunFlags:
    """The connection and job options shared by run, plan, status, verify, restore and
    submit, as given on the command line (None: not given)."""

    kcql_texts: tuple[str, ...]
    config: Path | None
    bootstrap_servers: str | None
    endpoint_url: str | None
    region: str | None
    master: str | None
    job_name: str | None
    kafka_properties: tuple[str, ...]
    schema_registry_url: str | None
    topics: str | None
    topics_regex: str | None

    def load(self, **more: Any) -> LoadedConfig:
        """Settings from the config file < environment < these flags (and ``more``)."""
        given = {f.name: getattr(self, f.name) for f in fields(self)}
        del given["kcql_texts"], given["config"]
        given["kafka_properties"] = kafka_properties(self.kafka_properties) or None
        return load_config(self.config, {**given, **more})

    def plan(self, loaded: LoadedConfig) -> kcql.Plan:
        return compile_kcql(self.kcql_texts, loaded)

    def given_plan(self, loaded: LoadedConfig) -> kcql.Plan | None:
        """The plan when KCQL was given (flags or config file), else None (cat, restore)."""
        return self.plan(loaded) if self.kcql_texts or loaded.statements else None


RUN_OPTIONS = (
    kcql_option,
    config_option,
    click.option(
        "--bootstrap-servers",
        metavar="HOST:PORT[,HOST:PORT]",
        help="Kafka brokers [env KAFKA_ARCHIVE_BOOTSTRAP_SERVERS].",
    ),
    click.option(
        "--endpoint-url",
        metavar="URL",
        help="S3-compatible endpoint; absent means AWS [env KAFKA_ARCHIVE_ENDPOINT_URL].",
    ),
    click.option("--region", help="S3 region [env KAFKA_ARCHIVE_REGION]."),
    click.option("--master", help="Spark master (default local[*]) [env KAFKA_ARCHIVE_MASTER]."),
    click.option(
        "--job-name",
        help="Names the archive state and the consumer group "
        "(default: derived from the topics and targets).",
    ),
    click.option(
        "-X",
        "kafka_properties",
        multiple=True,
        metavar="KEY=VALUE",
        help="librdkafka property, as kcat takes it (-X security.protocol=SASL_SSL); repeatable.",
    ),
    click.option(
        "--schema-registry-url",
        metavar="URL",
        help="Confluent Schema Registry: values in its Avro wire format are decoded "
        "with their writer schema [env KAFKA_ARCHIVE_SCHEMA_REGISTRY_URL].",
    ),
    click.option("--topics", metavar="T1,T2", help="FROM `*`: the topics to archive."),
    click.option(
        "--topics-regex",
        metavar="REGEX",
        help="FROM `*`: archive every topic whose whole name matches.",
    ),
)


def run_options(command: Callable[..., None]) -> Callable[..., None]:
    """Declare the shared options once; the command receives them as one ``flags``."""

    @functools.wraps(command)
    def with_flags(**params: Any) -> None:
        flags = RunFlags(**{f.name: params.pop(f.name) for f in fields(RunFlags)})
        command(flags, **params)

    wrapped: Callable[..., None] = with_flags
    for decorator in reversed(RUN_OPTIONS):
        wrapped = decorator(wrapped)
    return wrapped


def foreign_layout(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--layout`` and ``--layout-option``: an archive another sink wrote
    (:mod:`.commands.foreign`)."""
    command = click.option(
        "--layout-option",
        "layout_options",
        multiple=True,
        metavar="NAME=VALUE",
        help="With --layout: a property of the sink's connector that decides names or "
        "format (topics.dir, file.name.template, format.output.fields, ...); repeatable.",
    )(command)
    return click.option(
        "--layout",
        type=click.Choice(["confluent", "lenses", "aiven", "secor", "auto"]),
        help="Read an archive another sink wrote (auto: told by the object names).",
    )(command)

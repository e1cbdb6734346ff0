"""``import-connector``: a Kafka Connect S3 sink's configuration as our config file."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.cli import invocation
from kafka_archive.cli.connector import importer


@click.command(name="import-connector")
@click.argument("connector", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def import_connector(connector: Path) -> None:
    """Print the config file equivalent to a Lenses or Confluent S3 sink's config (the
    Connect REST JSON or a connect-standalone .properties file)."""
    try:
        imported = importer.convert(importer.load(connector.read_text(encoding="utf-8")))
    except importer.ImportError_ as exc:
        raise ConfigError(f"{connector}: {exc}") from None
    for warning in imported.warnings:
        invocation.current().say(f"warning: {warning}", logging.WARNING)
    click.echo(f"# kafka-archive config imported from {connector.name}")
    click.echo(imported.yaml(), nl=False)

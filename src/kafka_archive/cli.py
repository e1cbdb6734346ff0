"""The command line: parse flags, build Settings and a Plan, call the library, print.

``main`` maps every error family to one line on stderr and an exit code; a traceback is
shown only with ``--debug``.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from kafka_archive import __version__, kcql
from kafka_archive.archiver import api
from kafka_archive.archiver.errors import ArchiveError, ConfigError
from kafka_archive.archiver.settings import LoadedConfig, load_settings, require_bootstrap
from kafka_archive.summary import render_summary

EXIT_USAGE = 2
EXIT_INTERNAL = 1


class _StderrProgress:
    def step(self, message: str) -> None:
        click.echo(f"kafka-archive: {message}", err=True)


def _kafka_properties(pairs: Sequence[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise click.UsageError(f"-X expects KEY=VALUE (a librdkafka property), got {pair!r}")
        props[name.strip()] = value
    return props


def _load(config: Path | None, flags: dict[str, Any]) -> LoadedConfig:
    given = {k: v for k, v in flags.items() if v is not None}
    return load_settings(config, os.environ, given)


def _plan(kcql_texts: Sequence[str], loaded: LoadedConfig) -> kcql.Plan:
    if kcql_texts:
        return kcql.parse(";\n".join(kcql_texts), source="kcql")
    if loaded.statements:
        return kcql.parse(";\n".join(loaded.statements), source="kcql")
    raise ConfigError(
        "no KCQL statement given",
        hint="Pass --kcql \"INSERT INTO bucket:prefix SELECT * FROM topic\" or a --config file "
        "with a kcql: entry",
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kafka-archive")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
def cli(debug: bool) -> None:
    """Archive Kafka topics into S3 exactly once, driven by KCQL, run on Spark."""
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="kafka-archive: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("botocore", "boto3", "urllib3", "s3transfer", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


@cli.command()
@click.option("--kcql", "kcql_texts", multiple=True, metavar="TEXT",
              help="KCQL statement(s); repeatable, or several separated by ';'.")
@click.option("--config", type=click.Path(path_type=Path, dir_okay=False),
              help="YAML file with kcql: and any run option.")
@click.option("--bootstrap-servers", metavar="HOST:PORT[,HOST:PORT]",
              help="Kafka brokers [env KAFKA_ARCHIVE_BOOTSTRAP_SERVERS].")
@click.option("--endpoint-url", metavar="URL",
              help="S3-compatible endpoint; absent means AWS [env KAFKA_ARCHIVE_ENDPOINT_URL].")
@click.option("--region", help="S3 region [env KAFKA_ARCHIVE_REGION].")
@click.option("--master", help="Spark master (default local[*]) [env KAFKA_ARCHIVE_MASTER].")
@click.option("--job-name", help="Names the archive state and the consumer group "
              "(default: derived from the topics and targets).")
@click.option("-X", "kafka_properties", multiple=True, metavar="KEY=VALUE",
              help="librdkafka property, as kcat takes it; repeatable.")
def run(
    kcql_texts: tuple[str, ...],
    config: Path | None,
    bootstrap_servers: str | None,
    endpoint_url: str | None,
    region: str | None,
    master: str | None,
    job_name: str | None,
    kafka_properties: tuple[str, ...],
) -> None:
    """Archive every new record of the KCQL's topics to S3, then exit."""
    loaded = _load(
        config,
        {
            "bootstrap_servers": bootstrap_servers,
            "endpoint_url": endpoint_url,
            "region": region,
            "master": master,
            "job_name": job_name,
            "kafka_properties": _kafka_properties(kafka_properties) or None,
        },
    )
    plan = _plan(kcql_texts, loaded)
    require_bootstrap(loaded.settings, config)
    result = api.run(loaded.settings, plan, progress=_StderrProgress())
    click.echo(render_summary(result))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of raising (tests call this directly)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        cli.main(args=args, prog_name="kafka-archive", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("kafka-archive: aborted", err=True)
        return 130
    except kcql.KcqlError as exc:
        if debug:
            traceback.print_exc()
        click.echo(exc.render(), err=True)
        return EXIT_USAGE
    except ArchiveError as exc:
        if debug:
            traceback.print_exc()
        if exc.result is not None and exc.result.units:
            click.echo(render_summary(exc.result))
        click.echo(f"kafka-archive: error: {exc}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("kafka-archive: interrupted", err=True)
        return 130
    except Exception as exc:
        if debug:
            traceback.print_exc()
        click.echo(
            f"kafka-archive: internal error: {type(exc).__name__}: {exc} "
            "(run again with --debug for a traceback, and please report it)",
            err=True,
        )
        return EXIT_INTERNAL
    return 0


if __name__ == "__main__":
    sys.exit(main())

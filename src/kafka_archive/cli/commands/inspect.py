"""``status``, ``verify`` and ``cat``: what the archive holds, checked, and read back."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import click

from kafka_archive.archiver.commands import api
from kafka_archive.archiver.commands.verify import to_json as verify_json
from kafka_archive.archiver.config.load import require_bootstrap
from kafka_archive.archiver.core.model import NO_REQUESTS, S3Requests
from kafka_archive.cli import invocation
from kafka_archive.cli.commands import foreign
from kafka_archive.cli.options import (
    RunFlags,
    archive_option,
    compile_kcql,
    config_option,
    foreign_layout,
    kcql_option,
    load_config,
    report_option,
    run_options,
)
from kafka_archive.cli.output import (
    gap_line,
    render_status,
    render_verify,
    requests_lines,
    write_report,
)


@click.command()
@run_options
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--max-lag",
    type=click.IntRange(min=0),
    metavar="N",
    help="Exit 1 when any partition lags by more than N records (for cron alerts).",
)
@report_option
def status(flags: RunFlags, output: str, max_lag: int | None, report_path: Path | None) -> None:
    """Per partition: archived offset, Kafka end offset, lag, last commit, objects, bytes."""
    loaded = flags.load()
    plan = flags.plan(loaded)
    require_bootstrap(loaded.settings, flags.config)
    report = api.status(loaded.settings, plan)
    prices = loaded.settings.prices
    if output == "json":
        click.echo(json.dumps(report.to_json(prices), indent=2))
    else:
        click.echo(render_status(report, prices))
    write_report(report_path, "status", report.to_json(prices), report.s3_requests, prices)
    if report.refused:  # every row shown first; a re-created topic outweighs any lag
        raise report.refused[0]
    if max_lag is not None and report.max_lag > max_lag:
        invocation.current().say(
            f"lag {report.max_lag} exceeds --max-lag {max_lag}", logging.WARNING
        )
        raise click.exceptions.Exit(1)
    gaps = [row for row in report.partitions if row.lost]
    if max_lag is not None and gaps:  # records lost for good: worse than any lag
        invocation.current().say(gap_line(gaps[0]), logging.WARNING)
        raise click.exceptions.Exit(1)


@click.command()
@run_options
@click.option(
    "--offline",
    is_flag=True,
    help="Check the archive alone (objects, overlaps, state), without Kafka.",
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--from",
    "location",
    metavar="BUCKET[:PREFIX]",
    help="With --layout: where the other sink's archive is.",
)
@foreign_layout
@report_option
def verify(
    flags: RunFlags,
    offline: bool,
    output: str,
    location: str | None = None,
    layout: str | None = None,
    layout_options: tuple[str, ...] = (),
    report_path: Path | None = None,
) -> None:
    """Check that every archived record is in exactly one object and matches Kafka.

    Exits 0 when the archive is clean, 1 with every discrepancy listed when it is not.
    """
    if layout or location:  # an archive another sink wrote
        if not location:
            raise click.UsageError("--layout needs --from (where the archive is)")
        if report_path is not None:
            raise click.UsageError("--report is not written for another sink's archive")
        return foreign.verify(
            flags, foreign.spec(location, layout, layout_options), offline, output
        )
    loaded = flags.load()
    plan = flags.plan(loaded)
    if not offline:
        require_bootstrap(loaded.settings, flags.config)
    result = api.verify(
        loaded.settings, plan, offline=offline, progress=invocation.current().progress()
    )
    prices = loaded.settings.prices
    if output == "json":
        click.echo(json.dumps(verify_json(result, prices), indent=2))
    else:
        click.echo(render_verify(result, prices))
    write_report(report_path, "verify", verify_json(result, prices), result.s3_requests, prices)
    if result.refused:  # every partition reported first
        raise result.refused[0]
    if not result.clean:
        raise click.exceptions.Exit(1)


@click.command(name="cat")
@archive_option
@click.option("--topic", required=True)
@click.option("--partition", type=click.IntRange(min=0), required=True)
@click.option("--offset", type=click.IntRange(min=0), required=True)
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--output",
    type=click.Choice(["jsonl", "raw"]),
    default="jsonl",
    show_default=True,
    help="jsonl: one JSON document per record; raw: the "
    "values' bytes as stored, one after another.",
)
@kcql_option
@config_option
@click.option("--endpoint-url", metavar="URL", help="S3-compatible endpoint; absent means AWS.")
@click.option("--region", help="S3 region.")
@foreign_layout
@report_option
def cat_command(
    location: str,
    topic: str,
    partition: int,
    offset: int,
    count: int,
    output: str,
    kcql_texts: tuple[str, ...],
    config: Path | None,
    endpoint_url: str | None,
    region: str | None,
    layout: str | None = None,
    layout_options: tuple[str, ...] = (),
    report_path: Path | None = None,
) -> None:
    """Print archived records of one partition from an offset, as JSON lines or raw values."""
    loaded = load_config(config, {"endpoint_url": endpoint_url, "region": region})
    if layout:  # an archive another sink wrote
        if report_path is not None:
            raise click.UsageError("--report is not written for another sink's archive")
        given = foreign.spec(location, layout, layout_options)
        return foreign.cat(loaded, given, topic, partition, offset, count, output)
    plan = compile_kcql(kcql_texts, loaded) if kcql_texts or loaded.statements else None
    stdout = sys.stdout.buffer
    spent: list[S3Requests] = []
    records = 0
    for chunk in api.cat(  # one record a chunk
        loaded.settings, plan, location, topic, partition, offset, count, output, spent.append
    ):
        stdout.write(chunk)
        records += 1
    stdout.flush()
    requests, prices = spent[0] if spent else NO_REQUESTS, loaded.settings.prices
    for line in requests_lines(requests, prices):
        click.echo(line, err=True)  # stdout is the records
    summary = {"topic": topic, "partition": partition, "offset": offset, "records": records}
    write_report(report_path, "cat", summary, requests, prices)

"""``validate``, ``plan`` and ``run``: check the KCQL, show what a run would do, archive."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kafka_archive import kcql
from kafka_archive.archiver.commands import api
from kafka_archive.archiver.config.load import require_bootstrap
from kafka_archive.archiver.config.secrets import scrub
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.plan.naming import job_name_for
from kafka_archive.cli import invocation
from kafka_archive.cli.options import (
    RunFlags,
    compile_kcql,
    config_option,
    kcql_option,
    load_config,
    run_options,
)
from kafka_archive.cli.output import render_follow, render_plan, render_summary


@click.command()
@kcql_option
@config_option
def validate(kcql_texts: tuple[str, ...], config: Path | None) -> None:
    """Check KCQL: exit 0 when valid, 2 with the error pointed at when not."""
    plan = compile_kcql(kcql_texts, load_config(config, {}))
    click.echo(f"valid: {len(plan.routes)} statement(s)")


@click.command(name="plan")
@run_options
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format; json is a stable contract for scripts.",
)
def plan_command(flags: RunFlags, output: str) -> None:
    """Show the resolved plan and settings (with their sources), touching nothing."""
    loaded = flags.load()
    plan = flags.plan(loaded)
    settings = loaded.settings
    job = settings.job_name or job_name_for(plan)
    document = {**kcql.plan_to_dict(plan), "job": job, "settings": settings.redacted()}
    if output == "json":
        click.echo(json.dumps(document, indent=2, sort_keys=False))
        return
    click.echo(render_plan(document))


@click.command()
@run_options
@click.option(
    "--start",
    metavar="POSITION",
    help="Where a job with no state starts: earliest (default), latest, an ISO-8601 "
    "time, or group:<consumer-group> to adopt a group's offsets. Ignored once the "
    "job has state.",
)
@click.option(
    "--max-records-per-partition",
    type=int,
    metavar="N",
    help="Archive at most N offsets of each partition in this run (backfills).",
)
@click.option(
    "--until",
    metavar="TIME",
    help="Stop each partition before its first record at or after this ISO-8601 time.",
)
@click.option(
    "--allow-gaps",
    is_flag=True,
    default=None,
    help="Continue past records Kafka deleted before they were archived (the gap "
    "is still reported) instead of leaving those partitions and exiting 16.",
)
@click.option(
    "--follow", is_flag=True, help="Keep archiving in micro-batches until SIGTERM/SIGINT."
)
@click.option(
    "--poll-interval",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="With --follow: a micro-batch starts this often (at once after one that took longer).",
)
@click.option(
    "--shutdown-timeout",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="With --follow: how long a stop request waits for the current batch to "
    "commit before its Spark jobs are cancelled.",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the run summary as JSON to this file (also when the run fails).",
)
@click.option(
    "--metrics-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write Prometheus metrics (records, bytes, objects, lag, last run) to this "
    "file after the run, for node_exporter's textfile collector.",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    help="With --follow: serve /metrics, /health and a status page (/) on this port.",
)
@click.option(
    "--health-max-lag",
    type=click.IntRange(min=0),
    metavar="N",
    help="With --metrics-port: /health fails when a partition lags by more than N.",
)
@click.option(
    "--health-max-age",
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    help="With --metrics-port: /health fails when the last micro-batch is older "
    "(default: 3 poll intervals + 5 minutes).",
)
@click.option(
    "--reset-state",
    is_flag=True,
    help="Forget what this job archived and start over from --start (asks first).",
)
@click.option("--yes", is_flag=True, help="Do not ask before --reset-state.")
def run(
    flags: RunFlags,
    start: str | None,
    max_records_per_partition: int | None,
    until: str | None,
    allow_gaps: bool | None,
    follow: bool,
    poll_interval: float,
    shutdown_timeout: float,
    report_path: Path | None,
    metrics_file: Path | None,
    metrics_port: int | None,
    health_max_lag: int | None,
    health_max_age: float | None,
    reset_state: bool,
    yes: bool,
) -> None:
    """Archive every new record of the KCQL's topics to S3, then exit (or --follow)."""
    loaded = flags.load(
        start=start,
        max_records_per_partition=max_records_per_partition,
        until=until,
        allow_gaps=allow_gaps or None,
    )
    plan = flags.plan(loaded)
    settings = loaded.settings
    require_bootstrap(settings, flags.config)
    if reset_state:
        _reset_state(settings, plan, yes)
    if metrics_port is not None and not follow:
        raise click.UsageError(
            "--metrics-port serves a running --follow; for one run use --metrics-file"
        )
    if follow:
        options = api.FollowOptions(
            poll_interval, shutdown_timeout, metrics_port, health_max_lag, health_max_age
        )
        _follow(settings, plan, options)
        return
    outcome = api.run(settings, plan, progress=invocation.current().progress())
    error = None if outcome.error is None else scrub(str(outcome.error))
    api.write_outputs(settings, plan, outcome.result, error, report_path, metrics_file)
    _summarized(outcome, settings)


def _summarized(outcome: api.Outcome, settings: Settings) -> None:
    """The summary of what a batch committed; then the error that failed it, raised (one
    line on stderr from ``main``): a failed batch's summary only when it committed or found
    anything."""
    if outcome.error is None or outcome.result.units or outcome.result.gaps:
        click.echo(render_summary(outcome.result, settings.prices))
    outcome.unwrap()


def _reset_state(settings: Settings, plan: kcql.Plan, yes: bool) -> None:
    """``run --reset-state``: asks first (unless --yes), then forgets the job's state."""
    job = settings.job_name or job_name_for(plan)
    if not yes and not sys.stdin.isatty():
        raise click.UsageError(
            "--reset-state asks for confirmation; without a terminal to answer, pass --yes"
        )
    if not yes:
        click.confirm(
            f"Forget everything job {job} archived and start over? Objects stay; "
            "records may be archived again",
            abort=True,
            err=True,
        )
    deleted = api.reset_state(settings, plan)
    invocation.current().say(f"reset job {job} ({deleted} state object(s) deleted)")


def _follow(settings: Settings, plan: kcql.Plan, options: api.FollowOptions) -> None:
    """``run --follow``: each batch's summary as it commits, the totals once stopped."""
    here = invocation.current()
    totals = api.serve(
        settings,
        plan,
        options,
        progress=here.progress(),
        on_batch=lambda result: (
            click.echo(render_summary(result, settings.prices)) if result.records else None
        ),
        notify=here.say,
    )
    if totals.failed is not None:
        _summarized(totals.failed, settings)
    click.echo(render_follow(totals, settings.prices))

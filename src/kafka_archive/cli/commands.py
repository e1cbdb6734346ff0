"""The commands: parse flags, build Settings and a Plan, call the library, print.

``main`` maps every error family to one line on stderr and an exit code; a traceback is
shown only with ``--debug``.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import click

from kafka_archive import __version__, kcql
from kafka_archive.archiver.commands import api
from kafka_archive.archiver.commands.restore import RestoreFilter
from kafka_archive.archiver.commands.verify import to_json as verify_json
from kafka_archive.archiver.config.secrets import scrub
from kafka_archive.archiver.config.settings import LoadedConfig, load_settings, require_bootstrap
from kafka_archive.archiver.core.errors import ArchiveError, ConfigError, kafka_client_error
from kafka_archive.archiver.plan.naming import job_name_for
from kafka_archive.archiver.plan.start import parse_timestamp
from kafka_archive.archiver.spark.context import error_text, task_failure
from kafka_archive.cli.console import LiveProgress, LogProgress
from kafka_archive.cli.output import (
    gap_line,
    render_follow,
    render_plan,
    render_restore,
    render_status,
    render_summary,
    render_verify,
)

EXIT_USAGE = 2
EXIT_INTERNAL = 1


class _CurrentStderr:
    """sys.stderr as it is at each write: a live display swaps it to print above itself."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _progress() -> LogProgress:
    """A live display on a terminal (unless --quiet or --log-format json), else log lines."""
    root = click.get_current_context().find_root()
    if (root.obj or {}).get("live") and sys.stderr.isatty():
        from rich.console import Console

        return LiveProgress(Console(stderr=True))
    return LogProgress()


class _JsonFormatter(logging.Formatter):
    """One JSON object per line, for log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        exit_code = getattr(record, "exit_code", None)
        if exit_code is not None:
            line["exit_code"] = exit_code
        return json.dumps(line)


# --log-format json: the lines the CLI writes itself (the final error, warnings, notices)
# are JSON objects too, not only the log's (set by main and by the group's callback).
_json_lines = False


def _say(message: str, level: int = logging.INFO, exit_code: int | None = None) -> None:
    """One line on stderr: ``kafka-archive: message``, or under --log-format json one JSON
    object (its message may hold several lines, a KCQL error's)."""
    if _json_lines:
        record = logging.makeLogRecord(
            {
                "name": "kafka_archive",
                "levelno": level,
                "levelname": logging.getLevelName(level),
                "msg": message,
                "exit_code": exit_code,
            }
        )
        click.echo(_JsonFormatter().format(record), err=True)
    else:
        click.echo(f"kafka-archive: {message}", err=True)


def _json_requested(args: Sequence[str]) -> bool:
    """Whether the command line asks for --log-format json (read before click parses it, so
    that a usage error is a JSON line too)."""
    for index, arg in enumerate(args):
        if arg == "--log-format=json" or (
            arg == "--log-format" and args[index + 1 : index + 2] == ["json"]
        ):
            return True
    return False


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kafka-archive")
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.option("--quiet", is_flag=True, help="Only warnings and errors on stderr.")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one JSON object per log line, for log shippers.",
)
@click.pass_context
def cli(ctx: click.Context, debug: bool, quiet: bool, log_format: str) -> None:
    """Archive Kafka topics into S3 exactly once, driven by KCQL, run on Spark."""
    global _json_lines
    ctx.obj = {"live": not quiet and log_format == "text"}
    _json_lines = log_format == "json"
    handler = logging.StreamHandler(_CurrentStderr())
    text = logging.Formatter("kafka-archive: %(message)s")
    handler.setFormatter(_JsonFormatter() if log_format == "json" else text)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING if quiet else logging.INFO)
    for noisy in ("botocore", "boto3", "urllib3", "s3transfer", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # The driver's librdkafka lines: a refused connection logs one every 50 ms.
    logging.getLogger("kafka_archive.librdkafka").setLevel(
        logging.DEBUG if debug else logging.CRITICAL
    )
    if not debug:
        # py4j logs a failed call with its traceback (on the root logger), then raises it to
        # us: we report it, in one line.
        handler.addFilter(lambda record: "/py4j/" not in record.pathname.replace("\\", "/"))


_kcql_option = click.option(
    "--kcql",
    "kcql_texts",
    multiple=True,
    metavar="TEXT",
    help="KCQL statement(s); repeatable, or several separated by ';'.",
)
_config_option = click.option(
    "--config",
    type=click.Path(path_type=Path, dir_okay=False),
    help="YAML file with kcql: and any run option.",
)


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
        given["kafka_properties"] = _kafka_properties(self.kafka_properties) or None
        return _load(self.config, {**given, **more})

    def plan(self, loaded: LoadedConfig) -> kcql.Plan:
        return _plan(self.kcql_texts, loaded)

    def given_plan(self, loaded: LoadedConfig) -> kcql.Plan | None:
        """The plan when KCQL was given (flags or config file), else None (cat, restore)."""
        return self.plan(loaded) if self.kcql_texts or loaded.statements else None


_RUN_OPTIONS = (
    _kcql_option,
    _config_option,
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
        help="librdkafka property, as kcat takes it; repeatable.",
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


def _run_options(command: Callable[..., None]) -> Callable[..., None]:
    """Declare the shared options once; the command receives them as one ``flags``."""

    @functools.wraps(command)
    def with_flags(**params: Any) -> None:
        flags = RunFlags(**{f.name: params.pop(f.name) for f in fields(RunFlags)})
        command(flags, **params)

    wrapped: Callable[..., None] = with_flags
    for decorator in reversed(_RUN_OPTIONS):
        wrapped = decorator(wrapped)
    return wrapped


@cli.command()
@_kcql_option
@_config_option
def validate(kcql_texts: tuple[str, ...], config: Path | None) -> None:
    """Check KCQL: exit 0 when valid, 2 with the error pointed at when not."""
    plan = _plan(kcql_texts, _load(config, {}))
    click.echo(f"valid: {len(plan.routes)} statement(s)")


@cli.command(name="plan")
@_run_options
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


@cli.command()
@_run_options
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
    help="With --follow: serve /metrics and /health on this port.",
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
        _say(f"reset job {job} ({deleted} state object(s) deleted)")
    if metrics_port is not None and not follow:
        raise click.UsageError(
            "--metrics-port serves a running --follow; for one run use --metrics-file"
        )
    if follow:
        options = api.FollowOptions(
            poll_interval, shutdown_timeout, metrics_port, health_max_lag, health_max_age
        )
        totals = api.serve(
            settings,
            plan,
            options,
            progress=_progress(),
            on_batch=lambda result: click.echo(render_summary(result)) if result.records else None,
            notify=_say,
        )
        if totals.failed is not None:
            _summarized(totals.failed)
        click.echo(render_follow(totals))
        return
    outcome = api.run(settings, plan, progress=_progress())
    error = None if outcome.error is None else scrub(str(outcome.error))
    api.write_outputs(settings, plan, outcome.result, error, report_path, metrics_file)
    _summarized(outcome)


def _summarized(outcome: api.Outcome) -> None:
    """The summary of what a batch committed; then the error that failed it, raised (one
    line on stderr from ``main``): a failed batch's summary only when it committed or found
    anything."""
    if outcome.error is None or outcome.result.units or outcome.result.gaps:
        click.echo(render_summary(outcome.result))
    outcome.unwrap()


@cli.command()
@_run_options
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--max-lag",
    type=click.IntRange(min=0),
    metavar="N",
    help="Exit 1 when any partition lags by more than N records (for cron alerts).",
)
def status(flags: RunFlags, output: str, max_lag: int | None) -> None:
    """Per partition: archived offset, Kafka end offset, lag, last commit, objects, bytes."""
    loaded = flags.load()
    plan = flags.plan(loaded)
    require_bootstrap(loaded.settings, flags.config)
    report = api.status(loaded.settings, plan)
    if output == "json":
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        click.echo(render_status(report))
    if report.refused:  # every row shown first; a re-created topic outweighs any lag
        raise report.refused[0]
    if max_lag is not None and report.max_lag > max_lag:
        _say(f"lag {report.max_lag} exceeds --max-lag {max_lag}", logging.WARNING)
        raise click.exceptions.Exit(1)
    gaps = [row for row in report.partitions if row.lost]
    if max_lag is not None and gaps:  # records lost for good: worse than any lag
        _say(gap_line(gaps[0]), logging.WARNING)
        raise click.exceptions.Exit(1)


@cli.command()
@_run_options
@click.option(
    "--offline",
    is_flag=True,
    help="Check the archive alone (objects, overlaps, state), without Kafka.",
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def verify(flags: RunFlags, offline: bool, output: str) -> None:
    """Check that every archived record is in exactly one object and matches Kafka.

    Exits 0 when the archive is clean, 1 with every discrepancy listed when it is not.
    """
    loaded = flags.load()
    plan = flags.plan(loaded)
    if not offline:
        require_bootstrap(loaded.settings, flags.config)
    result = api.verify(loaded.settings, plan, offline=offline, progress=_progress())
    if output == "json":
        click.echo(json.dumps(verify_json(result), indent=2))
    else:
        click.echo(render_verify(result))
    if result.refused:  # every partition reported first
        raise result.refused[0]
    if not result.clean:
        raise click.exceptions.Exit(1)


@cli.command(name="cat")
@click.option(
    "--from",
    "location",
    required=True,
    metavar="BUCKET[:PREFIX]",
    help="Where the archive is (the INSERT INTO target).",
)
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
@_kcql_option
@_config_option
@click.option("--endpoint-url", metavar="URL", help="S3-compatible endpoint; absent means AWS.")
@click.option("--region", help="S3 region.")
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
) -> None:
    """Print archived records of one partition from an offset, as JSON lines or raw values."""
    loaded = _load(config, {"endpoint_url": endpoint_url, "region": region})
    plan = _plan(kcql_texts, loaded) if kcql_texts or loaded.statements else None
    stdout = sys.stdout.buffer
    for chunk in api.cat(loaded.settings, plan, location, topic, partition, offset, count, output):
        stdout.write(chunk)
    stdout.flush()


@cli.command()
@click.option(
    "--from",
    "location",
    required=True,
    metavar="BUCKET[:PREFIX]",
    help="Where the archive is (the INSERT INTO target).",
)
@click.option("--topic", required=True, help="The archived topic.")
@click.option("--to-topic", required=True, help="The existing topic to produce into.")
@click.option(
    "--partition-map",
    type=click.Choice(["same", "hash"]),
    default="same",
    show_default=True,
    help="same: each record to its original partition number; "
    "hash: the producer's partitioner, by key.",
)
@click.option("--from-offset", type=click.IntRange(min=0), help="First archived offset.")
@click.option("--to-offset", type=click.IntRange(min=0), help="Last archived offset.")
@click.option("--from-time", metavar="TIME", help="First record time (ISO-8601; envelope).")
@click.option("--to-time", metavar="TIME", help="Last record time (ISO-8601; envelope).")
@click.option(
    "--values-only", is_flag=True, help="Replay values alone from an archive without the envelope."
)
@click.option(
    "--max-records-per-partition",
    type=click.IntRange(min=1),
    metavar="N",
    help="Restore at most N records of each partition in this run (resumable).",
)
@_run_options
def restore(
    flags: RunFlags,
    location: str,
    topic: str,
    to_topic: str,
    partition_map: str,
    from_offset: int | None,
    to_offset: int | None,
    from_time: str | None,
    to_time: str | None,
    values_only: bool,
    max_records_per_partition: int | None,
) -> None:
    """Replay archived records into a Kafka topic, exactly once and resumably."""
    loaded = flags.load()
    plan = flags.given_plan(loaded)
    require_bootstrap(loaded.settings, flags.config)
    only = RestoreFilter(
        from_offset=from_offset,
        to_offset=to_offset,
        from_ms=parse_timestamp(from_time, "--from-time") if from_time else None,
        to_ms=parse_timestamp(to_time, "--to-time") if to_time else None,
    )
    result = api.restore(
        loaded.settings,
        plan,
        location,
        topic,
        to_topic,
        partition_map=partition_map,
        only=only,
        values_only=values_only,
        max_records=max_records_per_partition,
        progress=_progress(),
    )
    click.echo(render_restore(result))


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option(
    "--master",
    required=True,
    metavar="URL",
    help="spark://host:7077, yarn, k8s://https://host:443 or local[*].",
)
@click.option(
    "--deploy-mode", type=click.Choice(["client", "cluster"]), default="client", show_default=True
)
@click.option(
    "--conf", "confs", multiple=True, metavar="KEY=VALUE", help="A Spark property; repeatable."
)
@click.option("--num-executors", type=click.IntRange(min=1))
@click.option("--executor-memory", metavar="SIZE")
@click.option("--executor-cores", type=click.IntRange(min=1))
@click.option("--driver-memory", metavar="SIZE")
@click.option(
    "--archives",
    "archives",
    multiple=True,
    metavar="PATH#NAME",
    help="An archive unpacked on the cluster (a packed virtualenv); repeatable.",
)
@click.option(
    "--spark-submit",
    "spark_submit_path",
    metavar="PATH",
    help="spark-submit to use (default $SPARK_HOME/bin/spark-submit, else pyspark's).",
)
@click.option(
    "--print-command",
    is_flag=True,
    help="Print the spark-submit command (secrets redacted) instead of running it.",
)
@click.pass_context
def submit(
    ctx: click.Context,
    master: str,
    deploy_mode: str,
    confs: tuple[str, ...],
    num_executors: int | None,
    executor_memory: str | None,
    executor_cores: int | None,
    driver_memory: str | None,
    archives: tuple[str, ...],
    spark_submit_path: str | None,
    print_command: bool,
) -> None:
    """Run the same job as `run` on a Spark cluster; takes every option of `run`."""
    run_args = list(ctx.args)
    run_ctx = run.make_context("run", [*run_args, "--master", master])  # checks the options
    params = run_ctx.params
    if params.get("config") is None and not params.get("kcql_texts"):
        raise click.UsageError("give the job with --kcql or --config, as for run")
    plan = _plan(params["kcql_texts"], _load(params["config"], {}))  # KCQL errors first
    from kafka_archive.cli.cluster import shipping  # imported by the commands that use them only
    from kafka_archive.cli.cluster import submit as submitting

    spark = submitting.SparkOptions(
        master=master,
        deploy_mode=deploy_mode,
        conf=tuple(_pairs(confs, "--conf")),
        num_executors=num_executors,
        executor_memory=executor_memory,
        executor_cores=executor_cores,
        driver_memory=driver_memory,
        archives=archives,
        spark_submit=spark_submit_path,
    )
    zip_path = submitting.package_zip(submitting.cache_dir(os.environ))
    transform_files = shipping.transform_files(plan, submitting.cache_dir(os.environ))
    schemas = shipping.schema_files(plan, submitting.cache_dir(os.environ))
    if print_command:
        argv = submitting.command(
            spark, run_args, zip_path, os.environ, transform_files, files=schemas
        )
        click.echo(submitting.render(argv))
        return
    _say(f"submitting to {master} ({deploy_mode} mode)")
    with submitting.private_files(
        spark, run_args, zip_path, os.environ, transform_files, files=schemas
    ) as argv:
        code = submitting.submit(argv)
    if code != 0:
        ctx.exit(code)


def _pairs(items: Sequence[str], flag: str) -> list[tuple[str, str]]:
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=flag)
        out.append((key, value))
    return out


@cli.command(name="import-connector")
@click.argument("connector", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def import_connector(connector: Path) -> None:
    """Print the config file equivalent to a Lenses or Confluent S3 sink's config (the
    Connect REST JSON or a connect-standalone .properties file)."""
    from kafka_archive.cli.connector import importer

    try:
        imported = importer.convert(importer.load(connector.read_text(encoding="utf-8")))
    except importer.ImportError_ as exc:
        raise ConfigError(f"{connector}: {exc}") from None
    for warning in imported.warnings:
        _say(f"warning: {warning}", logging.WARNING)
    click.echo(f"# kafka-archive config imported from {connector.name}")
    click.echo(imported.yaml(), nl=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code instead of raising (tests call this directly)."""
    global _json_lines
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    _json_lines = _json_requested(args)
    try:
        # Without standalone mode click returns (not raises) the code of an Exit.
        code = cli.main(args=args, prog_name="kafka-archive", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        if not _json_lines:
            exc.show()
        else:
            _say(f"error: {exc.format_message()}", logging.ERROR, exc.exit_code)
        return exc.exit_code
    except click.Abort:
        _say("aborted", logging.ERROR, 130)
        return 130
    except kcql.KcqlError as exc:
        if debug:
            _print_traceback()
        if _json_lines:
            _say(exc.render(), logging.ERROR, EXIT_USAGE)
        else:
            click.echo(exc.render(), err=True)
        return EXIT_USAGE
    except ArchiveError as exc:
        return _failed(exc, debug)
    except KeyboardInterrupt:
        _say("interrupted", logging.ERROR, 130)
        return 130
    except Exception as exc:
        ours = task_failure(exc) or (
            kafka_client_error(exc) if type(exc).__name__ == "KafkaException" else None
        )
        if ours is not None:
            return _failed(ours, debug)
        if debug:
            _print_traceback()
        _say(
            scrub(
                f"internal error: {type(exc).__name__}: {error_text(exc)} "
                "(run again with --debug for a traceback, and please report it)"
            ),
            logging.ERROR,
            EXIT_INTERNAL,
        )
        return EXIT_INTERNAL
    return code if isinstance(code, int) else 0


def _print_traceback() -> None:
    """--debug: the traceback, with any secret value a message quotes replaced."""
    click.echo(scrub(traceback.format_exc()), err=True, nl=False)


def _failed(exc: ArchiveError, debug: bool) -> int:
    """One line on stderr (after the summary of what a failed run did commit: `_summarized`);
    secrets scrubbed."""
    if debug:
        _print_traceback()
    _say(scrub(f"error: {exc}"), logging.ERROR, exc.exit_code)
    return exc.exit_code

"""``compact``, ``erase``, ``expire``: archive maintenance (issue 38) on targets that keep a
commit log; ``export-states``: such a target back to partition states (issue 37)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import click

from kafka_archive.archiver.commands import compact as compacting
from kafka_archive.archiver.commands import erase as erasing
from kafka_archive.archiver.commands import export_states as exporting
from kafka_archive.archiver.commands.compact import CompactResult
from kafka_archive.archiver.config.positions import parse_timestamp
from kafka_archive.archiver.config.settings import S3Prices
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.plan.maintenance import DEFAULT_TARGET_SIZE
from kafka_archive.cli.options import RunFlags, report_option, run_options
from kafka_archive.cli.output import render_requests, write_report

_SIZE = re.compile(r"(\d+)\s*(B|KB|MB|GB|KIB|MIB|GIB)?", re.IGNORECASE)
_SIZE_UNITS = {
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d)?", re.IGNORECASE)
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_size(text: str) -> int:
    """``128MB``, ``64MiB``, ``1000000`` (bytes): a positive size in bytes."""
    found = _SIZE.fullmatch(text.strip())
    if found is None or int(found.group(1)) <= 0:
        raise click.BadParameter(
            f"expected a positive size such as 128MB or 64MiB, got {text!r}",
            param_hint="--target-size",
        )
    return int(found.group(1)) * _SIZE_UNITS[(found.group(2) or "B").upper()]


def parse_duration(text: str) -> float:
    """``90d``, ``12h``, ``30m``, ``45s`` or seconds: a duration in seconds."""
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise click.BadParameter(
            f"expected a duration such as 90d, 12h, 30m or 45s, got {text!r}",
            param_hint="--older-than",
        )
    return float(found.group(1)) * _DURATION_UNITS[(found.group(2) or "s").lower()]


@click.command()
@run_options
@click.option(
    "--target-size",
    default="128MB",
    show_default=True,
    metavar="SIZE",
    help="Merge consecutive objects of a partition into objects up to this size "
    "(B, KB, MB, GB, KiB, MiB, GiB).",
)
@click.option(
    "--older-than",
    metavar="DURATION",
    help="Leave alone each partition's objects from its first one written less than "
    "DURATION ago (7d, 12h, 30m, 45s): the still-growing end.",
)
@report_option
def compact(
    flags: RunFlags, target_size: str, older_than: str | None, report_path: Path | None
) -> None:
    """Merge small committed objects of an archive that keeps a commit log, exactly once.

    Needs no Kafka and no Spark. Exits 2 on a target without a commit log, 18 when a run
    of the same target claims it meanwhile.
    """
    size = parse_size(target_size) if target_size else DEFAULT_TARGET_SIZE
    age = parse_duration(older_than) if older_than else None
    loaded = flags.load()
    plan = flags.plan(loaded)
    settings = loaded.settings
    result = compacting.compact(settings, plan, compacting.CompactOptions(size, age))
    if not result.groups:
        click.echo("compact: nothing to compact")
    else:
        click.echo(
            f"compact: {result.partitions} partition(s), {result.groups} group(s) merged: "
            f"{result.objects_before} object(s) ({result.bytes_before:,} bytes) -> "
            f"{result.objects_after} object(s) ({result.bytes_after:,} bytes), "
            f"{result.entries} commit log entr{'y' if result.entries == 1 else 'ies'}"
        )
    _tail(result, settings.prices, "compact", report_path)


def _tail(result: CompactResult, prices: S3Prices, command: str, report: Path | None) -> None:
    """What every maintenance command shows after its summary, and its ``--report``."""
    if result.vacuumed:
        click.echo(f"vacuum: removed {result.vacuumed} object(s) no commit names")
    if result.s3_requests.total:
        click.echo(render_requests(result.s3_requests, prices))
    summary = {
        "partitions": result.partitions,
        "groups": result.groups,
        "entries": result.entries,
        "objects_before": result.objects_before,
        "objects_after": result.objects_after,
        "bytes_before": result.bytes_before,
        "bytes_after": result.bytes_after,
        "records_dropped": result.records_dropped,
        "vacuumed": result.vacuumed,
    }
    write_report(report, command, summary, result.s3_requests, prices)


def _removal(command: str, past: str, result: CompactResult) -> str:
    """erase's and expire's summary line."""
    if not result.groups:
        return f"{command}: nothing to {command}: no committed record matched"
    return (
        f"{command}: {result.records_dropped} record(s) {past} in {result.partitions} "
        f"partition(s): {result.objects_before} object(s) ({result.bytes_before:,} bytes) -> "
        f"{result.objects_after} object(s) ({result.bytes_after:,} bytes), "
        f"{result.entries} commit log entr{'y' if result.entries == 1 else 'ies'}"
    )


def read_keys(keys: tuple[str, ...], key_file: Path | None) -> list[bytes]:
    """``--key`` values and ``--key-file`` lines (blank lines skipped), as UTF-8 bytes."""
    found = [k.encode() for k in keys]
    if key_file is not None:
        try:
            text = key_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--key-file {key_file}: {exc}") from None
        found += [line.encode() for line in text.splitlines() if line.strip()]
    return found


@click.command()
@run_options
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="KEY",
    help="Erase every record of this key (repeatable; compared as UTF-8 text).",
)
@click.option(
    "--key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Erase every record of the keys in this file, one a line.",
)
@click.option(
    "--key-field",
    metavar="FIELD",
    help="The key is the stored value's field FIELD (a dotted path), for archives without "
    "the envelope.",
)
@report_option
def erase(
    flags: RunFlags,
    keys: tuple[str, ...],
    key_file: Path | None,
    key_field: str | None,
    report_path: Path | None,
) -> None:
    """Remove every record of some keys from an archive that keeps a commit log, exactly
    once; verify then names their offsets erased.

    Needs no Kafka and no Spark. Exits 2 on a target without a commit log or whose records
    carry no key (add --key-field), 18 when a run of the same target claims it meanwhile.
    """
    wanted = read_keys(keys, key_file)
    loaded = flags.load()
    plan = flags.plan(loaded)
    settings = loaded.settings
    result = erasing.erase(settings, plan, wanted, key_field)
    click.echo(_removal("erase", "erased", result))
    _tail(result, settings.prices, "erase", report_path)


@click.command()
@run_options
@click.option(
    "--before",
    metavar="TIME",
    help="Remove every record whose time is before TIME (ISO-8601, e.g. 2026-01-01).",
)
@click.option(
    "--older-than",
    metavar="DURATION",
    help="Remove every record older than DURATION (90d, 12h, 30m, 45s) by this machine's clock.",
)
@report_option
def expire(
    flags: RunFlags, before: str | None, older_than: str | None, report_path: Path | None
) -> None:
    """Remove every record older than a time from an archive that keeps a commit log,
    exactly once; verify and status then report the range as expired.

    Needs no Kafka and no Spark. Exits 2 on a target without a commit log or whose records
    carry no time, 18 when a run of the same target claims it meanwhile.
    """
    if (before is None) == (older_than is None):
        raise ConfigError("expire needs one of --before TIME or --older-than DURATION")
    cut_ms = (
        parse_timestamp(before, "--before")
        if before is not None
        else int((time.time() - parse_duration(older_than or "")) * 1000)
    )
    loaded = flags.load()
    plan = flags.plan(loaded)
    settings = loaded.settings
    result = erasing.expire(settings, plan, cut_ms)
    click.echo(_removal("expire", "expired", result))
    _tail(result, settings.prices, "expire", report_path)


@click.command("export-states")
@run_options
def export_states(flags: RunFlags) -> None:
    """Write the partition states of an archive that keeps a commit log back from its log,
    so that commit_protocol=states continues it exactly once: the downgrade.

    Needs no Kafka and no Spark. Exits 2 on a target without a commit log, or whose log
    holds what partition states cannot (offsets erase or expire removed; objects no commit
    names, until vacuum removes them); 8 while another run writes the target.
    """
    loaded = flags.load()
    plan = flags.plan(loaded)
    settings = loaded.settings
    result = exporting.export_states(settings, plan)
    click.echo(exporting.render(result))
    if result.s3_requests.total:
        click.echo(render_requests(result.s3_requests, settings.prices))

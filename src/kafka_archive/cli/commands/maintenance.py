"""``compact``: archive maintenance (issue 38) on targets that keep a commit log."""

from __future__ import annotations

import re

import click

from kafka_archive.archiver.commands import compact as compacting
from kafka_archive.archiver.plan.maintenance import DEFAULT_TARGET_SIZE
from kafka_archive.cli.options import RunFlags, run_options
from kafka_archive.cli.output import render_requests

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
            f"expected a duration such as 7d, 12h, 30m or 45s, got {text!r}",
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
def compact(flags: RunFlags, target_size: str, older_than: str | None) -> None:
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
    if result.vacuumed:
        click.echo(f"vacuum: removed {result.vacuumed} object(s) no commit names")
    if result.s3_requests.total:
        click.echo(render_requests(result.s3_requests, settings.prices))

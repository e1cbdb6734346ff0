"""``restore``: archived records replayed into a Kafka topic."""

from __future__ import annotations

import click

from kafka_archive.archiver.commands import api
from kafka_archive.archiver.commands.restore import RestoreFilter
from kafka_archive.archiver.config.load import require_bootstrap
from kafka_archive.archiver.config.positions import parse_timestamp
from kafka_archive.cli import invocation
from kafka_archive.cli.commands import foreign
from kafka_archive.cli.options import RunFlags, archive_option, foreign_layout, run_options
from kafka_archive.cli.output import render_restore


@click.command()
@archive_option
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
@foreign_layout
@run_options
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
    layout: str | None = None,
    layout_options: tuple[str, ...] = (),
) -> None:
    """Replay archived records into a Kafka topic, exactly once and resumably."""
    only = RestoreFilter(
        from_offset=from_offset,
        to_offset=to_offset,
        from_ms=parse_timestamp(from_time, "--from-time") if from_time else None,
        to_ms=parse_timestamp(to_time, "--to-time") if to_time else None,
    )
    if layout:  # an archive another sink wrote
        return foreign.restore(
            flags,
            foreign.spec(location, layout, layout_options),
            topic,
            to_topic,
            partition_map=partition_map,
            only=only,
            values_only=values_only,
            max_records=max_records_per_partition,
        )
    loaded = flags.load()
    plan = flags.given_plan(loaded)
    require_bootstrap(loaded.settings, flags.config)
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
        progress=invocation.current().progress(),
    )
    click.echo(render_restore(result, loaded.settings.prices))

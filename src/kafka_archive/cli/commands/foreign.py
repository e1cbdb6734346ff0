"""The CLI of foreign archives (``--layout``): ``cat``, ``verify`` and ``restore`` of an
archive another sink wrote, and ``adopt``, which takes one over for the next ``run``.

:mod:`.inspect` and :mod:`.restore` keep only the call sites; the options and the work
are here, in ``archiver/commands/{foreign,foreign_verify,adopt}.py`` and in
``archiver/read/foreign``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Sequence
from typing import Any

import click

from kafka_archive.archiver.commands import adopt as adopting
from kafka_archive.archiver.commands import foreign, foreign_verify
from kafka_archive.archiver.config.load import LoadedConfig, require_bootstrap
from kafka_archive.cli import invocation
from kafka_archive.cli.options import RunFlags, foreign_layout, run_options
from kafka_archive.cli.output import render_restore
from kafka_archive.kcql.plan import LayoutKind, Plan, Target


def spec(location: str, layout: str | None, pairs: Sequence[str]) -> foreign.ForeignSpec:
    """The foreign archive the options name."""
    options: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(
                f"expected NAME=VALUE, got {pair!r}", param_hint="--layout-option"
            )
        options[name.strip()] = value
    return foreign.ForeignSpec(
        location, None if layout in (None, "auto") else layout, tuple(sorted(options.items()))
    )


def configured(
    flags: RunFlags, loaded: LoadedConfig, given: foreign.ForeignSpec
) -> foreign.ForeignSpec:
    """``given`` with its layout taken from the KCQL (``--config`` from
    ``import-connector``, or ``--kcql``) when ``--layout`` was not given: the statement
    writing to the archive's bucket and prefix says which sink it continues, Confluent's
    (``'layout'='confluent'``) or Lenses' (``'flush.interval.time'='arrival'``, which
    ``import-connector`` sets on every Lenses statement). Otherwise the names tell."""
    if given.layout is not None or not (flags.kcql_texts or loaded.statements):
        return given
    return dataclasses.replace(given, layout=layout_of(flags.plan(loaded), given.target))


def layout_of(plan: Plan, target: Target) -> str | None:
    """The sink whose archive a statement of ``plan`` writing to ``target`` continues."""
    for route in plan.routes:
        if route.target != target:
            continue
        if route.layout.kind is LayoutKind.CONFLUENT:
            return "confluent"
        if route.layout.kind is LayoutKind.LENSES and not route.flush.interval_by_record_time:
            return "lenses"
    return None


def cat(
    loaded: LoadedConfig,
    given: foreign.ForeignSpec,
    topic: str,
    partition: int,
    offset: int,
    count: int,
    output: str,
) -> None:
    stdout = sys.stdout.buffer
    for chunk in foreign.cat(loaded.settings, given, topic, partition, offset, count, output):
        stdout.write(chunk)
    stdout.flush()


def verify(flags: RunFlags, given: foreign.ForeignSpec, offline: bool, output: str) -> None:
    loaded = flags.load()
    if not offline:
        require_bootstrap(loaded.settings, flags.config)
    given = configured(flags, loaded, given)
    topics = {t.strip() for t in flags.topics.split(",")} if flags.topics else None
    result = foreign_verify.verify(loaded.settings, given, topics, offline=offline)
    if output == "json":
        click.echo(json.dumps(foreign_verify.verify_json(result), indent=2))
    else:
        click.echo(foreign_verify.render_verify(result))
    if not result.clean:
        raise click.exceptions.Exit(1)


def restore(
    flags: RunFlags, given: foreign.ForeignSpec, topic: str, to_topic: str, **kw: Any
) -> None:
    loaded = flags.load()
    require_bootstrap(loaded.settings, flags.config)
    given = configured(flags, loaded, given)
    result = foreign.restore(
        loaded.settings, given, topic, to_topic, progress=invocation.current().progress(), **kw
    )
    click.echo(render_restore(result))


@click.command()
@click.option(
    "--from",
    "location",
    metavar="BUCKET[:PREFIX]",
    help="Where the other sink's archive is (default: the target of the KCQL, when there "
    "is one: the run then writes on beside the sink's objects).",
)
@foreign_layout
@click.option(
    "--group",
    metavar="GROUP",
    help="The connector's consumer group (connect-<name>), checked against the archive.",
)
@click.option(
    "--allow-gaps",
    is_flag=True,
    help="Adopt an archive with holes (reported) all the same.",
)
@run_options
def adopt(
    flags: RunFlags,
    location: str | None,
    layout: str | None,
    layout_options: tuple[str, ...],
    group: str | None,
    allow_gaps: bool,
) -> None:
    """Take over an archive another sink wrote: the next `run` of the KCQL continues
    from its end. Run it after the connector is stopped; nothing is written into its
    objects."""
    loaded = flags.load()
    plan = flags.plan(loaded)
    require_bootstrap(loaded.settings, flags.config)
    if location is None:
        targets = {str(r.target) for r in plan.routes}
        if len(targets) != 1:
            raise click.UsageError("give --from: the KCQL writes to several targets")
        location = targets.pop()
    given = configured(flags, loaded, spec(location, layout, layout_options))
    result = adopting.adopt(loaded.settings, plan, given, group=group, allow_gaps=allow_gaps)
    click.echo(adopting.render(result))
    if result.refused is not None:
        raise result.refused

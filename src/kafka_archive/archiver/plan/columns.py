"""The column types of each objects route (AVRO, PARQUET with inferred schemas), as the route's
committed objects have them: ``<prefix>/.kafka-archive/columns/<topic>/columns.json``.

An inferred schema is decided on an object's records (:mod:`.formats.schema`), so a run
whose records are all null for a field, or hold only whole numbers, could not know what
earlier objects of the route stored: it would write the default (a ``string`` column) beside
their ``double``, and the prefix would stop being one dataset. So the driver records, after
each batch, the columns of the objects its units committed (:func:`record`), and the next
batch's units start from them (:func:`with_columns`, ``WorkUnit.columns``, the seed of
:func:`.schema.seeded`: a field the record has takes its type where the value fits).

The record only grows: a recorded type stays (objects already have it), a field recorded
with no type yet (null in every object so far) takes the first type a committed object gives
it, new fields are added. Written by the session's driver under its lease, conditionally on
the ETag it read (a refused write reads the record again and merges once more: merging is a
union, so no writer's fields are lost). A batch's units get the record as the batch was
planned: every attempt of a unit the same seed, so retries still write the same objects.

Not the truth of exactly once (the partition states are): a missing record only costs what
the rules gave before it. A driver that stops between its units' commits and the record's
write leaves those columns unrecorded (the next run seeds from what was recorded before).
Routes with a declared schema (``avro.schema.file``, a registry subject), the envelope, or
an Iceberg table (seeded from the table itself) keep none.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kafka_archive.archiver.core.errors import ArchiveError
from kafka_archive.archiver.core.model import UnitResult, WorkUnit
from kafka_archive.archiver.formats import schema
from kafka_archive.archiver.state import versions
from kafka_archive.archiver.state.paths import columns_key
from kafka_archive.archiver.store.s3 import PreconditionFailed, S3Store
from kafka_archive.kcql.plan import Format, Plan, Route

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Recorded:
    """A route's recorded columns (None: none yet) and the ETag of their document (None:
    no document)."""

    columns: schema.Type | None = None
    etag: str | None = None

    def text(self) -> str | None:
        """The columns as ``WorkUnit.columns`` carries them."""
        if self.columns is None:
            return None
        return json.dumps(schema.to_json(self.columns), separators=(",", ":"))


def keeps(route: Route) -> bool:
    """Whether the route's objects have inferred columns worth recording."""
    return (
        route.format in (Format.AVRO, Format.PARQUET)
        and route.iceberg is None
        and not route.envelope.enabled
        and route.avro_schema_file is None
        and route.avro_schema_subject is None
    )


def load(
    store: S3Store, plan: Plan, known: Mapping[int, Recorded] | None = None
) -> dict[int, Recorded]:
    """Route index -> its recorded columns, for each route that keeps them (one GET per
    route not in ``known``)."""
    out: dict[int, Recorded] = {}
    for index, route in enumerate(plan.routes):
        if not keeps(route):
            continue
        if known is not None and index in known:
            out[index] = known[index]
            continue
        out[index] = _read(store, route)
    return out


def _read(store: S3Store, route: Route) -> Recorded:
    key = columns_key(route.target, route.topic)
    doc = store.get_document(route.target.bucket, key)
    if doc is None:
        return Recorded()
    where = f"the column record s3://{route.target.bucket}/{key}"
    versions.require(doc.body, FORMAT_VERSION, where)
    try:
        columns = schema.from_json(doc.body["columns"])
    except (KeyError, ValueError):
        raise ArchiveError(
            f"{where} is damaged",
            hint="Delete it: the next run records the columns of the objects it writes",
        ) from None
    return Recorded(columns, doc.etag)


def with_columns(
    units: Sequence[WorkUnit], recorded: Mapping[int, Recorded]
) -> tuple[WorkUnit, ...]:
    """The units, each of a route with recorded columns given them."""
    return tuple(
        replace(u, columns=text)
        if (text := recorded.get(u.route_index, Recorded()).text()) is not None
        else u
        for u in units
    )


def committed(done: Sequence[UnitResult]) -> dict[int, schema.Type]:
    """Route index -> the columns of the objects the units committed, merged in offset order
    of each partition (partitions in order)."""
    out: dict[int, schema.Type] = {}
    for result in sorted(done, key=lambda r: (r.route_index, r.tp, r.start)):
        for obj in result.objects:
            if obj.columns is None:
                continue
            columns = schema.from_json(json.loads(obj.columns))
            before = out.get(result.route_index)
            out[result.route_index] = columns if before is None else schema.merged(before, columns)
    return out


def record(
    store: S3Store,
    plan: Plan,
    recorded: Mapping[int, Recorded],
    done: Sequence[UnitResult],
) -> dict[int, Recorded]:
    """Merge the columns of what ``done`` committed into each route's record, written where
    it changed (conditionally: a refused write reads it again); the records as they are now."""
    out = dict(recorded)
    for index, columns in committed(done).items():
        if index not in out:
            continue
        route = plan.routes[index]
        current = out[index]
        for _ in range(_ATTEMPTS):
            before = current.columns
            after = columns if before is None else schema.merged(before, columns)
            if after == before:
                break
            try:
                etag = store.put_document(
                    route.target.bucket,
                    columns_key(route.target, route.topic),
                    _document(after),
                    if_match=current.etag,
                )
            except PreconditionFailed:
                current = _read(store, route)
                continue
            current = Recorded(after, etag)
            break
        else:
            log.warning(
                "%s: the column record of the route was changed by others %d times in a "
                "row; not written this time",
                route.topic,
                _ATTEMPTS,
            )
        out[index] = current
    return out


def _document(columns: schema.Type) -> dict[str, Any]:
    return {versions.FIELD: FORMAT_VERSION, "columns": schema.to_json(columns)}

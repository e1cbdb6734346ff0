"""``PROPERTIES('schema.compatibility'=…)``: which value schema changes keep an AVRO or
PARQUET object open, with Confluent's meaning (kafka-connect-storage-common's
``StorageSchemaCompatibility``).

An open object has a current schema, fixed by its first record. A record whose schema
differs is, by mode:

- NONE (default): a new object, with the record's schema (today's behaviour: an inferred
  schema the value *fits* is not a difference, see :mod:`.schema`).
- BACKWARD, FULL: a record with an *older* schema is projected onto the object's schema and
  stays; a *newer* one rolls the object, and the next object has the newer schema.
- FORWARD: a record with a *newer* schema is projected onto the object's (older) schema and
  stays; an *older* one rolls.

A change that cannot be projected (an incompatible one) always rolls, as under NONE.

Older and newer: for Schema Registry values, by schema id (the registry gives a subject's
later versions higher ids; Confluent compares subject versions); projection is Avro schema
resolution of the datum onto the object's writer schema (defaults for fields the record
lacks, fields the object lacks dropped, promotions). For inferred JSON schemas (every field
nullable) a record is *older* when it fits the object's schema (it lacks fields, which read
as null: the projection) and *newer* when it brings fields the object lacks with no type
conflict; the newer schema is then the object's schema merged with the record's (fields in
first-seen order), so that records of either shape fit the next object. A field whose type
changes is an incompatible change.

The object schema carries over: each object of a unit starts from the schema of the one
before it in its group (rolled by count, size, interval or a newer schema), so that an
older record does not cost a small object after every roll. Everything is decided on the
records alone, in offset order, from the first record of the unit (the committed offset
the run started from): a rerun from the same offset makes the same objects.
"""

from __future__ import annotations

import enum
from typing import Any

from kafka_archive.archiver.formats.schema import NULL, Type, fits, infer
from kafka_archive.kcql.plan import Route, SchemaCompatibility


class Action(enum.Enum):
    """What to do with a record whose schema differs from its object's."""

    PROJECT = "project"  # store it projected onto the object's schema, in the same object
    ROLL = "roll"  # close the object; the record starts the next one


def by_version(mode: SchemaCompatibility, current: int, incoming: int) -> Action:
    """The action for a registry value of schema id ``incoming`` in an object of ``current``
    (different ids). PROJECT still rolls when the datum does not resolve."""
    if mode in (SchemaCompatibility.BACKWARD, SchemaCompatibility.FULL):
        return Action.PROJECT if incoming < current else Action.ROLL
    if mode is SchemaCompatibility.FORWARD:
        return Action.PROJECT if incoming > current else Action.ROLL
    return Action.ROLL


def inferred(
    mode: SchemaCompatibility, current: Type, value: dict[str, Any]
) -> tuple[Action, Type | None]:
    """The action for a JSON value that does not fit ``current``, and with BACKWARD/FULL the
    schema the next object starts with (the merged, newer one), else None."""
    if mode is SchemaCompatibility.NONE:
        return Action.ROLL, None
    try:
        mine = infer(value)
    except ValueError:
        return Action.ROLL, None
    merged = merge(current, mine)
    if merged is None:
        return Action.ROLL, None  # a type changed: incompatible
    if mode is SchemaCompatibility.FORWARD:
        # Newer fields dropped, as an older reader reads them; a field the object has only
        # seen null cannot take a value: that rolls.
        return (Action.PROJECT if settles(value, current) else Action.ROLL), None
    return Action.ROLL, merged


def merge(old: Type, new: Type) -> Type | None:
    """The schema both ``old`` and ``new`` values fit: fields of both, in first-seen order;
    None when a field has two types (a null-typed field takes the other's type)."""
    if old == new or new == NULL:
        return old
    if old == NULL:
        return new
    if old.kind != new.kind:
        return None
    if old.kind == "array":
        assert old.items is not None and new.items is not None
        items = merge(old.items, new.items)
        return None if items is None else Type("array", items=items)
    if old.kind != "record":
        return None
    fields = dict(old.fields)
    for name, kind in new.fields:
        if name in fields:
            joined = merge(fields[name], kind)
            if joined is None:
                return None
            fields[name] = joined
        else:
            fields[name] = kind
    return Type("record", tuple(fields.items()))


def projected(value: Any, schema: Type) -> Any:
    """``value`` with what ``schema`` has no place for dropped (FORWARD's projection of a
    newer value onto an older schema). Fields the schema has and the value lacks read as
    null, so they need no filling."""
    if schema.kind == "record" and isinstance(value, dict):
        names = dict(schema.fields)
        return {k: projected(v, names[k]) for k, v in value.items() if k in names}
    if schema.kind == "array" and isinstance(value, list):
        assert schema.items is not None
        return [projected(v, schema.items) for v in value]
    return value


def settles(value: Any, schema: Type) -> bool:
    """Whether ``value``, projected, can be stored under ``schema``."""
    return fits(projected(value, schema), schema)


def evolves(route: Route) -> bool:
    """Whether the route's objects hand their schema on (``schema.compatibility`` other than
    NONE; KCQL allows it on AVRO and PARQUET only)."""
    return route.schema_compatibility is not SchemaCompatibility.NONE


def carry(previous: object | None, writer: object) -> None:
    """Hand the schema of a group's previous object (or the newer one it rolled for) on to
    the writer of its next object, for writers that evolve schemas (AVRO, PARQUET)."""
    if previous is None:
        return
    successor = getattr(previous, "successor", None)
    inherit = getattr(writer, "inherit", None)
    if successor is not None and inherit is not None:
        inherit(successor())

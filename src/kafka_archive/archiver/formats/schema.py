"""Schemas of structured objects (AVRO, PARQUET), inferred from JSON record values.

The type rules, chosen so that every object of a route agrees with every other on the type
of each column they share, whatever records each holds (readers that merge a prefix's
objects, pyarrow.dataset, Spark, polars, DuckDB, Iceberg, refuse two types for one column):

- every JSON number is a ``double``, whole or not: ``10`` in one record and ``10.5`` in the
  next must not make a ``long`` object and a ``double`` one (Spark does not merge them,
  Iceberg does not promote ``long`` to ``double``). An integer a double would round (beyond
  ±2**53) is a bad record: a route with such numbers declares its schema
  (``avro.schema.file``, whose ``long`` fields stay ``long``);
- booleans, strings, objects and arrays are ``boolean``, ``string``, records and arrays;
- while an object's schema is open (PARQUET: until its first row group is written) it
  grows with its records (:func:`refined`): a field null so far takes the type a later
  record gives it, a new field is added as a column (null in the records without it);
- a field that is null (or an empty array) in every record the schema was fixed from is
  stored as a ``string`` column (:data:`NULL_DEFAULT`), never as the Null type, which
  most readers cannot merge and Iceberg cannot store;
- every field is nullable: a field absent from a record is null in it.

A later record belongs in the same object when it *fits* the schema: each of its fields is
in the schema with a value of that type (or null, or absent; a string fits a field still
null). A record that does not fit rolls the object and starts a new one with its own schema,
as the Confluent sink does with ``schema.compatibility=NONE``; so no object ever holds a
record its schema disagrees with, and object boundaries still depend on the records alone.
Schemas given by Avro schemas (a Schema Registry writer schema, ``avro.schema.file``:
:func:`from_avro`) keep their declared types. An existing Iceberg table's columns seed the
inferred schemas of its files (:func:`seeded`): a field the table has takes its type where
the value fits it (a whole number in a long column stays a long).

The same tree gives the Avro schema (:func:`to_avro`) and the Arrow schema (:func:`to_arrow`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats.base import BadRecordError

if TYPE_CHECKING:  # pyarrow starts a thread when imported: not before the daemon forks
    import pyarrow as pa

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Type:
    """One node of an inferred schema: a primitive, a record (``fields``) or an ``array``."""

    kind: str  # null, boolean, long, double, string, record, array
    fields: tuple[tuple[str, Type], ...] = ()
    items: Type | None = None


NULL, BOOLEAN, LONG, DOUBLE, STRING = (
    Type(k) for k in ("null", "boolean", "long", "double", "string")
)

NULL_DEFAULT = STRING
"""How a field with no type yet (null in every record so far) is stored: a string column.
Text is what such fields most often hold (notes, optional names), and any JSON value has a
text form; a field that turns out to be another type in a later object differs there (the
README says so, and how to declare the schema instead)."""


def infer(value: Any) -> Type:
    """The schema of one JSON value.

    Raises:
        BadRecordError: an array whose elements have different types.
    """
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, (int, float)):
        return DOUBLE  # whole or not: one type for every number (the module's rules)
    if isinstance(value, str):
        return STRING
    if isinstance(value, dict):
        return Type("record", tuple((str(k), infer(v)) for k, v in value.items()))
    if isinstance(value, list):
        items = next((infer(v) for v in value if v is not None), NULL)
        if not all(fits(v, items) for v in value):
            raise BadRecordError("an array holds values of different types")
        return Type("array", items=items)
    raise BadRecordError(f"unsupported JSON value {type(value).__name__}")


def fits(value: Any, schema: Type) -> bool:
    """Whether ``value`` can be stored under ``schema`` without loss."""
    if value is None:
        return True
    kind = schema.kind
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "long":
        return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63
    if kind == "double":
        if isinstance(value, float):
            return True
        return isinstance(value, int) and not isinstance(value, bool) and _exact_double(value)
    if kind in ("string", "null"):  # null: no type yet, stored as NULL_DEFAULT (a string)
        return isinstance(value, str)
    if kind == "record":
        if not isinstance(value, dict):
            return False
        names = dict(schema.fields)
        return all(k in names and fits(v, names[k]) for k, v in value.items())
    if kind == "array":
        assert schema.items is not None
        return isinstance(value, list) and all(fits(v, schema.items) for v in value)
    return False


def refined(schema: Type, value: Any) -> Type | None:
    """``schema`` grown by ``value``: the fields it has no type for yet (null so far) typed
    by the value's, the value's new fields added after the others (first-seen order). None
    when ``value`` cannot join it (a field of another type, a number a double would
    round). An object whose schema is still open takes the refined schema."""
    if value is None:
        return schema
    if schema.kind == "null":
        try:
            typed = infer(value)
        except BadRecordError:
            return None
        return typed if fits(value, typed) else None
    if schema.kind == "record":
        if not isinstance(value, dict):
            return None
        fields: list[tuple[str, Type]] = []
        for name, kind in schema.fields:
            field = refined(kind, value.get(name))
            if field is None:
                return None
            fields.append((name, field))
        names = dict(schema.fields)
        for name, item in value.items():
            if name not in names:
                field = refined(NULL, item)
                if field is None:
                    return None
                fields.append((str(name), field))
        return Type("record", tuple(fields))
    if schema.kind == "array":
        if not isinstance(value, list):
            return None
        assert schema.items is not None
        items: Type | None = schema.items
        for item in value:
            assert items is not None
            items = refined(items, item)
            if items is None:
                return None
        return Type("array", items=items)
    return schema if fits(value, schema) else None


def untyped(schema: Type, path: str = "") -> list[str]:
    """The fields (dotted paths; ``[]`` for array items) that have no type yet: stored as
    :data:`NULL_DEFAULT`, where another object may have given them another type."""
    if schema.kind == "null":
        return [path or "<value>"]
    if schema.kind == "array":
        assert schema.items is not None
        return untyped(schema.items, f"{path}[]")
    out: list[str] = []
    for name, kind in schema.fields:
        out += untyped(kind, f"{path}.{name}" if path else name)
    return out


def log_untyped(schema: Type, record: Record | None) -> None:
    """Say (log, INFO) which fields of the object that starts with ``record`` are stored
    as strings for want of a type: the objects that may differ from others (names only,
    never values)."""
    fields = untyped(schema)
    if fields and record is not None:
        log.info(
            "%s[%d] object from offset %d: field(s) %s null in every record of its schema, "
            "stored as strings; objects where they hold numbers or booleans differ "
            "(declare the schema with 'avro.schema.file')",
            record.topic,
            record.partition,
            record.offset,
            ", ".join(fields[:10]),
        )


def _exact_double(value: int) -> bool:
    """Whether a double column takes the integer without rounding it: |n| <= 2**53, the
    range pyarrow converts (a larger integer would be stored rounded, or refused by it)."""
    return -(2**53) <= value <= 2**53


# Avro logical types whose JSON form (registry.jsonable) is text: ISO-8601 times, decimals.
_TEXT_LOGICAL = frozenset(
    {
        "date",
        "time-millis",
        "time-micros",
        "timestamp-millis",
        "timestamp-micros",
        "local-timestamp-millis",
        "local-timestamp-micros",
        "decimal",
        "uuid",
    }
)


def from_avro(avro: Any) -> Type | None:
    """The schema of the JSON form of values written with Avro schema ``avro`` (a registry
    writer schema), or None when that form has no fixed shape (a map, a union of several
    non-null types): the object's schema is then inferred from its first value instead.

    Every field is nullable, as in inferred schemas; bytes, fixed, enums and text logical
    types are strings (their JSON form), int and long are longs, float and double doubles.
    """
    named: dict[str, Type | None] = {}

    def convert(node: Any, namespace: str = "") -> Type | None:
        if isinstance(node, str):
            if node in named:
                return named[node]
            qualified = f"{namespace}.{node}" if namespace else node
            if qualified in named:
                return named[qualified]
            return {
                "null": NULL,
                "boolean": BOOLEAN,
                "int": LONG,
                "long": LONG,
                "float": DOUBLE,
                "double": DOUBLE,
                "string": STRING,
                "bytes": STRING,
            }.get(node)
        if isinstance(node, list):
            branches = [b for b in node if b != "null"]
            return convert(branches[0], namespace) if len(branches) == 1 else None
        if not isinstance(node, dict):
            return None
        kind = node.get("type")
        if node.get("logicalType") in _TEXT_LOGICAL:
            return STRING
        space = str(node.get("namespace", namespace))
        if kind in ("fixed", "enum"):
            result: Type | None = STRING
        elif kind == "array":
            items = convert(node.get("items"), space)
            result = None if items is None else Type("array", items=items)
        elif kind == "record":
            fields: list[tuple[str, Type]] = []
            for field in node.get("fields", ()):
                converted = convert(field.get("type"), space)
                if converted is None:
                    return None
                fields.append((str(field["name"]), converted))
            result = Type("record", tuple(fields))
        else:
            return convert(kind, namespace)
        if "name" in node:
            name = str(node["name"])
            named[name] = result
            named[f"{space}.{name}" if space and "." not in name else name] = result
        return result

    converted = convert(avro)
    return converted if converted is not None and converted.kind == "record" else None


def seeded(typed: Type, seed: Type, value: Any, before: Type | None = None) -> Type:
    """``typed`` (inferred from ``value``, or grown by it from ``before``) with the types
    ``seed`` (an existing Iceberg table's columns) gives the fields ``value`` typed, where
    the value fits them: a whole number in a long column stays a long. Fields the seed
    lacks, or values that do not fit it, keep the inferred type."""
    if typed.kind != "record" or seed.kind != "record" or not isinstance(value, dict):
        return typed
    given = dict(seed.fields)
    old = dict(before.fields) if before is not None and before.kind == "record" else {}
    fields: list[tuple[str, Type]] = []
    for name, kind in typed.fields:
        want, was = given.get(name), old.get(name)
        if want is None:
            pass
        elif kind.kind == "record" and want.kind == "record":
            kind = seeded(kind, want, value.get(name), was)
        elif (was is None or was.kind == "null") and kind.kind in ("null", "double"):
            kind = want if fits(value.get(name), want) else kind
        fields.append((name, kind))
    return Type("record", tuple(fields))


def to_json(schema: Type) -> Any:
    """``schema`` as plain JSON (the route's recorded columns, :mod:`.plan.columns`): fields
    with no type yet stay ``null``, so a recorded column can tell them from strings."""
    if schema.kind == "record":
        return {"record": [[name, to_json(kind)] for name, kind in schema.fields]}
    if schema.kind == "array":
        assert schema.items is not None
        return {"array": to_json(schema.items)}
    return schema.kind


def from_json(data: Any) -> Type:
    """The schema :func:`to_json` gave. Raises ValueError on anything else."""
    if isinstance(data, str) and data in _PRIMITIVES:
        return _PRIMITIVES[data]
    if isinstance(data, dict) and set(data) == {"record"} and isinstance(data["record"], list):
        fields = []
        for entry in data["record"]:
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                raise ValueError(f"not a field: {entry!r:.60}")
            fields.append((entry[0], from_json(entry[1])))
        return Type("record", tuple(fields))
    if isinstance(data, dict) and set(data) == {"array"}:
        return Type("array", items=from_json(data["array"]))
    raise ValueError(f"not a schema: {data!r:.60}")


_PRIMITIVES = {t.kind: t for t in (NULL, BOOLEAN, LONG, DOUBLE, STRING)}


def merged(recorded: Type, new: Type) -> Type:
    """The route's recorded columns ``recorded`` with those of a newly committed object:
    a recorded type stays (the objects already written have it), a field recorded with no
    type yet takes the new one, new fields are added after the others."""
    if recorded.kind == "null":
        return new
    if recorded.kind == "record" and new.kind == "record":
        theirs = dict(new.fields)
        fields = [
            (name, merged(kind, theirs[name]) if name in theirs else kind)
            for name, kind in recorded.fields
        ]
        names = dict(recorded.fields)
        fields += [(name, kind) for name, kind in new.fields if name not in names]
        return Type("record", tuple(fields))
    if recorded.kind == "array" and new.kind == "array":
        assert recorded.items is not None and new.items is not None
        return Type("array", items=merged(recorded.items, new.items))
    return recorded


def stored(schema: Type) -> Type:
    """``schema`` as objects store it: a field with no type yet is :data:`NULL_DEFAULT`."""
    if schema.kind == "null":
        return NULL_DEFAULT
    if schema.kind == "record":
        return Type("record", tuple((n, stored(k)) for n, k in schema.fields))
    if schema.kind == "array":
        assert schema.items is not None
        return Type("array", items=stored(schema.items))
    return schema


def value_schema(value: Any) -> Type:
    """The schema of an object whose first value is ``value`` (a JSON object).

    Raises:
        BadRecordError: the value is not a JSON object, or its arrays are mixed.
    """
    if not isinstance(value, dict):
        raise BadRecordError(
            "a value must be a JSON object to be stored in a structured format "
            "(or use PROPERTIES('store.envelope'=true) to keep any value as bytes)"
        )
    schema = infer(value)
    if not fits(value, schema):  # an integer a double would round
        raise BadRecordError(
            "a number does not fit its column: an integer beyond 2**53, which a double (the "
            "type of every JSON number in an inferred schema) would round; declare the "
            "field a long with 'avro.schema.file', or store the value as JSON or in the "
            "envelope"
        )
    return schema


def normalized(value: Any) -> Any:
    """``value`` without null fields, doubles that are whole as integers: what compares equal
    between a JSON value and the same value read back from an object (where absent fields
    come back as null and integers in a double column as floats)."""
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# -- Avro ------------------------------------------------------------------------------

_AVRO_NULL_DEFAULT = "string"  # NULL_DEFAULT
_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_AVRO_PRIMITIVE = {
    "null": _AVRO_NULL_DEFAULT,
    "boolean": "boolean",
    "long": "long",
    "double": "double",
    "string": "string",
}


def to_avro(schema: Type, name: str = "Value") -> dict[str, Any]:
    """The Avro record schema of an inferred record schema (every field nullable).

    Raises:
        BadRecordError: a field name that Avro does not allow.
    """
    return _avro_record(schema, name)


def _avro_record(schema: Type, name: str) -> dict[str, Any]:
    fields = []
    for field_name, field_type in schema.fields:
        if not _AVRO_NAME.fullmatch(field_name):
            raise BadRecordError(
                f"field name {field_name[:40]!r} is not a valid Avro name "
                "([A-Za-z_][A-Za-z0-9_]*); store as PARQUET or JSON, or use the envelope"
            )
        avro = _avro_type(field_type, f"{name}_{field_name}")
        fields.append({"name": field_name, "type": ["null", avro], "default": None})
    return {"type": "record", "name": name, "fields": fields}


def _avro_type(schema: Type, name: str) -> Any:
    if schema.kind == "record":
        return _avro_record(schema, name)
    if schema.kind == "array":
        assert schema.items is not None
        items = _avro_type(schema.items, f"{name}_item")
        return {"type": "array", "items": ["null", items]}
    return _AVRO_PRIMITIVE[schema.kind]


# -- Arrow -----------------------------------------------------------------------------


EMPTY_FIELD = "__empty__"
"""The one column of an empty JSON object (always null, typed NULL_DEFAULT): Parquet has no
struct without columns."""


def to_arrow(schema: Type) -> pa.Schema:
    """The Arrow schema of an inferred record schema (every field nullable)."""
    import pyarrow as pa  # heavy, and starts a thread: imported on first use (see above)

    if not schema.fields:
        return pa.schema([pa.field(EMPTY_FIELD, pa.string())])
    return pa.schema([pa.field(n, _arrow_type(t)) for n, t in schema.fields])


def _arrow_type(schema: Type) -> pa.DataType:
    import pyarrow as pa  # heavy, and starts a thread: imported on first use (see above)

    kind = schema.kind
    if kind == "record":
        if not schema.fields:
            return pa.struct([pa.field(EMPTY_FIELD, pa.string())])
        return pa.struct([pa.field(n, _arrow_type(t)) for n, t in schema.fields])
    if kind == "array":
        assert schema.items is not None
        return pa.list_(_arrow_type(schema.items))
    return {
        "null": pa.string(),  # NULL_DEFAULT: never the Null type
        "boolean": pa.bool_(),
        "long": pa.int64(),
        "double": pa.float64(),
        "string": pa.string(),
    }[kind]

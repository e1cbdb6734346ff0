"""An Iceberg table's columns: what its existing columns give the files of a route (the
types an inferred field can take), the schema a new table takes from its first file, the
schema evolution a commit makes for its files, and the partition spec of a new table. A
schema the table cannot take is the records' problem (exit 10, one line, the way out), not
the catalog's."""

from __future__ import annotations

import json
from typing import Any

from pyiceberg.exceptions import ValidationError

from kafka_archive.archiver.core.errors import BadRecordError
from kafka_archive.archiver.formats import schema as formats_schema
from kafka_archive.archiver.iceberg.routes import partition_spec
from kafka_archive.kcql.plan import Route

_PLAIN = frozenset(("null", "boolean", "int", "long", "float", "double", "string"))


def table_schema(table: Any) -> str | None:
    """The table's columns as an Avro record schema (JSON), those of a type an inferred
    field can take (:func:`_plain`: numbers, booleans, strings, structs and lists of
    them); None when there is none. Files start from their types (int and long as long,
    float and double as double): a table made by another tool or an older kafka-archive
    with long columns takes whole numbers as they are, not as doubles it cannot promote."""
    # Heavy (seconds to import): loaded only when a plan has an Iceberg route.
    from pyiceberg.utils.schema_conversion import AvroSchemaConversion

    avro = AvroSchemaConversion().iceberg_to_avro(table.schema(), schema_name="Table")
    fields = [
        f
        for f in (avro.get("fields", ()) if isinstance(avro, dict) else ())
        if _plain(f["type"])
        and formats_schema.from_avro({"type": "record", "name": "Table", "fields": [f]}) is not None
    ]
    if not fields:
        return None
    return json.dumps({"type": "record", "name": "Table", "fields": fields}, sort_keys=True)


def _plain(node: Any) -> bool:
    """Whether an Avro type (of pyiceberg's conversion) holds only types an inferred field
    can take: no logical type (dates, times, decimals, UUIDs, maps), bytes or fixed."""
    if isinstance(node, str):
        return node in _PLAIN
    if isinstance(node, list):
        return all(_plain(branch) for branch in node)
    if not isinstance(node, dict) or "logicalType" in node:
        return False
    if node.get("type") == "record":
        return all(_plain(f["type"]) for f in node.get("fields", ()))
    if node.get("type") == "array":
        return _plain(node.get("items"))
    return _plain(node.get("type"))


def file_schema(io: Any, path: str) -> Any:
    """The Arrow schema of a Parquet data file (read from its footer), without metadata."""
    # Heavy to import (pyarrow): loaded only when a plan has an Iceberg route.
    import pyarrow.parquet as pq

    with io.new_input(path).open() as stream:
        return pq.read_schema(stream).remove_metadata()


def check_types(catalog: Any, identifier: str, schema: Any) -> None:
    """Refuse a first file whose columns Iceberg has no type for as what it is: a type
    problem of the records (exit 10, one line), not of the catalog. Our writers give every
    column a type Iceberg holds (formats/schema.py: no Null type); a schema declared with
    'avro.schema.file' is what can still bring one.

    Raises:
        BadRecordError: a column Iceberg cannot type.
    """
    try:
        catalog._convert_schema_if_needed(schema)
    except (ValueError, TypeError) as exc:
        reason = " ".join(str(exc).split())
        raise BadRecordError(
            f"the records' schema cannot make Iceberg table {identifier}: {reason}",
            hint="Give the column a type Iceberg holds: declare the schema with "
            "'avro.schema.file' (README: Formats), or reshape the records with a 'transform'",
        ) from None


def set_partition_spec(tx: Any, route: Route) -> None:
    """Set the partition spec of a new table (:func:`.routes.partition_spec`)."""
    # Heavy (seconds to import): loaded only when a plan has an Iceberg route.
    from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform

    transforms = {"identity": IdentityTransform, "day": DayTransform, "hour": HourTransform}
    fields = partition_spec(route)
    if not fields:
        return
    with tx.update_spec() as update:
        for column, transform, name in fields:
            update.add_field(column, transforms[transform](), name)


def evolve(tx: Any, table: Any, files: list[str]) -> None:
    """Add the columns the files have and the table does not, widen types (Iceberg schema
    evolution; an incompatible change fails the commit). Files of inferred schemas agree
    with each other and take the table's column types where the values fit them
    (:func:`table_schema`); a value that does not (a fractional number for a long column)
    fails here: the error says how to declare the schema."""
    seen: set[str] = set()
    for path in files:
        schema = file_schema(table.io, path)
        signature = str(schema)
        if signature in seen:
            continue
        seen.add(signature)
        try:
            with tx.update_schema() as update:
                update.union_by_name(schema)
        except (ValidationError, ValueError) as exc:
            reason = " ".join(str(exc).split())
            raise BadRecordError(
                f"the records' schema does not fit Iceberg table {table.name()}: {reason}",
                hint="Iceberg takes new columns and wider types (int to long, float to "
                "double), nothing else; a file takes the table's column types where the "
                "values fit them: declare the schema with 'avro.schema.file', reshape the "
                "records, or archive into a new table",
            ) from None

"""Shared builders for the partition tests."""

from __future__ import annotations

from collections.abc import Mapping

from kafka_archive import kcql
from kafka_archive.kcql.plan import FieldRef, Format, KeyNaming, Route, Source, Target

COUNTRY = FieldRef(Source.HEADER, ("country",))
KIND = FieldRef(Source.VALUE, ("kind",))
DEFAULT_NAMING = KeyNaming()
# 2024-05-06T13:53:00Z
T = 1_715_003_580_000


def route(
    *,
    prefix: str = "archive",
    topic: str = "orders",
    partition_by: tuple[FieldRef, ...] = (),
    include_keys: bool = False,
    fmt: Format = Format.JSON,
    naming: KeyNaming = DEFAULT_NAMING,
    props: Mapping[str, str] | None = None,
    **properties: str,
) -> Route:
    """A route compiled by KCQL, as a run gets it; keyword properties use ``_`` for ``.``
    (``layout_template='…'``).

    Raises:
        KcqlError: the settings are refused by the compiler.
    """
    given = {key.replace("_", "."): value for key, value in properties.items()}
    given.update(props or {})
    given.update(
        {
            "padding.type": naming.padding.value,
            "padding.char": naming.padding_char,
            "padding.length.offset": str(naming.offset_width),
            "padding.length.partition": str(naming.partition_width),
        }
    )
    if partition_by:
        given["partition.include.keys"] = "true" if include_keys else "false"
    written = Route(
        target=Target("bkt", prefix),
        topic=topic,
        partition_by=partition_by,
        include_keys=include_keys,
        format=fmt,
        properties=tuple(sorted(given.items())),
    )
    (compiled,) = kcql.parse(kcql.render(written)).routes
    return compiled

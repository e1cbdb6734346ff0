"""Shared builders for the partition tests."""

from __future__ import annotations

from collections.abc import Mapping

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
    """A route; keyword properties use ``_`` for ``.`` (``layout_template='…'``)."""
    given = {key.replace("_", "."): value for key, value in properties.items()}
    given.update(props or {})
    return Route(
        target=Target("b", prefix),
        topic=topic,
        partition_by=partition_by,
        include_keys=include_keys,
        format=fmt,
        naming=naming,
        properties=tuple(sorted(given.items())),
    )

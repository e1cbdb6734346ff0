"""Pure object naming: the same inputs always give the same key.

:func:`object_key` is the one function the runtime needs; :func:`object_group` says which
records share an open object. Both read the route's layout settings through
:func:`~kafka_archive.archiver.partition.layouts.layout_for`, which documents every layout
and property. Example keys, for ``INSERT INTO b:archive SELECT * FROM orders``, partition 3,
start offset 42, ``STOREAS JSON``, ``PARTITIONBY _header.country, _value.kind`` = ``DE``,
``retail``, record time 2024-05-06T13:53:00Z::

    lenses, no PARTITIONBY
        archive/orders/3/000000000042.json
    lenses, PARTITIONBY (WITHPARTITIONER=Values, the default)
        archive/DE/retail/orders(3_000000000042).json
    lenses, WITHPARTITIONER=KeysAndValues
        archive/country=DE/kind=retail/orders(3_000000000042).json
    confluent, no PARTITIONBY
        archive/orders/partition=3/orders+3+000000000042.json
    confluent, PARTITIONBY
        archive/orders/country=DE/kind=retail/orders+3+000000000042.json
    hive, no PARTITIONBY
        archive/orders/year=2024/month=05/day=06/hour=13/orders+3+000000000042.json
    hive, PARTITIONBY
        archive/orders/country=DE/kind=retail/year=2024/month=05/day=06/hour=13/orders+3+000000000042.json
    template {topic}/{date}/{field:country}/{field:kind}/{partition}-{offset}.{ext}
        archive/orders/2024-05-06/DE/retail/3-000000000042.json
    lenses, PARTITIONBY, the record lacks country
        archive/(missing)/retail/orders(3_000000000042).json
    lenses, KeysAndValues, the record lacks country
        archive/country=__HIVE_DEFAULT_PARTITION__/kind=retail/orders(3_000000000042).json
    lenses, PARTITIONBY, country is ../../etc
        archive/%2E.%2F..%2Fetc/retail/orders(3_000000000042).json

A record lacking a field (value None) goes to ``(missing)`` in a bare-value segment and to
``__HIVE_DEFAULT_PARTITION__`` after ``name=`` (read as NULL by Hive, Spark and Athena); see
:mod:`~kafka_archive.archiver.partition.values` for how values are encoded, and
:mod:`~kafka_archive.archiver.partition.layouts` for the properties a route may set.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.kcql.plan import Route


def object_group(
    route: Route, values: Sequence[str | None] = (), *, timestamp_ms: int | None = None
) -> tuple[str | None, ...]:
    """Return what places a record's object apart from its topic-partition and start offset.

    Records of one topic-partition with equal groups belong in the same open object; use
    the group (not the raw values) as the key of the open objects, because with the hive
    layout, time placeholders or ``_date`` fields the record time is part of the path.

    Args:
        route: the route, whose layout settings are compiled once and cached.
        values: the record's raw PARTITIONBY values as strings, in PARTITIONBY order; None
            where the record lacks the field. For a ``_date.<pattern>`` field pass the record
            timestamp in epoch milliseconds as a decimal string (or anything, when
            ``timestamp_ms`` is given: it wins).
        timestamp_ms: the record timestamp (epoch milliseconds), or None if it has none.

    Raises:
        LayoutError: the route's layout settings are invalid (a ValueError).
        ValueError: ``values`` does not match PARTITIONBY.
    """
    return layout_for(route).group(values, timestamp_ms)


def object_key(
    route: Route,
    tp: TopicPartition,
    start_offset: int,
    values: Sequence[str | None] = (),
    *,
    timestamp_ms: int | None = None,
) -> str:
    """Return the key of the object whose first record is at ``start_offset``.

    The key starts with ``<prefix>/`` (or is relative to the bucket root without a prefix),
    has no empty, ``.`` or ``..`` segment and no control character, is at most 1,024 UTF-8
    bytes, and names ``tp`` and ``start_offset`` unambiguously. For one topic-partition and
    group, keys sort in start-offset order while offsets fit the padding width (12 digits
    by default) with the default LeftPad ``0``.

    Args:
        route: the route, whose layout settings are compiled once and cached.
        tp: the topic-partition the object holds records of.
        start_offset: the offset of the object's first record.
        values: the raw PARTITIONBY values of the object's (first) record; see
            :func:`object_group`.
        timestamp_ms: the record timestamp of the object's first record.

    Raises:
        LayoutError: the route's layout settings are invalid (a ValueError).
        ValueError: ``values`` does not match PARTITIONBY, an empty topic, or a partition
            or offset out of Kafka's range.
    """
    layout = layout_for(route)
    return layout.key(tp, start_offset, layout.group(values, timestamp_ms))

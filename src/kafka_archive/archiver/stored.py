"""The archive as stored: a route's objects in S3, read back from their keys.

Listing is by the fixed start of the route's layout (one paginated listing per route, keys
only); every key is read with :func:`~kafka_archive.archiver.partition.parse.parse_key`,
so the topic, partition, start offset and group come from the key itself, and objects of
other topics, formats or layouts under the same prefix are ignored. The runtime's own
objects under ``<prefix>/.kafka-archive/`` are never data.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from kafka_archive.archiver.model import TopicPartition
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.partition.parse import listing_prefix, parse_key
from kafka_archive.archiver.state.paths import STATE_DIR
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Route


@dataclass(frozen=True, slots=True, order=True)
class StoredObject:
    """One archived object: whose records, from which offset, in which group."""

    start_offset: int
    key: str
    tp: TopicPartition
    group: tuple[str | None, ...]
    size: int


def list_partition_objects(
    store: S3Store, route: Route, keys: Iterable[tuple[str, int]] | None = None
) -> dict[TopicPartition, tuple[StoredObject, ...]]:
    """Every object of ``route`` by topic-partition, each tuple sorted by start offset.

    Args:
        store: where the archive is.
        route: the route whose layout, format and topic select the objects.
        keys: (key, size) pairs to use instead of listing (tests, or a listing made once
            for several routes).
    """
    layout = layout_for(route)
    head = listing_prefix(layout)
    own = f"{route.target.prefix}/{STATE_DIR}/" if route.target.prefix else f"{STATE_DIR}/"
    listing = keys if keys is not None else store.list_objects(route.target.bucket, head)
    found: dict[TopicPartition, list[StoredObject]] = defaultdict(list)
    for key, size in listing:
        if key.startswith(own):
            continue
        parsed = parse_key(layout, key)
        if parsed is None:
            continue
        if not route.all_topics and parsed.tp.topic != route.topic:
            continue
        found[parsed.tp].append(
            StoredObject(parsed.start_offset, key, parsed.tp, parsed.group, size)
        )
    return {tp: tuple(sorted(objects)) for tp, objects in sorted(found.items())}


def holder(objects: tuple[StoredObject, ...], offset: int) -> StoredObject | None:
    """The object with the greatest start offset at or below ``offset`` (sorted input)."""
    index = bisect.bisect_right([o.start_offset for o in objects], offset) - 1
    return objects[index] if index >= 0 else None

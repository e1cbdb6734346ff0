"""What a batch does once its units ran, besides its commits: it names the offsets it read
and held back as young (an open object whose first record is younger than its route's
stated flush interval waits for a later run, docs/formats.md, Flush interval: a one-shot
run says so, so that one that archived fewer records than it read says why), mirrors the
committed offsets into the consumer group, and clears the stale intent markers."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kafka_archive.archiver.core.errors import ArchiveError
from kafka_archive.archiver.core.model import TopicPartition, UnitResult, WorkUnit
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan

log = logging.getLogger("kafka_archive.archiver.commands.session")


def held_back(
    units: Sequence[WorkUnit], done: Sequence[UnitResult]
) -> list[tuple[int, TopicPartition, int, int]]:
    """(route index, partition, first, last) of the offsets each partition's units read and
    held back as young (an open object whose first record is younger than the route's
    stated flush interval, ``WorkUnit.young_after_ms``), in order. A unit bounded by
    ``--until`` may stop early for that instead: never counted."""
    planned: dict[tuple[int, TopicPartition], int] = {}
    for unit in units:
        if unit.young_after_ms is not None and unit.until_ms is None:
            key = (unit.route_index, unit.tp)
            planned[key] = max(planned.get(key, unit.stop), unit.stop)
    reached: dict[tuple[int, TopicPartition], int] = {}
    for result in done:
        key = (result.route_index, result.tp)
        reached[key] = max(reached.get(key, result.next_offset), result.next_offset)
    return [
        (index, tp, reached[(index, tp)], stop - 1)
        for (index, tp), stop in sorted(planned.items())
        if (index, tp) in reached and reached[(index, tp)] < stop
    ]


# Partitions named one by one in the line on held-back offsets; beyond, a count.
_HELD_NAMED = 5


def tell_held_back(plan: Plan, units: Sequence[WorkUnit], done: Sequence[UnitResult]) -> None:
    """One line per route with offsets held back by its flush interval (the first few
    partitions named), so that a run that archived fewer records than it read says why."""
    by_route: dict[int, list[tuple[TopicPartition, int, int]]] = {}
    for route, tp, first, last in held_back(units, done):
        by_route.setdefault(route, []).append((tp, first, last))
    for route, held in sorted(by_route.items()):
        interval = plan.routes[route].flush.interval_seconds
        named = "; ".join(
            f"{tp.topic}[{tp.partition}]: offsets {first}..{last}"
            for tp, first, last in held[:_HELD_NAMED]
        )
        more = (
            f" and {len(held) - _HELD_NAMED} more partition(s)" if len(held) > _HELD_NAMED else ""
        )
        log.info(
            "%s%s held back: each object's first record is younger than flush.interval %d s "
            "(record time); a later run archives them",
            named,
            more,
            interval,
        )


def clear_markers(store: S3Store, plan: Plan, done: list[UnitResult]) -> None:
    """Delete the intent markers of what the units committed: one bulk delete per bucket
    (up to 1,000 keys a request), not one per unit. Stale markers are harmless (recovery
    ignores those below the committed offset): a failure to delete them is logged, and the
    next batch's recovery removes them."""
    by_bucket: dict[str, list[str]] = {}
    for unit in done:
        if unit.committed_markers:
            bucket = plan.routes[unit.route_index].target.bucket
            by_bucket.setdefault(bucket, []).extend(unit.committed_markers)
    for bucket, keys in by_bucket.items():
        try:
            store.delete(bucket, keys)
        except ArchiveError as exc:
            log.warning("could not clear %d stale intent marker(s): %s", len(keys), exc)


def mirror_to_group(admin: KafkaAdmin, done: list[UnitResult]) -> None:
    """Mirror the S3 commits into the consumer group, for lag tools. S3 stays the truth."""
    offsets = {u.tp: u.next_offset for u in done if u.next_offset > u.start}
    try:
        admin.commit_group(offsets)
    except Exception as exc:  # the archive is committed; a lag-tool mirror must not fail it
        log.warning("could not commit offsets to the consumer group: %s", exc)

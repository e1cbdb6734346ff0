"""Work units smaller than a partition: a large pending range cut into pieces that Spark runs
in parallel, committed by the driver in offset order.

Where it cuts: at ``start + k * size`` from the partition's committed offset, ``size`` a
multiple of the route's ``flush.count`` (``max_records_per_unit`` rounded down, at least one
count). A piece starts a new object and ends by uploading what it holds, so pieces never
share an object. With dense offsets and objects rolled by count, those are the offsets where
an unsplit run rolls too: the archive is the same, key for key, split or not. Where a size
or interval roll comes first, the objects from it to the next cut differ from an unsplit
run's, but they are fixed by the plan (cuts depend on the committed offset and settings
only), so every attempt of a piece writes the same keys. Routes with PARTITIONBY, a time
layout or an explicit flush interval, and runs bounded by ``--until``, are not split (see
docs/design.md).

Commit: a piece's task uploads its objects behind intent markers and does not commit
(``WorkUnit.deferred``). :func:`settle` walks each split partition's pieces in offset order
and commits its state once, up to the end of the contiguous prefix of finished pieces
(``If-Match`` on the ETag the run fenced it with, after a lease proof). The objects of
pieces after a failed or cut-short one stay uncommitted; their markers make the next run
delete them before it writes (:mod:`.state.pending`), as after a crash. The markers of the
committed pieces go into the merged result's ``committed_markers``, cleared with every other
unit's in the batch's one bulk delete (``batch_end.clear_markers``).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence

from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core import errors
from kafka_archive.archiver.core.failure import TaskFailure, kind_of
from kafka_archive.archiver.core.model import (
    ObjectWritten,
    S3Requests,
    TopicPartition,
    UnitResult,
    WorkUnit,
    total_requests,
)
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.state import checkpoint
from kafka_archive.archiver.state.fencing import UnitFencing
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.write.lifecycle import commit_state
from kafka_archive.archiver.write.task import UnitFailure, requests_of


def piece_size(count: int, max_records: int) -> int:
    """Offsets per piece: ``max_records`` rounded down to a multiple of ``count`` (>= count)."""
    return max(count, max_records // count * count)


def splittable(unit: WorkUnit) -> bool:
    """Whether the unit's route cuts objects on offsets that a split can respect (an Iceberg
    route's pieces would each need the driver's one table commit: not split)."""
    route = unit.route
    return (
        route.iceberg is None
        and not route.partition_by
        and not layout_for(route).uses_time
        and not route.flush.interval_set
        and unit.until_ms is None
    )


def split(unit: WorkUnit, max_records: int) -> list[WorkUnit]:
    """``unit`` as pieces of at most :func:`piece_size` offsets, or ``[unit]`` when it is
    small enough or its route is not :func:`splittable`."""
    if unit.stop - unit.start <= max_records or not splittable(unit):
        return [unit]
    size = piece_size(unit.route.flush.count, max_records)
    bounds = [*range(unit.start, unit.stop, size), unit.stop]
    if len(bounds) <= 2:
        return [unit]
    # Only the last piece may hold back a young tail: the others end on a cut.
    return [
        dataclasses.replace(
            unit,
            start=first,
            stop=stop,
            part_start=unit.start,
            part_stop=unit.stop,
            young_after_ms=unit.young_after_ms if stop == unit.stop else None,
        )
        for first, stop in itertools.pairwise(bounds)
    ]


Outcome = UnitResult | UnitFailure


def settle(
    units: Sequence[WorkUnit], results: Sequence[Outcome], settings: Settings
) -> list[Outcome]:
    """The results of a Spark job (``results[i]`` is ``units[i]``'s), with each split
    partition's pieces committed in offset order and merged into one result."""
    if len(units) != len(results) or not any(u.deferred for u in units):
        return list(results)
    merged: list[Outcome] = []
    pieces: dict[tuple[int, TopicPartition], list[tuple[WorkUnit, Outcome]]] = {}
    for unit, result in zip(units, results, strict=True):
        if unit.deferred:
            pieces.setdefault((unit.route_index, unit.tp), []).append((unit, result))
        else:
            merged.append(result)
    store: S3Store | None = None
    for group in pieces.values():
        store = store or S3Store(settings.s3)
        merged.append(_settle_partition(sorted(group, key=lambda p: p[0].start), store))
    return merged


def _settle_partition(pieces: list[tuple[WorkUnit, Outcome]], store: S3Store) -> Outcome:
    first = pieces[0][0]
    start = first.part_start if first.part_start is not None else first.start
    cut = start
    taken: list[UnitResult] = []
    for unit, result in pieces:
        done = result.committed if isinstance(result, UnitFailure) else result
        if done is not None and done.start == cut and unit.start == cut:
            taken.append(done)
            cut = done.next_offset
        if isinstance(result, UnitFailure) or cut < unit.stop:
            break  # failed or cut short: what follows is not contiguous
    failures = [r for _, r in pieces if isinstance(r, UnitFailure)]
    fenced = [f for f in failures if f.failure.is_a(errors.FencedError)]
    failure = next(iter(fenced or failures), None)
    written: list[ObjectWritten] = [o for r in taken for o in r.objects]
    spent = total_requests(requests_of(r) for _, r in pieces)  # every piece's, all sent
    state: checkpoint.LoadedState | None = None
    if cut > start:
        try:
            UnitFencing(store, first).check()
            state = commit_state(store, first, start, cut, written)
        except errors.ArchiveError as exc:
            refused = TaskFailure(kind_of(exc), exc.message, exc.hint, first.tp, exc.offset)
            return UnitFailure(first.route_index, first.tp, refused, s3_requests=spent)
    result = UnitResult(
        route_index=first.route_index,
        tp=first.tp,
        start=start,
        next_offset=cut,
        records=sum(r.records for r in taken),
        bytes=sum(r.bytes for r in taken),
        objects=tuple(written),
        seconds=max((r.seconds for r in taken), default=0.0),
        skipped_records=sum(r.skipped_records for r in taken),
        dead_letters=sum(r.dead_letters for r in taken),
        dead_letter_key=next((r.dead_letter_key for r in taken if r.dead_letter_key), None),
        s3_retries=sum(r.s3_retries for r in taken),
        s3_requests=spent,
        tasks=len(pieces),
        state=state,
        # Stale once committed: cleared with the whole units' in the batch's bulk delete.
        committed_markers=tuple(k for r in taken for k in r.marker_keys) if cut > start else (),
    )
    if failure is not None:
        if cut > start:
            return dataclasses.replace(failure, committed=result, s3_requests=S3Requests())
        return dataclasses.replace(failure, committed=None, s3_requests=spent)
    return result

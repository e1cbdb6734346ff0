"""Route each record of one work unit to its open object (chunk): one open object per path
(PARTITIONBY values, time in the layout), rolled by the flush policy, and by the bound on
open objects. Chunk boundaries depend only on the records and the flush policy, so every
attempt of a unit writes the same keys.

The steps below are each a module's, called downward only: :mod:`.objects` opens an object
and encodes records into it (its format's writer, its compressor, a spool file or memory),
closes it when it rolls; :mod:`.uploads` marks the closed objects together and uploads
them; :mod:`.lifecycle` moves each object through its stages (behind the lease's proofs).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable
from typing import cast

from kafka_archive.archiver.core.model import WorkUnit
from kafka_archive.archiver.core.record import Record
from kafka_archive.archiver.formats import evolution
from kafka_archive.archiver.formats.base import (
    BadRecordError,
    EncodedBatch,
    FormatWriter,
)
from kafka_archive.archiver.formats.writers import batch_encoder_for
from kafka_archive.archiver.kafka.reader import Batch
from kafka_archive.archiver.kafka.schema_registry import SchemaRegistry
from kafka_archive.archiver.partition.fields import reader_for
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.write import flush, objects
from kafka_archive.archiver.write.lifecycle import Lifecycle
from kafka_archive.archiver.write.objects import Objects, OpenChunk
from kafka_archive.archiver.write.transforms import TransformedBatch
from kafka_archive.archiver.write.uploads import Uploads, drop

# Open objects per task at most (settings.max_open_writers): memory and file descriptors
# stay flat however many distinct PARTITIONBY values a partition holds.
MAX_OPEN = 64


class ChunkSet:
    """Routes records into open chunks and rolls them by the flush policy."""

    def __init__(
        self,
        unit: WorkUnit,
        store: S3Store,
        spool_dir: str | None,
        registry: SchemaRegistry | None = None,
        part_bytes: int | None = None,
        max_open: int = MAX_OPEN,
        memory: bool = True,
        confirm_topic: Callable[[], None] = lambda: None,
        lifecycle: Lifecycle | None = None,
    ) -> None:
        """``memory``: write the object into memory when the route has one open at a time
        (False: always spool it). ``lifecycle``: where each object is between its spool file
        and the commit (None: a new one, with ``confirm_topic``: see
        :class:`.lifecycle.Lifecycle`)."""
        self._unit = unit
        self._max_open = max_open
        self.lifecycle = lifecycle or Lifecycle(unit, store, confirm_topic=confirm_topic)
        self._registry = registry
        self._layout = layout_for(unit.route)
        self._fields = reader_for(unit.route)
        # Without PARTITIONBY or time in the layout, every record shares the one group ().
        self._grouped = bool(unit.route.partition_by) or self._layout.uses_time
        # One object open at a time: written into memory, not the spool.
        in_memory = memory and not self._grouped
        self._objects = Objects(
            unit, store, spool_dir, registry, part_bytes, in_memory, self.lifecycle.stamp
        )
        self._uploads = Uploads(unit.route.target.bucket, store, self.lifecycle)
        # In least recently written order: at most ``max_open`` open at once (each holds a
        # spool file descriptor and its writer's buffers), the oldest rolled to make room.
        self._open: OrderedDict[tuple[str | None, ...], OpenChunk] = OrderedDict()
        # The latest writer of each group: the next object starts from its schema.
        self._previous: dict[tuple[str | None, ...], FormatWriter] = {}
        self._evolves = evolution.evolves(unit.route)
        # Pass-through routes into one object at a time take whole batches (add_batch).
        self._encode = (
            batch_encoder_for(unit.route)
            if registry is None and not self._grouped and not self._objects.blocked
            else None
        )

    def add(self, record: Record) -> None:
        """Write one record into the open object of its group (PARTITIONBY values, time).

        Raises the format's BadRecordError with nothing of the record written (also when
        its PARTITIONBY values cannot be read).
        """
        values: tuple[str | None, ...] = ()
        if self._grouped:
            raw, time_ms = self._fields.place(record, self._registry)
            values = self._layout.group(raw, time_ms)
        policy = self._unit.route.flush
        chunk = self._open.get(values)
        if chunk is not None and (
            flush.interval_elapsed(policy, chunk.stats(), record.timestamp)
            or not chunk.writer.accepts(record)  # a new schema: a new object
        ):
            self._roll(values)
            chunk = None
        if chunk is None:
            if len(self._open) >= self._max_open:
                # Bounded open writers: roll (upload) the least recently written object.
                # Like a count roll, it depends on the records alone; its marker makes it
                # uncommitted until the unit commits, and the commit cut stays after it.
                self._roll(next(iter(self._open)))
            chunk = self._open_chunk(record.offset, record.timestamp, values)
            evolution.carry(self._previous.get(values), chunk.writer)  # schema.compatibility
        elif self._grouped:
            self._open.move_to_end(values)
        if self._evolves:
            self._previous[values] = chunk.writer
        try:
            objects.write(chunk, record)
        except Exception:
            if chunk.records == 0:
                # The object was opened for this record, and its key names its offset: drop
                # it, so the next record opens one named for itself.
                self._discard(values)
            raise
        if flush.is_full(policy, chunk.stats()):
            self._roll(values)
        elif chunk.records % 256 == 0:
            objects.stream(chunk)

    def add_batch(self, batch: Batch | TransformedBatch) -> bool:
        """Write a whole batch through the route's batch encoder; False when the route has
        none or a value is refused (nothing of the batch is written: take it record by
        record with :meth:`add`, which applies the error policy).

        Objects roll exactly where :meth:`add` would roll them: after the record that
        reaches the count or size, before the record a full interval after the first.
        """
        if self._encode is None:
            return False
        try:
            encoded = self._encode(batch.values())
        except BadRecordError:
            return False
        if self._add_whole(batch, encoded):
            return True
        # ends[k]: encoded bytes of the first k records; objects get slices, not copies.
        ends, data = encoded.ends, memoryview(encoded.data)
        offsets = batch.offsets()
        policy = self._unit.route.flush
        interval_ms = flush.rolling_interval_ms(policy)
        timestamps = batch.timestamps()
        n, i = len(ends) - 1, 0
        while i < n:
            chunk = self._open.get(())
            if chunk is None:
                chunk = self._open_chunk(offsets[i], timestamps[i], ())
            # Roll after index `last` (count or size reached), or before `cut` (interval).
            last = i + (policy.count - chunk.records) - 1
            room = policy.size - chunk.writer.bytes_written()
            last = min(last, bisect.bisect_left(ends, ends[i] + room, lo=i + 1) - 1)
            full = last < n
            end = min(last + 1, n)
            cut = (
                None
                if interval_ms is None
                else _interval_cut(timestamps, i, end, chunk, interval_ms)
            )
            if cut is not None:
                end, full = cut, True
            if end > i:
                objects.write_encoded(chunk, data[ends[i] : ends[end]], end - i, offsets[end - 1])
            if full:
                self._roll(())
            elif end > i:
                objects.stream(chunk)
            i = end
        return True

    def _add_whole(self, batch: Batch | TransformedBatch, encoded: EncodedBatch) -> bool:
        """Write the whole batch into the open object when no roll falls inside it (the
        common case: an object spans many batches), as :meth:`add_batch`'s cuts would, but
        decided from the batch's record count, bytes and latest timestamp alone, without its
        per-record columns (offsets, ends, timestamps: ~0.1 CPU-s per million records).
        False, with nothing written, when a roll may fall inside (an object it opened stays
        open, as the general path would have opened it)."""
        n = encoded.count
        if n == 0:
            return False
        policy = self._unit.route.flush
        chunk = self._open.get(())
        if chunk is None:
            chunk = self._open_chunk(batch.offset_at(0), batch.timestamp_at(0), ())
        if chunk.records + n >= policy.count:
            return False
        if chunk.writer.bytes_written() + len(encoded.data) >= policy.size:
            return False
        first, interval_ms = chunk.first_timestamp, flush.rolling_interval_ms(policy)
        if (
            first is not None
            and interval_ms is not None
            and batch.latest_timestamp() - first >= interval_ms
        ):
            return False
        objects.write_encoded(chunk, memoryview(encoded.data), n, batch.offset_at(n - 1))
        objects.stream(chunk)
        return True

    def bytes_so_far(self) -> int:
        """Bytes of the objects written so far, and encoded into the open ones (progress)."""
        return (
            sum(o.size for o in self.lifecycle.uploaded())
            + self._uploads.bytes
            + sum(c.writer.bytes_written() for c in self._open.values())
        )

    def _open_chunk(
        self, offset: int, timestamp: int | None, values: tuple[str | None, ...]
    ) -> OpenChunk:
        key = self._objects.key(self._layout.key(self._unit.tp, offset, values))
        chunk = self._objects.open(key, offset, timestamp)
        self.lifecycle.open(key)
        self._open[values] = chunk
        return chunk

    def _roll(self, values: tuple[str | None, ...]) -> None:
        """Close the chunk of ``values``; it waits with the other closed ones to be marked
        and uploaded (:class:`.uploads.Uploads`)."""
        chunk = self._open.pop(values)
        try:
            if chunk.records == 0:
                drop(self.lifecycle, chunk.key, chunk.path, chunk.upload, chunk.file)
                return
            closed = objects.close(chunk)
        except BaseException:
            drop(self.lifecycle, chunk.key, chunk.path, chunk.upload, chunk.file)
            raise
        self._uploads.add(closed)

    def flush_all(self) -> None:
        """Roll every open chunk, oldest first, and upload them (the end of a bounded run)."""
        self._roll_before(None)
        self._uploads.send()

    def _roll_before(self, cut: int | None) -> None:
        """Roll the open chunks whose first offset is before ``cut`` (all with None), oldest
        first."""
        for values in sorted(self._open, key=lambda v: self._open[v].first_offset):
            if cut is None or self._open[values].first_offset < cut:
                self._roll(values)

    def finish(self, stop: int, young_after_ms: int | None) -> int:
        """End the unit: upload what may be committed and return the commit offset.

        With ``young_after_ms`` set, open chunks whose first record is newer than it are held
        back (not uploaded; the next run reads them again) to avoid a crop of small files;
        :func:`flush.commit_cut` picks the clean cut.
        """
        cut = stop
        if young_after_ms is not None:
            spans = [
                flush.OpenSpan(c.first_offset, c.last_offset, c.first_timestamp)
                for c in self._open.values()
            ]
            # The last offset in any object rolled so far (start - 1 before the first).
            written_end = max(
                (
                    *(o.last_offset for o in self.lifecycle.uploaded()),
                    *self._uploads.last_offsets(),
                ),
                default=self._unit.start - 1,
            )
            cut = flush.commit_cut(spans, written_end, stop, young_after_ms)
        self._roll_before(cut)
        self._uploads.send()
        self.discard_all()  # what is left starts at or after the cut: held back
        return cut

    def _discard(self, values: tuple[str | None, ...]) -> None:
        chunk = self._open.pop(values)
        objects.release(chunk.path, chunk.upload, chunk.file)
        self.lifecycle.discard(chunk.key)

    def discard_all(self) -> None:
        """Drop every open or closed chunk not uploaded yet (held back, or a failed unit)."""
        for values in list(self._open):
            self._discard(values)
        self._uploads.discard()


def _interval_cut(
    timestamps: list[int | None], start: int, end: int, chunk: OpenChunk, interval_ms: int
) -> int | None:
    """The first index in ``[start, end)`` whose record lies a full interval after the
    chunk's first record (it starts the next object), or None. Same rule as
    :func:`flush.interval_elapsed`."""
    first = chunk.first_timestamp
    if first is None:
        return None
    window = timestamps[start:end]
    if None not in window:
        latest = max(cast(list[int], window), default=first)
        if latest - first < interval_ms:
            return None  # the common case, decided without a Python step per record
    for k in range(start, end):
        ts = timestamps[k]
        if ts is not None and ts - first >= interval_ms and (k > start or chunk.records > 0):
            return k
    return None

"""The lifecycle of the objects a work unit writes: their stages, and who moves them.

::

    (new) --open--> WRITING --mark--> MARKED --create--> UPLOADED --commit--> COMMITTED
                       |                ^
                       +--discard--> DISCARDED         (new) --mark--> MARKED

- ``WRITING``: being written into a spool file (:mod:`.chunks` opens it). Nothing of it is
  in S3 but the parts of a streaming upload, which an abort removes (or, after a crash, the
  next run's ``job.abort_stale_uploads``).
- ``DISCARDED``: dropped before its marker: a young tail held back, a record that could not
  be written, a failed unit. The next run reads its records again.
- ``MARKED``: its intent marker is in S3 (:mod:`.state.pending`), written after a lease
  proof. From here a crash leaves something the next run's recovery deletes by the marker.
  Objects made in memory (a block index, the dead letters) start here.
- ``UPLOADED``: created, never overwriting (:meth:`.UnitFencing.create`), beyond the
  partition's committed offset.
- ``COMMITTED``: the partition state's next offset covers it (``If-Match`` on the ETag the run
  fenced it with); its marker is stale, cleared by whoever committed (the driver clears
  the markers of a whole batch's units in one bulk delete).

Who moves them: :class:`.chunks.ChunkSet` opens and discards its objects,
:class:`.uploads.Uploads` marks and creates them and their block indexes;
:func:`.commit.commit_unit` marks and creates the dead letters and commits a unit that
commits itself. A piece of a split partition hands its markers to the driver, which commits
the pieces in offset order (:func:`commit_state` from :mod:`.subunits`); an Iceberg route's
objects are committed by the driver's table commit (:mod:`.iceberg`). What a crashed or
fenced run left ``MARKED`` or ``UPLOADED`` the next run deletes before it writes
(``pending.recover``).

The invariant the moves keep: every ``MARKED`` or ``UPLOADED`` object has its marker (an
Iceberg route keeps none: what no snapshot references is an orphan, removed at session
start).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafka_archive.archiver.core.model import ObjectWritten, WorkUnit
from kafka_archive.archiver.protocol.tasks import LogFencing, Stamp
from kafka_archive.archiver.read.listing import partition_objects
from kafka_archive.archiver.state import checkpoint, pending
from kafka_archive.archiver.state.fencing import UnitFencing
from kafka_archive.archiver.store.s3 import S3Store

# Keys of the last objects a partition state names (for people reading it).
MAX_KEYS_IN_STATE = 100


class Stage(enum.Enum):
    WRITING = "writing"
    DISCARDED = "discarded"
    MARKED = "marked"
    UPLOADED = "uploaded"
    COMMITTED = "committed"


# The legal moves: from a stage (None: an object not seen yet) to the next.
MOVES: dict[Stage | None, frozenset[Stage]] = {
    None: frozenset({Stage.WRITING, Stage.MARKED}),
    Stage.WRITING: frozenset({Stage.DISCARDED, Stage.MARKED}),
    Stage.MARKED: frozenset({Stage.UPLOADED}),
    Stage.UPLOADED: frozenset({Stage.COMMITTED}),
    Stage.DISCARDED: frozenset(),
    Stage.COMMITTED: frozenset(),
}


class IllegalMove(RuntimeError):
    """A move the lifecycle does not allow (a bug, not an operator's fault)."""


@dataclass(slots=True)
class _Object:
    stage: Stage
    marker: str | None = None
    # A data object's offsets and size (a block index and the dead letters have none).
    written: ObjectWritten | None = None


class Lifecycle:
    """The objects of one work unit, each in its stage; the moves prove the lease where a
    write could hurt another run, and refuse what the lifecycle does not allow."""

    def __init__(
        self,
        unit: WorkUnit,
        store: S3Store,
        fencing: UnitFencing | LogFencing | None = None,
        confirm_topic: Callable[[], None] = lambda: None,
    ):
        """``confirm_topic`` proves, before a marker or the commit, that what the unit read
        is of the planned topic (:class:`.state.identity.TopicProof`). Under
        commit_protocol=log (``unit.log_batch``) objects are only created (no marker, lease
        proof nor commit: :mod:`.protocol.tasks`); the driver commits them."""
        self._unit = unit
        self._confirm_topic = confirm_topic
        self._store = store
        self._fencing: UnitFencing | LogFencing = fencing or (
            LogFencing(store, unit) if unit.log_batch else UnitFencing(store, unit)
        )
        self._keeps_markers = unit.route.iceberg is None and not unit.log_batch
        self._objects: dict[str, _Object] = {}
        self._marked: list[str] = []  # in the order their markers were written
        self._uploaded: list[str] = []  # data objects, in upload order
        self._committed = False  # a unit commits once, at its end
        self.committed_markers: tuple[str, ...] = ()  # stale once committed

    @property
    def stamp(self) -> Stamp | None:
        """What makes this attempt's objects its own (commit_protocol=log; else None)."""
        return self._fencing.stamp if isinstance(self._fencing, LogFencing) else None

    @property
    def commits_here(self) -> bool:
        """Whether the unit commits its objects itself (not a piece of a split partition,
        nor an Iceberg route: their commit is the driver's)."""
        return self._keeps_markers and not self._unit.deferred and not self._unit.log_batch

    def stage(self, key: str) -> Stage | None:
        found = self._objects.get(key)
        return found.stage if found is not None else None

    def open(self, key: str) -> None:
        """A new object, to be written in a spool file."""
        self._move(key, Stage.WRITING)

    def discard(self, key: str) -> None:
        """Drop an object being written (nothing of it is in S3)."""
        self._move(key, Stage.DISCARDED)

    def mark(self, keys: Sequence[str], first_offset: int) -> None:
        """Record the intent to upload ``keys`` (an object and its block index) whose
        records start at ``first_offset``: a lease proof, then one marker."""
        self.mark_all([(key, first_offset) for key in keys])

    def mark_all(self, objects: Sequence[tuple[str, int]]) -> None:
        """Record the intent to upload each ``(key, first offset)`` of ``objects``: a lease
        proof, then one marker naming them all (one request however many objects)."""
        for key, _ in objects:
            self._check(key, Stage.MARKED)
        if not objects:
            return
        self._confirm_topic()
        self._fencing.check()
        unit = self._unit
        marker = None
        if self._keeps_markers:
            marker = pending.mark_all(
                self._store,
                unit.route.target,
                unit.job,
                unit.tp,
                objects,
                unit.run_id,
                unit.epoch,
            )
        for key, _ in objects:
            self._move(key, Stage.MARKED).marker = marker
            self._marked.append(key)

    def create(
        self,
        key: str,
        send: Callable[[], None],
        written: ObjectWritten | None = None,
        of: ObjectWritten | None = None,
    ) -> str | None:
        """Upload a marked object by calling ``send``, create-only and behind a lease proof;
        ``written`` describes a data object (offsets, records, size), ``of`` the data object
        another one (its block index) is made from."""
        self._check(key, Stage.UPLOADED)
        data = written or of
        content = None
        if data is not None:
            content = pending.content_tag(
                data.first_offset, data.last_offset, data.records, data.size
            )
        etag = self._fencing.create(key, send, content)
        if written is not None and etag is not None and self._unit.log_batch:
            written = dataclasses.replace(written, etag=etag)
        if of is not None and etag is not None and self._unit.log_batch:
            # A block index: the log names it beside its data object (uploaded before it).
            made = self._objects.get(of.key)
            if made is not None and made.written is not None:
                made.written = dataclasses.replace(made.written, index=(key, etag))
        self._move(key, Stage.UPLOADED).written = written
        if written is not None:
            self._uploaded.append(key)
        return etag

    def uploaded(self) -> tuple[ObjectWritten, ...]:
        """The data objects uploaded so far (committed since or not), in upload order."""
        return tuple(w for k in self._uploaded if (w := self._objects[k].written) is not None)

    def markers(self) -> tuple[str, ...]:
        """The markers of the objects marked and not committed: a piece hands them to the
        driver, which clears them once it commits."""
        return tuple(
            dict.fromkeys(
                marker
                for k in self._marked
                if (o := self._objects[k]).stage is not Stage.COMMITTED
                and (marker := o.marker) is not None
            )
        )

    def commit(self, next_offset: int) -> checkpoint.LoadedState | None:
        """Advance the partition state to ``next_offset`` over the uploaded objects, after
        a lease proof; returns the state written and its ETag (None: not known). Their
        markers are stale from here on: :attr:`committed_markers` names them, for the
        caller to clear (the driver, in bulk)."""
        if not self.commits_here:
            raise IllegalMove(f"{self._unit.tp}: this unit's commit is the driver's")
        if self._committed:
            raise IllegalMove(f"{self._unit.tp}: the unit committed already")
        for key, found in self._objects.items():
            if found.stage in (Stage.WRITING, Stage.MARKED):
                raise IllegalMove(f"cannot commit past {key}: it is {found.stage.value}")
            if found.written is not None and found.written.last_offset >= next_offset:
                raise IllegalMove(f"{key} ends at or after the commit offset {next_offset}")
        self._confirm_topic()
        self._fencing.check()
        markers = self.markers()
        written = commit_state(
            self._store, self._unit, self._unit.start, next_offset, self.uploaded()
        )
        self._committed = True
        self.committed_markers = markers
        for found in self._objects.values():
            if found.stage is Stage.UPLOADED:
                found.stage = Stage.COMMITTED
        if written is not None and getattr(self._fencing, "other_attempt", False):
            self._remove_other_attempts(next_offset)
        return written

    def _remove_other_attempts(self, next_offset: int) -> None:
        """After this attempt committed: delete (If-Match) the objects an earlier attempt of
        this unit wrote in its committed range under keys this one did not (it cut other
        boundaries: the log cleaner ran in between). Rare, so one listing of the partition
        here, not in every unit."""
        unit, bucket = self._unit, self._unit.route.target.bucket
        for found in partition_objects(self._store, unit.route, unit.tp, next_offset):
            if found.start_offset < unit.start or found.key in self._objects:
                continue
            head = self._store.head(bucket, found.key)
            if head is not None and self._fencing.of_this_unit(head):
                self._store.delete_if_match(bucket, found.key, head.etag)

    def _check(self, key: str, to: Stage) -> None:
        if self._committed:
            raise IllegalMove(f"{key}: the unit committed already")
        now = self.stage(key)
        if to not in MOVES[now]:
            raise IllegalMove(f"{key}: {now.value if now else 'new'} -> {to.value}")

    def _move(self, key: str, to: Stage) -> _Object:
        self._check(key, to)
        found = self._objects.get(key)
        if found is None:
            found = self._objects[key] = _Object(to)
        found.stage = to
        return found


def commit_state(
    store: S3Store,
    unit: WorkUnit,
    start: int,
    next_offset: int,
    written: Sequence[ObjectWritten],
) -> checkpoint.LoadedState | None:
    """Advance the partition of ``unit`` from ``start`` (where the run began it) to
    ``next_offset`` over the objects ``written`` (conditional on the ETag the run planned
    with); returns the state written and its ETag (None: not known). The caller proved
    the lease just before, and clears the objects' intent markers after (a leftover one is
    harmless: the next run's recovery ignores markers below the committed offset)."""
    state = checkpoint.PartitionState(
        next_offset=next_offset,
        run_id=unit.run_id,
        committed_at=checkpoint.now_iso(),
        last_objects=tuple(o.key for o in written[-MAX_KEYS_IN_STATE:]),
        records=unit.prior.records + sum(o.records for o in written),
        bytes=unit.prior.bytes + sum(o.size for o in written),
        objects=unit.prior.objects + len(written),
        epoch=unit.epoch,
        commits=checkpoint.append_commit(unit.commits, start, unit.epoch),
        gaps=unit.gaps,
    )
    return checkpoint.commit(
        store, unit.route.target, unit.job, unit.tp, state, expected_etag=unit.state_etag
    )

"""What a target has committed: per partition the committed end and the committed objects,
the one view ``status``, ``verify``, ``cat`` and ``restore`` take them from.

A target with a commit log (:mod:`.protocol`, issue 37) that commits anything (an import of
its states, or a commit) is read from the log: the newest checkpoint plus the tail (one
LIST of the checkpoints, a GET each of the checkpoint and of the entries after it). The
objects are those the log names, found without a listing; an object under the prefix that
the log does not name is not committed (a crashed or fenced writer's, vacuum's to remove),
never data. A target without one is read as before the log: the partition states, and the
objects a listing finds below each committed offset (:mod:`.listing`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from kafka_archive.archiver.core.errors import DamagedObjectError, FormatVersionError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.partition.layouts import layout_for
from kafka_archive.archiver.partition.parse import parse_key
from kafka_archive.archiver.protocol import core, naming, steps
from kafka_archive.archiver.protocol.log import (
    LogFormatError,
    LogVersionError,
    ObjectRef,
    Removed,
    log_prefix,
)
from kafka_archive.archiver.protocol.s3 import BucketStore
from kafka_archive.archiver.read import listing
from kafka_archive.archiver.read.listing import StoredObject
from kafka_archive.archiver.state.checkpoint import LoadedState, PartitionState
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Route, Target


def read_log(store: S3Store, target: Target) -> core.LogState:
    """``target``'s commit log folded to its tail (empty when it has none). A log this
    version cannot read is one line: newer (exit 24) or damaged (exit 14)."""
    where = f"the commit log s3://{target.bucket}/{log_prefix(naming.log_head(target))}"
    try:
        return steps.drive(
            steps.read_log(naming.log_head(target)), BucketStore(store, target.bucket)
        )
    except LogVersionError as exc:
        raise FormatVersionError(
            f"{where}: {exc}",
            hint="Run the same or a newer version of kafka-archive on this prefix",
        ) from None
    except LogFormatError as exc:
        raise DamagedObjectError(
            f"{where}: {exc}", hint="Restore the log from a version of the bucket"
        ) from None
    except core.InvalidEntry as exc:
        raise DamagedObjectError(
            f"{where} is broken: {exc}", hint="Restore the log from a version of the bucket"
        ) from None


@dataclass(frozen=True, slots=True)
class CommittedView:
    """A target's committed partitions: from its log (``log``), or from its states and
    listing (``log`` None)."""

    target: Target
    log: core.LogState | None

    @property
    def from_log(self) -> bool:
        return self.log is not None

    def _partitions(self) -> dict[TopicPartition, tuple[int, tuple[ObjectRef, ...]]]:
        assert self.log is not None
        return {
            naming.topic_partition(ref): (st.end, st.objects)
            for ref, st in self.log.partitions.items()
        }

    def removed(self) -> dict[TopicPartition, tuple[Removed, ...]]:
        """The offsets erase and expire removed, per partition (a log view only; none from
        states): in no object, and no hole."""
        if self.log is None:
            return {}
        return {
            naming.topic_partition(ref): st.removed
            for ref, st in self.log.partitions.items()
            if st.removed
        }

    def offsets(self, store: S3Store) -> dict[TopicPartition, int]:
        """The committed end of every partition archived under the target."""
        if self.log is None:
            return listing.committed_offsets(store, self.target)
        return {tp: end for tp, (end, _) in self._partitions().items() if end > 0}

    def named(self, topic: str) -> dict[TopicPartition, tuple[ObjectRef, ...]]:
        """The objects the log names for ``topic``'s partitions (a log view only)."""
        return {tp: objs for tp, (_, objs) in self._partitions().items() if tp.topic == topic}

    def objects(
        self, store: S3Store, route: Route
    ) -> dict[TopicPartition, tuple[StoredObject, ...]]:
        """The committed objects of ``route``'s topic by partition, by start offset: those
        the log names, or (states) those listed below each partition's committed offset
        (all of a partition without state, as ``restore`` always took them)."""
        if self.log is None:
            committed = self.offsets(store)
            listed = listing.list_partition_objects(store, route)
            kept = {
                tp: tuple(o for o in objs if tp not in committed or o.start_offset < committed[tp])
                for tp, objs in listed.items()
                if tp.topic == route.topic
            }
            return {tp: objs for tp, objs in kept.items() if objs}
        return {
            tp: stored
            for tp, objs in self.named(route.topic).items()
            if (stored := stored_objects(route, tp, objs))
        }

    def partition_objects(
        self, store: S3Store, route: Route, tp: TopicPartition
    ) -> tuple[int | None, tuple[StoredObject, ...]]:
        """``tp``'s committed end (None: nothing committed) and its committed objects."""
        if self.log is None:
            end = self.offsets(store).get(tp)
            return end, listing.partition_objects(store, route, tp, end)
        end, objs = self._partitions().get(tp, (0, ()))
        return (end or None), stored_objects(route, tp, objs)

    def states(self) -> dict[TopicPartition, LoadedState]:
        """The log's partitions as the state protocol's states (what ``status`` and
        ``verify`` show of a partition); a log view only."""
        assert self.log is not None
        out: dict[TopicPartition, LoadedState] = {}
        for ref, st in self.log.partitions.items():
            if st.end <= 0:
                continue
            state = PartitionState(
                next_offset=st.end,
                run_id=st.holder.run_id if st.holder is not None else "",
                committed_at=iso_time(st.committed_at),
                records=sum(o.records for o in st.objects),
                bytes=sum(o.size for o in st.objects),
                objects=len(st.objects),
                epoch=st.holder.epoch if st.holder is not None else 0,
                gaps=st.gaps,
            )
            out[naming.topic_partition(ref)] = LoadedState(state, None)
        return out


def iso_time(at: float | None) -> str:
    """A log's commit time as the states write theirs (UTC, to the second; "": none)."""
    if at is None:
        return ""
    return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stored_objects(
    route: Route, tp: TopicPartition, objects: tuple[ObjectRef, ...]
) -> tuple[StoredObject, ...]:
    """Named objects as the readers take them: their group and start from the key (as the
    listing reads them), in start-offset order."""
    layout = layout_for(route)
    out = []
    for o in objects:
        parsed = parse_key(layout, o.key)
        group = parsed.group if parsed is not None else ()
        out.append(StoredObject(o.first, o.key, tp, group, o.size))
    return tuple(sorted(out))


def committed_view(store: S3Store, target: Target) -> CommittedView:
    """``target``'s committed view: its log when the log commits anything, else its
    states (one LIST and one GET more than the states alone on a target without a log);
    its states too once ``export-states`` moved it back to them (:func:`.naming.exported`)."""
    log = read_log(store, target)
    logged = core.committed_any(log) and not naming.exported(log)
    return CommittedView(target, log if logged else None)


def logged_views(
    store: S3Store, targets: Mapping[Target, object] | list[Target]
) -> dict[Target, CommittedView]:
    """The committed view of each of ``targets`` that keeps a log (the others left out)."""
    views = {target: committed_view(store, target) for target in targets}
    return {target: view for target, view in views.items() if view.from_log}


def logged_states(
    store: S3Store, targets: Mapping[Target, object] | list[Target]
) -> dict[Target, dict[TopicPartition, LoadedState]]:
    """The states of each of ``targets`` read from a log (targets without one left out),
    for :func:`.plan.views.partition_states`'s ``logs``."""
    return {target: view.states() for target, view in logged_views(store, targets).items()}

"""An Iceberg table's kafka-archive state: the next offset of every partition the table
holds, and who committed it, in the summary of each snapshot of ours and (set in the same
transaction) in the table's properties, which survive that snapshot's expiry.

The state is the offsets of the last snapshot of ours in the current snapshot's ancestry
(another tool's compaction on top carries none), or the properties' when expiry removed it
(:func:`table_offsets`). Pure: these read a pyiceberg table's metadata held in memory."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from kafka_archive.archiver.core.model import TopicPartition

OFFSETS_PREFIX = "kafka-archive.offsets."
RECORDS = "kafka-archive.records"
RUN_ID = "kafka-archive.run-id"
JOB = "kafka-archive.job"
# commit_protocol=log: the epoch of the claim the committing run holds in the target's commit
# log (its fence token), in the summary and, set with it, the table properties.
EPOCH = "kafka-archive.epoch"
# Table properties: the id, sequence number and time of the snapshot our last commit made,
# set in the same transaction as the offsets it also sets as table properties (which
# survive that snapshot's expiry).
STATE_SNAPSHOT = "kafka-archive.snapshot-id"
STATE_SEQUENCE = "kafka-archive.snapshot-sequence-number"
STATE_TIME = "kafka-archive.snapshot-timestamp-ms"


def offset_property(tp: TopicPartition) -> str:
    return f"{OFFSETS_PREFIX}{tp.topic}.{tp.partition}"


def offsets_of(summary: Mapping[str, str]) -> dict[TopicPartition, int]:
    """The next offset of each partition, from a snapshot summary's properties."""
    out: dict[TopicPartition, int] = {}
    for key, value in summary.items():
        if key.startswith(OFFSETS_PREFIX):
            topic, _, partition = key[len(OFFSETS_PREFIX) :].rpartition(".")
            if topic and partition.isdigit():
                out[TopicPartition(topic, int(partition))] = int(value)
    return out


def snapshot_properties(
    offsets: Mapping[TopicPartition, int],
    records: int,
    run_id: str,
    job: str,
    epoch: int | None = None,
) -> dict[str, str]:
    """The summary of a snapshot of ours: the next offset of every partition of the table
    (in partition order), the records it adds, and the run and job that commit it (and, in
    commit_protocol=log, the ``epoch`` of its claim)."""
    props = {offset_property(tp): str(offset) for tp, offset in sorted(offsets.items())}
    props |= {RECORDS: str(records), RUN_ID: run_id, JOB: job}
    if epoch is not None:
        props[EPOCH] = str(epoch)
    return props


def table_properties(props: Mapping[str, str], made: Any) -> dict[str, str]:
    """The table properties set with a snapshot of ours (``made``, of summary ``props``):
    its offsets, stamped with the snapshot's id, sequence number and time."""
    offsets = {k: v for k, v in props.items() if k.startswith(OFFSETS_PREFIX) or k == EPOCH}
    stamp = {
        STATE_SNAPSHOT: str(made.snapshot_id),
        STATE_SEQUENCE: str(made.sequence_number or 0),
        STATE_TIME: str(made.timestamp_ms),
    }
    return {**offsets, **stamp}


def table_offsets(table: Any) -> dict[TopicPartition, int]:
    """The table's state: the offsets of the last snapshot we committed in the current
    snapshot's ancestry (another writer's compaction, rewrite or delete on top of it
    carries none); when that snapshot was expired, the offsets the table's properties
    carry, which our commits set in the same transaction as their snapshot
    (:data:`STATE_SNAPSHOT` names it, :data:`STATE_SEQUENCE` and :data:`STATE_TIME` date it)."""
    if table is None:
        return {}
    found, oldest = last_of_ours(table)
    if found is not None:
        return offsets_of(found.summary.additional_properties)
    properties = table.properties
    stamped = _number(properties.get(STATE_SNAPSHOT))
    if stamped is None or oldest is None or table.metadata.snapshot_by_id(stamped) is not None:
        # None of ours ever, or ours were rolled back: the snapshot the properties name is
        # still there, off the current ancestry, which holds none of ours.
        return {}
    # That snapshot is gone. Older than all the ancestry has left: expired with the history
    # before it (the properties hold). Else it was rolled back, then expired.
    sequence = _number(properties.get(STATE_SEQUENCE)) or 0
    if sequence and oldest.sequence_number:
        expired = bool(oldest.sequence_number > sequence)
    else:  # format 1: no sequence numbers; the commit times tell
        expired = oldest.timestamp_ms > (_number(properties.get(STATE_TIME)) or 0)
    return offsets_of(properties) if expired else {}


def table_epoch(table: Any) -> int | None:
    """The highest claim epoch a commit of ours carries (commit_protocol=log): the last
    snapshot of ours in the ancestry's, or the table property every such commit sets (which
    outlives that snapshot's expiry, and a rollback: a newer claimant committed once, so
    an older one stays refused); None when none carries one."""
    if table is None:
        return None
    found, _ = last_of_ours(table)
    summary = found.summary.additional_properties if found is not None and found.summary else {}
    epochs = [_number(summary.get(EPOCH)), _number(table.properties.get(EPOCH))]
    return max((e for e in epochs if e is not None), default=None)


def last_of_ours(table: Any) -> tuple[Any, Any]:
    """The newest snapshot of the current snapshot's ancestry that holds our offsets (or
    None), and the oldest of the ancestry's snapshots that are left (or None when there is
    no current snapshot)."""
    metadata = table.metadata
    snapshot = oldest = table.current_snapshot()
    while snapshot is not None:
        oldest = snapshot
        summary = snapshot.summary.additional_properties if snapshot.summary else {}
        if RUN_ID in summary or offsets_of(summary):
            return snapshot, oldest
        parent = snapshot.parent_snapshot_id
        # pyiceberg's expiry sets a child's parent to None; Java's leaves a missing id.
        snapshot = None if parent is None else metadata.snapshot_by_id(parent)
    return None, oldest


def committed_by(table: Any, run_id: str) -> bool:
    """Whether the last snapshot of ours in the table's ancestry is run ``run_id``'s."""
    snapshot = None if table is None else last_of_ours(table)[0]
    if snapshot is None or snapshot.summary is None:
        return False
    return bool(snapshot.summary.additional_properties.get(RUN_ID) == run_id)


def committed_at(table: Any) -> str | None:
    """When the table's last snapshot of ours (else its current one) was committed
    (ISO-8601 UTC), or None."""
    snapshot = None if table is None else last_of_ours(table)[0]
    if snapshot is None:
        snapshot = None if table is None else table.current_snapshot()
    if snapshot is None:
        return None
    moment = dt.datetime.fromtimestamp(snapshot.timestamp_ms / 1000, dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _number(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None

"""How the archive's targets and partitions are named in the commit log: the one seam the
write side and the read side share.

A target (bucket + prefix) has one log, under ``<prefix>/.kafka-archive/log/`` beside the
partition states it replaces. Under one target each topic has one route (a route's state
belongs to its target and topic, :mod:`.state.paths`), so a partition's stream in the log is
named by its topic and partition.
"""

from __future__ import annotations

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import PartitionRef
from kafka_archive.kcql.plan import Target


def log_head(target: Target) -> str:
    """The prefix ``log.log_prefix`` and ``steps.read_log`` take for ``target``'s log."""
    return target.head


def partition_ref(tp: TopicPartition) -> PartitionRef:
    """``tp``'s stream in its target's log."""
    return PartitionRef(route=tp.topic, topic=tp.topic, partition=tp.partition)


def topic_partition(ref: PartitionRef) -> TopicPartition:
    """The partition a log stream archives (the inverse of :func:`partition_ref`)."""
    return TopicPartition(ref.topic, ref.partition)


# ``export-states`` (the downgrade to the states protocol) claims every partition of the log
# under a run id of its own: from that claim on the partition states are the archive, and
# the log is history. Told apart by the run id alone, so that readers and writers, which
# read the log anyway, learn it without a request more.
EXPORTER = "export-states-"


def exporter(run_id: str) -> str:
    """The run id export-states claims under."""
    return f"{EXPORTER}{run_id}"


def exported(state: core.LogState) -> bool:
    """Whether export-states claimed the log (its partition states are the archive)."""
    return any(
        st.holder is not None and st.holder.run_id.startswith(EXPORTER)
        for st in state.partitions.values()
    )

"""Archives written before routes owned their state: ``<prefix>/.kafka-archive/<job>/``
with ``lock.json``, ``state/<topic>/<partition>.json`` and ``pending/<topic>/<partition>/``.

The first run that writes such a target, holding the target's lease (:mod:`.lock`):

1. retires every lock of the old layout (:func:`retire_locks`): a live one means a run of
   an earlier version is writing, and this run stops (exit 8); an expired, released or dead
   one is taken over conditionally with this run's epoch, so that a paused old run loses
   its lease and writes nothing more. The retired lock reads, to every earlier version, as
   held for ever by a holder no host can prove dead (not released, expiring in 9999, no
   pid): an earlier version run again on the prefix stops with "already running" (exit 8)
   instead of taking the job's old lock, finding no state there and archiving again from
   ``--start`` over this version's objects;
2. adopts, for each partition of its routes that has no state yet, the old state
   (:func:`adopt`): its intent markers move first, then the state is created at the
   route's key, then the old state is deleted. A crash between the steps is finished by the
   next run (the old state stays until the new one exists). When several old jobs hold
   state for one partition, the one named by ``--job-name`` is adopted; without it the run
   stops and says so.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafka_archive.archiver.core.errors import JobLockedError, StateConflictError
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.state import lease
from kafka_archive.archiver.state.paths import (
    legacy_root,
    pending_prefix,
    state_key,
    state_root,
)
from kafka_archive.archiver.store.s3 import PreconditionFailed, S3Store
from kafka_archive.kcql.plan import Target

log = logging.getLogger(__name__)

# A retired lock's lease ends after any run (as earlier versions parse it: both fields).
RETIRED_UNTIL = "9999-12-31T23:59:59Z"
RETIRED_UNTIL_MS = 253_402_300_799_000
# What only a topic id record holds (:mod:`.identity`): earlier versions kept topic
# ``lock``'s at ``topics/lock.json``, the key of a job ``topics``'s lock.
_TOPIC_ID = "topic_id"

_JOB = r"(?P<job>[A-Za-z0-9][A-Za-z0-9._-]{0,127})"
_KEY = re.compile(
    rf"^{_JOB}/(?:(?P<lock>lock\.json)"
    r"|state/(?P<topic>[^/]+)/(?P<partition>[0-9]+)\.json"
    r"|pending/(?P<mtopic>[^/]+)/(?P<mpartition>[0-9]+)/(?P<marker>[^/]+))$"
)


@dataclass
class LegacyLayout:
    """What one target holds of the old layout (one listing)."""

    locks: list[str] = field(default_factory=list)  # job names
    states: dict[TopicPartition, dict[str, str]] = field(default_factory=dict)  # job -> key
    markers: dict[tuple[str, TopicPartition], list[str]] = field(default_factory=dict)

    def jobs_of(self, tp: TopicPartition) -> set[str]:
        return set(self.states.get(tp, {})) | {j for j, t in self.markers if t == tp}

    def partitions(self) -> set[TopicPartition]:
        return set(self.states) | {tp for _, tp in self.markers}


def scan(store: S3Store, target: Target, keys: Iterable[str] | None = None) -> LegacyLayout:
    """What the target holds of the old layout, from ``keys`` (a listing of its
    ``.kafka-archive/`` a caller made) or one listing here."""
    root = f"{state_root(target)}/"
    found = LegacyLayout()
    for key in store.list_keys(target.bucket, root) if keys is None else keys:
        match = _KEY.match(key[len(root) :])
        if match is None:
            continue
        job = match["job"]
        if match["lock"]:
            found.locks.append(job)
        elif match["topic"]:
            tp = TopicPartition(match["topic"], int(match["partition"]))
            found.states.setdefault(tp, {})[job] = key
        else:
            tp = TopicPartition(match["mtopic"], int(match["mpartition"]))
            found.markers.setdefault((job, tp), []).append(key)
    return found


def retire_locks(
    store: S3Store, target: Target, layout: LegacyLayout, run_id: str, epoch: int
) -> None:
    """Take over every old-layout lock of ``target`` (see the module's doc)."""
    here = lease.Identity.here()
    for job in layout.locks:
        key = f"{legacy_root(target, job)}/lock.json"
        held = store.get_document(target.bucket, key)
        if held is None or held.body.get("retired") is True or _TOPIC_ID in held.body:
            continue  # (the last: the topic id record of a topic named "lock", not a lock)
        if not lease.may_take_over(held.body, lease.now_ms(), here):
            raise JobLockedError(
                f"job {job!r} is already running on s3://{target.bucket}/{target.prefix} "
                f"(an earlier kafka-archive version: run {held.body.get('run_id')} on host "
                f"{held.body.get('host')}, lease until {held.body.get('expires_at')})",
                hint="Wait for it to finish, then run this version; do not run earlier "
                "versions on this prefix again",
            )
        previous = lease.epoch_of(held.body) or 0
        moved_to = f"{state_root(target)}/lock.json"
        body = {
            "job": job,
            # What an earlier version's "already running" message names.
            "run_id": f"none: retired by run {run_id} of a newer kafka-archive",
            "host": f"none: the job's archive moved to s3://{target.bucket}/{moved_to}",
            "epoch": max(epoch, previous + 1),
            "released": False,
            "retired": True,
            "expires_at": RETIRED_UNTIL,
            "expires_at_ms": RETIRED_UNTIL_MS,
            "moved_to": moved_to,
        }
        try:
            store.put_document(target.bucket, key, body, if_match=held.etag)
        except PreconditionFailed:
            raise JobLockedError(
                f"a run of an earlier kafka-archive version took job {job!r}'s lock on "
                f"s3://{target.bucket}/{target.prefix}",
                hint="Wait for it to finish, then run this version",
            ) from None


def adopt(
    store: S3Store, target: Target, topics: Iterable[str], job: str, layout: LegacyLayout
) -> int:
    """Move old-layout states (and their intent markers) of ``topics`` to the routes' keys,
    for partitions that have no state yet; returns how many were adopted."""
    wanted = set(topics)
    adopted = 0
    for tp in sorted(layout.partitions()):
        if tp.topic not in wanted:
            continue
        jobs = layout.jobs_of(tp)
        if store.get_document(target.bucket, state_key(target, tp)) is not None:
            continue
        if len(jobs) == 1:
            (chosen,) = jobs
        elif job in jobs:
            chosen = job
        else:
            raise StateConflictError(
                f"earlier jobs {', '.join(sorted(jobs))} each hold state for {tp} under "
                f"s3://{target.bucket}/{state_root(target)}/",
                tp=tp,
                hint="Run with --job-name naming the job whose archive to continue",
            )
        _move_markers(store, target, tp, layout.markers.get((chosen, tp), []))
        old = layout.states.get(tp, {}).get(chosen)
        if old is not None:
            doc = store.get_document(target.bucket, old)
            if doc is not None:
                body = {**doc.body, "adopted_from": old}
                try:
                    store.put_document(target.bucket, state_key(target, tp), body, if_match=None)
                except PreconditionFailed:
                    continue  # created meanwhile: that one counts
                store.delete(target.bucket, [old])
                adopted += 1
                log.info(
                    "%s: adopted the state of job %s (next offset %s) from %s",
                    tp,
                    chosen,
                    body.get("next_offset"),
                    old,
                )
    return adopted


def _move_markers(store: S3Store, target: Target, tp: TopicPartition, keys: list[str]) -> None:
    for key in keys:
        raw = store.get_bytes(target.bucket, key)
        if raw is not None:
            store.put_bytes(target.bucket, pending_prefix(target, tp) + key.rsplit("/", 1)[-1], raw)
    if keys:
        store.delete(target.bucket, keys)


def forget(
    store: S3Store, target: Target, topics: Iterable[str], *, every: bool = False
) -> list[str]:
    """The old-layout state and marker keys of ``topics`` (``every``: of all topics), for a
    reset: otherwise the next run would adopt them."""
    wanted = set(topics)
    layout = scan(store, target)
    keys = [
        k
        for tp, by_job in layout.states.items()
        if every or tp.topic in wanted
        for k in by_job.values()
    ]
    keys += [
        k for (_, tp), found in layout.markers.items() if every or tp.topic in wanted for k in found
    ]
    return keys

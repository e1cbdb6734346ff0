"""``kafka-archive compact`` (issue 38) on a target that keeps a commit log: consecutive small
committed objects of a partition merged into objects up to ``--target-size``, swapped in by
one rewrite entry. Driver only: no Spark.

Per target: read the log (a target without one is refused, exit 2: nothing written); plan
each partition from the objects the log names (:mod:`.plan.maintenance`: runs of dense,
contiguous objects, the young end left alone under ``--older-than``); nothing to merge: done,
nothing written. Else claim the planned partitions as a run does (a claim entry: it fences a
run of the same target, and a later run's claim fences this one: exit 18), plan again on the
log as the claim left it, vacuum (as a run's session does), then rewrite each group
(:mod:`.write.rewrite`, a bounded thread pool) into new objects keyed
``<first>.g<N>.<ext>`` (N one above the replaced objects' highest generation), created
If-None-Match with the session's writer metadata, each try's bytes stamped as a run's
task's are (:class:`.protocol.tasks.Stamp`: Parquet or Avro metadata, the gzip FNAME; the
other formats at ``<first>.g<N>.e<epoch>a<attempt>.<ext>``), so no two tries ever create the
same bytes at one key. An object found at a new key (a crashed
compact's, or an earlier try of this one) is judged as a run's task judges one
(:func:`.core.found_object`): a fenced writer's or a dead try's is deleted If-Match and the
group written again. Then one rewrite entry per target (each partition's merged run of
groups); a 412 reads what was missed: fenced is exit 18, stale plans again, else the next seq.
A partition whose groups are not adjacent (an object that stays between them) is rewritten
once per run of adjacent groups in that same entry (format version 4).

PARTITIONBY and time layouts (``commit_log.interleaved``): a partition's objects of several
groups interleave, so each planned group is consecutive objects of one group (the key's
PARTITIONBY values and time folder, :func:`.partition.parse.parse_key`), merged up to the
target where the records keep their offsets (the envelope's metadata; else only dense,
contiguous objects), written into that group's folder, and swapped by an untiled rewrite
(``PartitionRewrite.tiled`` false, format version 6: new records = replaced records).
erase and expire still refuse these layouts (exit 2).

The replaced objects are left to vacuum, which deletes them once the grace has passed for
the object and for the partition's last rewrite entry (:func:`.core.vacuum_candidates`):
our readers take the objects from the log; readers that list the prefix see the records of
both until then.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kafka_archive.archiver.commands import commit_log, presence, table_maintenance, target_log
from kafka_archive.archiver.commands.target_log import TargetLog
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import (
    ConfigError,
    DamagedObjectError,
    FencedError,
    StateConflictError,
)
from kafka_archive.archiver.core.model import S3Requests, TopicPartition
from kafka_archive.archiver.iceberg.maintenance import TableJob
from kafka_archive.archiver.partition.layouts import Layout, layout_for
from kafka_archive.archiver.partition.parse import parse_key
from kafka_archive.archiver.partition.values import topic_segment
from kafka_archive.archiver.plan import maintenance
from kafka_archive.archiver.plan.naming import new_run_id
from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    ObjectRef,
    PartitionRef,
    PartitionRewrite,
    Removed,
)
from kafka_archive.archiver.protocol.maintenance import generation, joined
from kafka_archive.archiver.protocol.naming import log_head, topic_partition
from kafka_archive.archiver.protocol.s3 import BucketStore
from kafka_archive.archiver.protocol.steps import List, drive, read_log, send_read
from kafka_archive.archiver.protocol.tasks import Stamp, object_metadata
from kafka_archive.archiver.protocol.writer import object_writer
from kafka_archive.archiver.read.committed import read_log as read_committed_log
from kafka_archive.archiver.read.verdict import uncovered
from kafka_archive.archiver.state.paths import state_root
from kafka_archive.archiver.store.s3 import PreconditionFailed, S3Store
from kafka_archive.archiver.write.rewrite import Drop, Rewritten, keep_all, rewrite
from kafka_archive.kcql.plan import Plan, Route, Target

log = logging.getLogger(__name__)

WORKERS = 4
"""Groups rewritten at once (each reads up to ``rewrite.READ_AHEAD`` objects ahead)."""
TRIES = 8
"""Tries of one group whose new keys are taken (each try deletes one object in the way)."""
REPLANS = 3
"""Plans made again when the log moved under the rewrite (then exit 9: run again)."""


@dataclass(frozen=True, slots=True)
class CompactOptions:
    target_size: int = maintenance.DEFAULT_TARGET_SIZE
    older_than_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Job:
    """One maintenance command as the session carries it out: ``command`` names it in
    messages; ``request`` is the planner's; ``drop`` the rewriter's predicate and ``reason``
    what the rewrite entry records of the offsets it drops (erase, expire; never a key)."""

    command: str
    request: maintenance.Request
    drop: Drop = keep_all
    reason: str | None = None
    target_size: int = maintenance.DEFAULT_TARGET_SIZE
    older_than_seconds: float | None = None


@dataclass
class CompactResult:
    """What a maintenance command did over every target of the plan: the named objects (and
    their bytes) of the partitions it rewrote, before and after; the groups rewritten; the
    records dropped (erase, expire: by offset ranges); S3 requests."""

    partitions: int = 0
    groups: int = 0
    entries: int = 0
    objects_before: int = 0
    objects_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_dropped: int = 0
    vacuumed: int = 0
    s3_requests: S3Requests = field(default_factory=S3Requests)


Group = tuple[PartitionRef, tuple[maintenance.CommittedObject, ...]]
Done = tuple[tuple[ObjectRef, ...], tuple[tuple[int, int], ...], bool]
"""A group's new objects, the offsets it dropped, and whether it was left as it is."""


def compact(settings: Settings, plan: Plan, options: CompactOptions) -> CompactResult:
    """Compact every target of ``plan`` (the module's doc)."""
    request = maintenance.Compact(
        target_size=options.target_size,
        older_than_ms=None
        if options.older_than_seconds is None
        else int(options.older_than_seconds * 1000),
        offsets_stored=False,  # only dense, contiguous objects: their spans tile
    )
    job = Job("compact", request, keep_all, None, options.target_size, options.older_than_seconds)
    return maintain(settings, plan, job)


def maintain(settings: Settings, plan: Plan, job: Job) -> CompactResult:
    """Carry ``job`` out on every target of ``plan`` (the module's doc); Iceberg routes:
    :mod:`.table_maintenance`."""
    if any(r.iceberg is not None for r in plan.routes):
        return _with_tables(settings, plan, job)
    why = next((w for r in plan.routes if (w := refusal(r, job.request)) is not None), None)
    if why is not None:
        raise ConfigError(
            f"{job.command}: {why}", hint=f"{job.command} works on what commit_protocol=log runs"
        )
    store = S3Store(settings.s3)
    store.requests.reset()
    result = CompactResult()
    run_id = new_run_id()
    targets = sorted({r.target for r in plan.routes}, key=lambda t: (t.bucket, t.prefix))
    # every target checked before any write
    logs = {t: _logged(store, t, job.command) for t in targets}
    # A live session's presence on a target stops the command (exit 8) before it claims.
    with presence.present(
        store,
        targets,
        run_id=run_id,
        job=settings.job_name or "",
        command=job.command,
        ttl_seconds=settings.lock_ttl_seconds,
    ):
        for target in targets:
            routes = [r for r in plan.routes if r.target == target]
            _Target(store, settings, target, routes, logs[target], run_id, job, result).run()
    result.s3_requests = store.requests.read()
    return result


def refusal(route: Route, request: maintenance.Request | None = None) -> str | None:
    """Why the maintenance session cannot carry ``request`` out on ``route``'s objects (None:
    it can; ``request`` None: compact's). Iceberg routes are not asked: :func:`maintain`
    hands them to :mod:`.table_maintenance`."""
    if commit_log.interleaved(route) and not (
        request is None or isinstance(request, maintenance.Compact)
    ):
        return (
            f"{route.topic}: PARTITIONBY and time layouts interleave a partition's objects, so "
            "the offsets erase and expire remove would have to be named one by one (a range "
            "would cover other groups' records): not built"
        )
    if route.codecs.gzip_block_bytes:
        return (
            f"{route.topic}: a rewrite entry does not name the new objects' gzip block "
            "indexes yet (vacuum would take them)"
        )
    return None


def _logged(store: S3Store, target: Target, command: str) -> core.LogState:
    """The target's log; a target whose log commits nothing is refused (exit 2)."""
    state = read_committed_log(store, target)
    if core.committed_any(state):
        commit_log.refuse_exported(target, state)
        return state
    where = f"s3://{target.bucket}/{target.prefix}"
    if next(store.list_keys(target.bucket, f"{state_root(target)}/state/"), None) is not None:
        raise ConfigError(
            f"{command}: {where} keeps partition states, not a commit log",
            hint="Run kafka-archive run once with commit_protocol=log (it moves the archive "
            f"onto a commit log), then {command}",
        )
    raise ConfigError(
        f"{command}: {where} has no commit log that commits anything",
        hint="Archive it with kafka-archive run and commit_protocol=log first",
    )


class _Target:
    """One target's compaction (the module's doc)."""

    def __init__(
        self,
        store: S3Store,
        settings: Settings,
        target: Target,
        routes: Sequence[Route],
        state: core.LogState,
        run_id: str,
        job: Job,
        result: CompactResult,
    ) -> None:
        self.store, self.settings, self.target = store, settings, target
        self.routes = {r.topic: r for r in routes}
        self.tl = TargetLog(target, BucketStore(store, target.bucket), state)
        self.run_id, self.job, self.result = run_id, job, result
        self.attempts = 0
        self.at = time.time()  # when the offsets dropped were removed (the entry says)
        self.drops: set[str] = set()  # expire: keys of objects dropped whole, unread

    @property
    def where(self) -> str:
        return f"s3://{self.target.bucket}/{self.target.prefix}"

    def run(self) -> None:
        groups = self._plan(None)
        if not groups:
            log.info("%s: nothing to %s", self.where, self.job.command)
            return
        refs = sorted({ref for ref, _ in groups})
        self._claim(refs)
        segments = {topic_segment(topic) for topic in self.routes}
        grace = float(self.settings.log_vacuum_grace_seconds)
        self.result.vacuumed += target_log.vacuum(self.tl, segments, grace)
        before = {ref: self.tl.state.partitions[ref].objects for ref in refs}
        for _ in range(REPLANS):
            groups = self._plan(set(refs))
            if not groups:
                return
            rewrites, changed = self._rewrite(groups)
            if self._commit(rewrites):
                break
        else:
            raise StateConflictError(
                f"{self.where}: the commit log kept moving under {self.job.command}",
                hint="Run again",
            )
        touched = sorted({rw.ref for rounds in rewrites for rw in rounds})
        if not touched:
            return  # every object read, nothing to drop: nothing swapped
        before = {ref: before[ref] for ref in touched}
        after = {ref: self.tl.state.partitions[ref].objects for ref in touched}
        self.result.partitions += len(touched)
        self.result.groups += changed
        self.result.records_dropped += sum(
            r.last - r.first + 1 for rounds in rewrites for rw in rounds for r in rw.removed
        )
        self.result.objects_before += sum(len(v) for v in before.values())
        self.result.objects_after += sum(len(v) for v in after.values())
        self.result.bytes_before += sum(o.size for v in before.values() for o in v)
        self.result.bytes_after += sum(o.size for v in after.values() for o in v)

    # -- plan --------------------------------------------------------------------------------

    def _plan(self, only: set[PartitionRef] | None) -> list[Group]:
        """The groups to rewrite, per partition of our routes (``only``: of these)."""
        request = self.job.request
        if not isinstance(request, maintenance.Compact):
            return self._plan_each(only, request)
        modified = self._modified() if self.job.older_than_seconds is not None else {}
        now_ms = max(modified.values(), default=0)
        out: list[Group] = []
        for ref, st in sorted(self.tl.state.partitions.items()):
            if ref.topic not in self.routes or (only is not None and ref not in only):
                continue
            route = self.routes[ref.topic]
            grouped = commit_log.interleaved(route)
            # Tiled: only dense, contiguous objects merge (the new spans tile the replaced).
            # Interleaved (untiled rewrite: new records = replaced): any consecutive objects
            # of one group, where the records keep their offsets (the envelope's metadata).
            stored = grouped and route.envelope.enabled and route.envelope.metadata
            planned = dataclasses.replace(request, now_ms=now_ms, offsets_stored=stored)
            layout = layout_for(route)
            # Imported objects (records unknown) stay; runs between them are planned alone.
            segment: list[maintenance.CommittedObject] = []
            for o in (*st.objects, None):
                if o is not None and o.records > 0:
                    segment.append(
                        maintenance.CommittedObject(
                            o.key,
                            o.first,
                            o.last,
                            o.records,
                            o.size,
                            _key_group(layout, o.key) if grouped else (),
                            modified.get(o.key),
                        )
                    )
                    continue
                if len(segment) > 1:
                    done = maintenance.plan(segment, planned)
                    out += [(ref, g.objects) for g in done.rewrites]
                segment = []
        return out

    def _plan_each(
        self, only: set[PartitionRef] | None, request: maintenance.Erase | maintenance.Expire
    ) -> list[Group]:
        """erase, expire: every committed object of our routes' partitions, each its own
        group (only reading it tells what it holds; a rewrite that drops nothing writes
        nothing); expire's objects wholly before the cut by their time bounds are dropped
        unread (their keys in ``drops``), those wholly after it left alone."""
        out: list[Group] = []
        for ref, st in sorted(self.tl.state.partitions.items()):
            if ref.topic not in self.routes or (only is not None and ref not in only):
                continue
            objects = [self._readable(ref, st.removed, o) for o in st.objects]
            if not objects:
                continue
            planned = maintenance.plan(objects, request)
            self.drops |= {o.key for o in planned.drops}
            groups = [g.objects for g in planned.rewrites] + [(o,) for o in planned.drops]
            out += [(ref, g) for g in sorted(groups, key=lambda g: g[0].first)]
        return out

    def _readable(
        self, ref: PartitionRef, removed: Sequence[Removed], o: ObjectRef
    ) -> maintenance.CommittedObject:
        """``o`` to read and rewrite; refused (exit 2) where a rewrite entry could not say
        which of its offsets it removes: records that do not fill the offsets not removed
        (transaction markers), unknown counts (imported from states), or offsets removed
        before inside an object that stores none (its records' offsets are their places)."""
        gone = sum(max(0, min(r.last, o.last) - max(r.first, o.first) + 1) for r in removed)
        envelope = self.routes[ref.topic].envelope
        why = None
        if o.records <= 0:
            why = "was imported from partition states, which never counted its records"
        elif o.records + gone != o.last - o.first + 1:
            why = "holds offsets Kafka has no record at (transaction markers)"
        elif gone and not (envelope.enabled and envelope.metadata):
            why = "has offsets removed before inside it, and its records store no offsets"
        if why is not None:
            raise ConfigError(
                f"{self.job.command}: s3://{self.target.bucket}/{o.key} {why}",
                tp=topic_partition(ref),
                hint=f"{self.job.command} rewrites objects whose records fill their offsets "
                "(archived by a commit_protocol=log run, not transactional)",
            )
        return maintenance.CommittedObject(
            o.key, o.first, o.last, o.records, o.size, (), None, o.min_time_ms, o.max_time_ms
        )

    def _modified(self) -> dict[str, int]:
        """Each key's LastModified (ms, the store's clock), the log's included: one LIST."""
        listed = drive(send_read(List(log_head(self.target))), self.tl.store)
        return {item.key: int(item.last_modified * 1000) for item in listed}

    # -- claim -------------------------------------------------------------------------------

    def _claim(self, refs: Sequence[PartitionRef]) -> None:
        while True:
            entry = core.claim_entry(self.tl.state, self.run_id, refs, at=time.time())
            if drive(commit_log._create_entry(self.tl.head, entry), self.tl.store):
                self.tl.state = core.fold(self.tl.state, entry)
                self.tl.me, self.tl.claimed = entry.writer, frozenset(refs)
                log.info(
                    "%s: claimed %d partition(s) of %s (commit log entry %d, epoch %d)",
                    self.job.command,
                    len(refs),
                    self.where,
                    entry.seq,
                    entry.writer.epoch,
                )
                return
            self.tl.read()

    # -- rewrite -----------------------------------------------------------------------------

    def _rewrite(self, groups: Sequence[Group]) -> tuple[list[list[PartitionRewrite]], int]:
        """Each group rewritten (new objects created); the rewrites in entries (one: adjacent
        groups of a partition joined, separate runs of it rewrites of their own), and how
        many groups changed."""
        with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
            done = list(pool.map(self._group, groups))
        chains: dict[PartitionRef, list[PartitionRewrite]] = {}
        changed = 0
        for (ref, objects), (news, dropped, unchanged) in zip(groups, done, strict=True):
            if unchanged:
                continue  # nothing dropped from it: it stays as it is
            changed += 1
            st = self.tl.state.partitions[ref]
            named = {o.key: o for o in st.objects}
            replaced = tuple(named[o.key] for o in objects)
            removed = tuple(self._removed(first, last) for first, last in dropped)
            mine = chains.setdefault(ref, [])
            if commit_log.interleaved(self.routes[ref.topic]):
                # One group's objects, which interleave with the other groups': an untiled
                # rewrite of its own (format version 6).
                mine.append(PartitionRewrite(ref, replaced, news, removed, tiled=False))
            elif mine and _adjacent(st.objects, mine[-1].replaced[-1], replaced[0]):
                last = mine[-1]
                removed = joined(last.removed + removed)
                mine[-1] = PartitionRewrite(
                    ref, last.replaced + replaced, last.objects + news, removed
                )
            else:
                mine.append(PartitionRewrite(ref, replaced, news, removed))
        # One entry: a partition's separate runs are rewrites of it in order (format 4 where
        # a partition has more than one).
        rewrites = [rw for chain in chains.values() for rw in chain]
        return ([rewrites] if rewrites else []), changed

    def _removed(self, first: int, last: int) -> Removed:
        assert self.job.reason is not None, f"{self.job.command} dropped offsets"
        return Removed(first, last, self.job.reason, self.at)

    def _group(self, group: Group) -> Done:
        ref, objects = group
        assert self.tl.me is not None
        route = self.routes[ref.topic]
        tp = topic_partition(ref)
        if len(objects) == 1 and objects[0].key in self.drops:
            # Wholly before expire's cut: replaced by nothing, its offsets expired, unread.
            removed = [(r.first, r.last) for r in self.tl.state.partitions[ref].removed]
            return (), tuple(uncovered(objects[0].first, objects[0].last, removed)), False
        suffix = f".g{1 + max(generation(o.key) for o in objects)}"
        dead: set[int] = set()
        for _ in range(TRIES):
            self.attempts += 1
            attempt = self.attempts
            try:
                made: Rewritten = rewrite(
                    self.store,
                    route,
                    tp,
                    objects[0].group if commit_log.interleaved(route) else (),
                    objects,
                    suffix=suffix,
                    drop=self.job.drop,
                    target_size=self.job.target_size,
                    spool_dir=self.settings.spool_dir,
                    metadata=object_metadata(self.tl.me, attempt, ref),
                    stamp=Stamp(self.tl.me.run_id, self.tl.me.epoch, attempt),
                )
            except PreconditionFailed as exc:
                dead.add(attempt)  # this try is over: its objects are a dead attempt's
                self._clear(str(exc.args[0]), ref, tp, attempt, dead)
                continue
            news = tuple(
                ObjectRef(
                    n.key,
                    n.first,
                    n.last,
                    n.records,
                    n.size,
                    n.checksum,
                    min_time_ms=n.min_time_ms,
                    max_time_ms=n.max_time_ms,
                )
                for n in made.objects
            )
            return news, made.dropped, made.unchanged
        raise StateConflictError(
            f"{self.where}: the new objects of {tp} keep being in the way", hint="Run again"
        )

    def _clear(
        self, key: str, ref: PartitionRef, tp: TopicPartition, attempt: int, dead: set[int]
    ) -> None:
        """An object found at a new key: deleted If-Match when a fenced writer's or a dead
        try's of this session (never adopted), else the command stops."""
        assert self.tl.me is not None
        head = self.store.head(self.target.bucket, key)
        if head is None:
            return  # gone meanwhile: write again
        writer, found_attempt, _ = object_writer({k.lower(): v for k, v in head.metadata.items()})
        found = core.FoundObject(key, head.etag, writer, found_attempt)
        state = drive(read_log(self.tl.head, self.tl.state), self.tl.store)
        verdict = core.found_object(state, self.tl.me, attempt, dead, ref, found)
        where = f"s3://{self.target.bucket}/{key}"
        if verdict is core.Found.DELETE:
            self.store.delete_if_match(self.target.bucket, key, head.etag)
            return
        if core.is_fenced(state, self.tl.me, [ref]):
            raise FencedError(f"{where}: a newer run claimed {tp}; {self.job.command} stops", tp=tp)
        raise StateConflictError(
            f"{where} exists, written by a writer the commit log does not fence",
            tp=tp,
            hint="Another kafka-archive writes this target: run again once it is done",
        )

    # -- commit ------------------------------------------------------------------------------

    def _commit(self, rounds: Sequence[Sequence[PartitionRewrite]]) -> bool:
        """Each round's rewrite entry; False when the log moved so that the rewrites no
        longer apply (plan again: their objects are vacuum's)."""
        assert self.tl.me is not None
        for rewrites in rounds:
            while True:
                verdict = core.rewrite_verdict(self.tl.state, self.tl.me, rewrites)
                if verdict is core.Verdict.FENCED:
                    command = self.job.command
                    raise FencedError(
                        f"{self.where}: a newer run claimed partitions of this {command} in "
                        f"the commit log; {command} stops (what it committed stays)"
                    )
                if verdict is core.Verdict.STALE:
                    return False
                entry = core.rewrite_entry(self.tl.state, self.tl.me, rewrites, at=time.time())
                if drive(commit_log._create_entry(self.tl.head, entry), self.tl.store):
                    self.tl.state = core.fold(self.tl.state, entry)
                    self.result.entries += 1
                    if entry.seq % commit_log.CHECKPOINT_EVERY == 0:
                        drive(commit_log._checkpoint(self.tl.head, self.tl.state), self.tl.store)
                    log.info(
                        "%s: %s: commit log entry %d swaps in %d object(s) for %d",
                        self.job.command,
                        self.where,
                        entry.seq,
                        sum(len(rw.objects) for rw in rewrites),
                        sum(len(rw.replaced) for rw in rewrites),
                    )
                    break
                self.tl.read()
        return True


def _key_group(layout: Layout, key: str) -> tuple[str | None, ...]:
    """The group ``key`` places its object in (PARTITIONBY values, time folder): the planner
    merges only objects of one group, and the rewriter writes into that group's folder."""
    parsed = parse_key(layout, key)
    if parsed is None:
        raise DamagedObjectError(
            f"{key}: named by the commit log, but not a key of its route's layout",
            hint="Run kafka-archive verify on this archive",
        )
    return parsed.group


def _adjacent(objects: Sequence[ObjectRef], a: ObjectRef, b: ObjectRef) -> bool:
    """Whether ``b`` follows ``a`` in the partition's named objects."""
    keys = [o.key for o in objects]
    return keys.index(b.key) == keys.index(a.key) + 1


def _with_tables(settings: Settings, plan: Plan, job: Job) -> CompactResult:
    """``job`` on the plan's Iceberg routes (:mod:`.table_maintenance`), then on the rest."""
    rest = tuple(r for r in plan.routes if r.iceberg is None)
    table_job = TableJob(
        job.command,
        None if isinstance(job.request, maintenance.Compact) else job.drop,
        job.reason,
        job.target_size,
        job.older_than_seconds,
    )
    done = table_maintenance.maintain_tables(settings, plan, table_job)
    o = done.outcome
    result = maintain(settings, dataclasses.replace(plan, routes=rest), job) if rest else None
    result = result or CompactResult()
    result.partitions += len(o.removed) if job.reason else int(o.committed)
    result.groups += int(o.committed)
    result.entries += int(o.committed)
    result.objects_before += o.files_before
    result.objects_after += o.files_after
    result.bytes_before += o.bytes_before
    result.bytes_after += o.bytes_after
    result.records_dropped += o.records_dropped
    result.s3_requests = result.s3_requests + done.s3_requests
    return result

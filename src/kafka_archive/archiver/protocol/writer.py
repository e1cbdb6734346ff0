"""Writers as step machines: the I/O layer that does what `core` decides.

A writer's session is a generator that yields one store request at a time (`Get`, `Head`,
`Put`, `Delete`, `List`) and is sent back the reply (a value, or the `StoreError` the
request failed with). `drive` runs one against a real `Store`; the simulation steps several
against `MemStore`, one request per step, so it can crash or pause a writer between any two.

A session: read the log (newest checkpoint + the tail), claim its partitions (a claim entry
of epoch = highest + 1: the lease), then batches until caught up: create each object
If-None-Match with the writer's (run, epoch, attempt) in its metadata, then one commit entry
If-None-Match at the next seq. A 412 on the entry means another writer got that seq: read
what was missed; fenced (a higher claim) stops, never commits; else re-validate and try the
next seq. Last, vacuum: unnamed objects of fenced writers (or of its own run), older than
the grace by the store's clock (LastModified), deleted If-Match.

`mutations` reintroduces one historical bug at a time (:mod:`.mutations`), for the simulation
to prove it catches each; production passes none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kafka_archive.archiver.core.errors import S3UnavailableError
from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    Entry,
    EntryKind,
    Gaps,
    ObjectRef,
    PartitionCommit,
    PartitionRef,
    WriterId,
    checkpoint_key,
    decode_entry,
    encode_checkpoint,
    encode_entry,
    entry_key,
    entry_seq,
    log_prefix,
)
from kafka_archive.archiver.protocol.steps import (
    AMBIGUOUS_TRIES,
    Delete,
    Head,
    List,
    Put,
    Steps,
    Wait,
    get_or_none,
    no_answer,
    read_log,
    send,
    send_read,
)
from kafka_archive.archiver.protocol.store import (
    Ambiguous,
    NotFound,
    PreconditionFailed,
    Stored,
)
from kafka_archive.archiver.protocol.uploads import abort_open_uploads, create

# -- the writer ---------------------------------------------------------------------------


class Source(Protocol):
    """What there is to archive (Kafka, for the real writer), and how objects are cut."""

    def high(self, ref: PartitionRef) -> int:
        """The partition's end offset now."""
        ...

    def low(self, ref: PartitionRef) -> int:
        """The partition's first offset Kafka still has (retention moves it)."""
        ...

    def cut(self, ref: PartitionRef, first: int, high: int) -> tuple[str, int, bytes]:
        """The object starting at `first` (below `high`): its key, last offset and body."""
        ...

    def stamp(self, body: bytes, nonce: str) -> bytes:
        """`body` carrying `nonce` where readers ignore it (Parquet or Avro file metadata, a
        gzip header field): the same records, other bytes, so another ETag. `body` itself
        for a format with no such place (TEXT, BYTES, CSV, uncompressed JSON): the writer
        then writes at a key of the attempt's own (`attempt_key`)."""
        ...


class GroupedSource(Protocol):
    """A source whose objects of a partition interleave (PARTITIONBY, time layouts: one
    object open per group at once). Offsets Kafka never had (a transaction's markers,
    compacted ones) are in no object."""

    def cut_groups(
        self, ref: PartitionRef, first: int, high: int
    ) -> tuple[int, tuple[tuple[str, int, int, int, bytes], ...]]:
        """The chunk read from `first` (below `high`): its last offset, and one object per
        group with records in it (key, first and last record, records, body)."""
        ...


class _Fenced(Exception):
    pass


class _Replan(Exception):
    pass


class _InTheWay(Exception):
    """A live sibling attempt's object holds the key: this attempt fails, the driver decides."""


@dataclass(frozen=True)
class Task:
    """A partition's share of a batch, as the driver planned it: objects cut from `start`
    below `high`, at most `objects` of them (every attempt of it cuts the same)."""

    ref: PartitionRef
    start: int
    high: int
    objects: int


@dataclass(eq=False)
class Attempt:
    """One attempt of a task, on an executor: it creates the task's objects and reports
    them to the driver. `dead` (the attempts declared dead) and `state` (the log) are what
    the driver gave it at launch; it reads the log itself when an object is in its way."""

    number: int
    task: Task
    dead: frozenset[int]
    state: core.LogState
    steps: Steps[None] = field(init=False)
    outcome: tuple[ObjectRef, ...] | str | None = None  # objects, or why it failed


def attempt_key(key: str, epoch: int, attempt: int) -> str:
    """The key of an attempt's object whose format has no place for a stamp: the planned key
    with the writer's epoch and the attempt before its extension (`.../<first>.json` ->
    `.../<first>.e<epoch>a<attempt>.json`). It still starts with the first offset, so keys
    sort by it; an epoch is one claim's, an attempt number one of its run's: no two attempts
    share a key, and an attempt's retries (the same bytes, the same metadata) recognise their
    own create at it. A rewrite's object (`<first>.g<N>.<ext>`, compact's) takes the attempt
    after its generation (`<first>.g<N>.e<epoch>a<attempt>.<ext>`), where
    `maintenance.generation` still reads N."""
    head, _, name = key.rpartition("/")
    stem, dot, ext = name.partition(".")
    generation, gdot, rest = ext.partition(".")
    if gdot and generation[:1] == "g" and generation[1:].isdigit():
        stem, ext = f"{stem}.{generation}", rest
    tail = f"{stem}.e{epoch}a{attempt}{dot}{ext}"
    return f"{head}/{tail}" if head else tail


def checksum(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:32]


def object_writer(meta: Mapping[str, str]) -> tuple[WriterId | None, int, PartitionRef | None]:
    """The writer, attempt and partition an object's metadata names (None: not ours)."""
    try:
        writer = WriterId(meta["run-id"], int(meta["epoch"]))
        ref = PartitionRef(meta["route"], meta["topic"], int(meta["partition"]))
        return writer, int(meta["attempt"]), ref
    except (KeyError, ValueError):
        return None, 0, None


@dataclass
class Writer:
    """A run: the driver (`session`: the log, the claim, the batches' plans and entries) and
    the attempts it hands out, one task (partition) of a batch each, that create objects.
    `launched` holds attempts the driver launched and nobody runs yet (the scheduler's);
    `declare_dead` and `speculate` are the driver's scheduler (a lost executor, a slow task)."""

    prefix: str
    run_id: str
    refs: Sequence[PartitionRef]
    source: Source
    clock: Callable[[], float]
    batch_objects: int = 2  # objects per partition per batch
    grace: float = 60.0
    checkpoint_every: int = 10
    multipart_above: int = 16 * 2**20  # bytes: larger objects are multipart uploads
    part_size: int = 8 * 2**20
    mutations: frozenset[str] = frozenset()
    # Objects that interleave (cut from here instead of `source.cut`), committed untiled.
    groups: GroupedSource | None = None
    # --start latest: a partition the log has not begun begins at Kafka's end (no objects).
    start_latest: bool = False
    # --allow-gaps: offsets below Kafka's low that the log has not committed are passed, as a
    # gap the commit records; without it such a partition is not written (exit 16).
    allow_gaps: bool = False
    state: core.LogState = field(default_factory=core.LogState)
    me: WriterId | None = None
    outcome: str | None = None  # "done" | "fenced"
    written: dict[str, str] = field(default_factory=dict)  # key -> ETag, objects it created
    dead: set[int] = field(default_factory=set)  # attempts declared dead: never committed
    launched: list[Attempt] = field(default_factory=list)
    tasks: dict[Task, list[Attempt]] = field(default_factory=dict)  # the batch's attempts
    won: dict[Task, Attempt] = field(default_factory=dict)  # the attempt each task takes
    _failed: bool = False  # an attempt found the plan stale or the writer fenced
    _no_answer: S3UnavailableError | None = None  # an attempt's request had none, ever
    _attempts: int = 0

    def _mut(self, name: str) -> bool:
        return name in self.mutations

    def session(self) -> Steps[str]:
        """The run, to its end: "done" or "fenced"; or the runtime's S3 error when a request
        had no answer `AMBIGUOUS_TRIES` times (its attempts are then dead: never committed)."""
        try:
            return (yield from self._session())
        except S3UnavailableError:
            self._end_batch()
            self.dead.update(range(1, self._attempts + 1))
            self.outcome = "no answer"
            raise

    def _session(self) -> Steps[str]:
        self.state = yield from read_log(self.prefix)
        yield from self._claim()
        assert self.me is not None
        yield from abort_open_uploads(self._data())
        while True:
            try:
                if core.is_fenced(self.state, self.me, self.refs):
                    raise _Fenced
                commits = yield from self._write_batch()
                if not commits:
                    break
                yield from self._commit(commits)
                self._end_batch()
            except _Replan:
                self._end_batch()
                self.state = yield from read_log(self.prefix, self.state)
            except _Fenced:
                self._end_batch()
                if self._mut("fenced_cleanup"):
                    for key in list(self.written):
                        yield from self._delete(key, None)
                self.outcome = "fenced"
                self.dead.update(range(1, self._attempts + 1))
                return self.outcome
        self.dead.update(range(1, self._attempts + 1))  # the session is over: so are they
        yield from self.vacuum()
        self.outcome = "done"
        return self.outcome

    # -- entries ---------------------------------------------------------------------------

    def _claim(self) -> Steps[None]:
        while True:
            entry = core.claim_entry(self.state, self.run_id, self.refs)
            if (yield from self._create_entry(entry, [])):
                self.me = entry.writer
                self.state = core.fold(self.state, entry)
                return
            self.state = yield from read_log(self.prefix, self.state)

    def _create_entry(self, entry: Entry, objects: Sequence[ObjectRef]) -> Steps[bool]:
        """Creates `entry` at its seq: True once it is there, False when another holds it."""
        key = entry_key(self.prefix, entry.seq)
        put = Put(key, encode_entry(entry), {}, if_none_match=not self._mut("unconditional_entry"))
        unanswered = 0
        while True:
            try:
                yield from send(put)
                return True
            except PreconditionFailed:
                pass
            except Ambiguous:
                unanswered += 1
                if unanswered >= AMBIGUOUS_TRIES and not self._mut("unbounded_ambiguous"):
                    raise no_answer(put) from None
                if entry.kind is EntryKind.COMMIT and self._mut("ambiguous_commit_is_failure"):
                    for o in objects:
                        yield from self._delete(o.key, self.written.get(o.key))
                    return False
            got = yield from get_or_none(key)
            found = None if got is None else decode_entry(got.body)
            if found is not None and self._mut("foreign_entry_as_ours"):
                found = entry
            outcome = core.create_outcome(found, entry)
            if outcome is not core.Outcome.UNKNOWN:
                return outcome is core.Outcome.LANDED

    def _commit(self, commits: Sequence[PartitionCommit]) -> Steps[None]:
        assert self.me is not None
        objects = [o for c in commits for o in c.objects]
        while True:
            verdict = core.commit_verdict(self.state, self.me, commits)
            if self._mut("skip_fence_check") and verdict is core.Verdict.FENCED:
                stale = any(core.range_problem(self.state.end(c.ref), c) for c in commits)
                verdict = core.Verdict.STALE if stale else core.Verdict.OK
            if verdict is core.Verdict.FENCED:
                raise _Fenced
            if verdict is core.Verdict.STALE:
                raise _Replan
            entry = core.commit_entry(self.state, self.me, commits)
            if (yield from self._create_entry(entry, objects)):
                self.state = core.fold(self.state, entry)
                if entry.seq % self.checkpoint_every == 0:
                    yield from self._checkpoint()
                return
            self.state = yield from read_log(self.prefix, self.state)

    def _checkpoint(self) -> Steps[None]:
        """Best effort: a checkpoint another wrote is the same fold; a lost one costs reads."""
        body = encode_checkpoint(self.state.checkpoint())
        with contextlib.suppress(PreconditionFailed, Ambiguous):
            yield from send(
                Put(checkpoint_key(self.prefix, self.state.seq), body, {}, if_none_match=True)
            )

    # -- attempts --------------------------------------------------------------------------

    def _launch(self, task: Task) -> None:
        self._attempts += 1
        a = Attempt(self._attempts, task, frozenset(self.dead), self.state)
        a.steps = self._attempt(a)
        self.tasks[task].append(a)
        self.launched.append(a)

    def _running(self, task: Task) -> list[Attempt]:
        return [
            a for a in self.tasks.get(task, []) if a.outcome is None and a.number not in self.dead
        ]

    def _ready(self) -> bool:
        return self._failed or len(self.won) == len(self.tasks)  # won: tasks of the batch

    def declare_dead(self, a: Attempt) -> None:
        """The driver gives up on a running attempt (its executor is lost or silent): its
        objects will never be committed; another attempt of its task is launched."""
        if a.outcome is not None or a.number in self.dead:
            return
        self.dead.add(a.number)
        if a.task in self.tasks and a.task not in self.won and not self._running(a.task):
            self._launch(a.task)

    def speculate(self, a: Attempt) -> None:
        """A speculative copy of a running attempt, side by side with it."""
        if self._running(a.task) and a.task not in self.won and not self._failed:
            self._launch(a.task)

    def _report(self, a: Attempt, outcome: tuple[ObjectRef, ...] | str) -> None:
        a.outcome = outcome
        if a.number in self.dead or a.task not in self.tasks or a.task in self.won:
            self.dead.add(a.number)
            return
        if isinstance(outcome, tuple):
            self.won[a.task] = a
            return
        self.dead.add(a.number)
        if outcome in ("stale", "fenced", "no answer"):
            self._failed = True
        elif not self._running(a.task):
            self._launch(a.task)

    def _end_batch(self) -> None:
        """Every attempt of the batch declared dead: the driver commits none of them (again)."""
        self.dead.update(a.number for ats in self.tasks.values() for a in ats)
        self.tasks, self.won, self._failed = {}, {}, False

    def _write_batch(self) -> Steps[list[PartitionCommit]]:
        """Plans a task per partition with records, launches an attempt of each and waits
        until each task has an attempt's objects (or one found the plan stale)."""
        moves: dict[PartitionRef, tuple[int, Gaps, bool]] = {}
        for ref in self.refs:
            start, high = self.state.end(ref), self.source.high(ref)
            st = self.state.partitions.get(ref)
            begins = self.start_latest and not (st and (st.end or st.objects or st.begin))
            if begins and high > 0:
                moves[ref] = (high, (), True)  # begins at Kafka's end, nothing archived
                continue
            low, plan = self.source.low(ref), start
            if start < low:  # Kafka deleted [start, low) before it was archived
                if not self.allow_gaps:
                    continue
                plan = start if self._mut("gap_over_object") else low
                gaps: Gaps = () if self._mut("gap_unrecorded") else ((start, low - 1),)
                moves[ref] = (start, gaps, False)
            if plan < high:
                self.tasks[Task(ref, plan, high, self.batch_objects)] = []
        for task in list(self.tasks):
            self._launch(task)
        while not self._ready():
            yield Wait(self._ready, lambda: [a for t in self.tasks for a in self._running(t)])
        if self._no_answer is not None:
            raise self._no_answer
        if self._failed:
            raise _Replan
        commits = []
        for task, a in self.won.items():
            assert isinstance(a.outcome, tuple)
            if self.groups is None:
                end = a.outcome[-1].last + 1
                start, gaps, begins = moves.pop(task.ref, (task.start, (), False))
                named = list(a.outcome)
                if named and task.start != start + sum(g[1] - g[0] + 1 for g in gaps):
                    # (mutations) the ranges named from where the gap, or the end, was
                    at = gaps[-1][1] + 1 if gaps else start
                    while named and named[0].last < at:
                        named.pop(0)
                    if named:
                        named[0] = dataclasses.replace(named[0], first=at)
                    end = named[-1].last + 1 if named else at
                commits.append(
                    PartitionCommit(task.ref, start, end, tuple(named), gaps=gaps, begins=begins)
                )
                continue
            # A chunk ends at a record (the source's high never ends at an offset it lacks).
            end = max(o.last for o in a.outcome) + 1
            objects = a.outcome
            if self._mut("partial_groups"):  # one group's objects of the range, not all
                objects = tuple(o for o in objects if "/g0/" in o.key) or objects[:1]
            commits.append(PartitionCommit(task.ref, task.start, end, objects, tiled=False))
        for ref, (start, gaps, begins) in moves.items():  # ends that move without objects
            end = gaps[-1][1] + 1 if gaps else start
            if gaps or begins:
                commits.append(PartitionCommit(ref, start, end, (), gaps=gaps, begins=begins))
        return commits

    def _attempt(self, a: Attempt) -> Steps[None]:
        """An attempt's life on its executor: the task's objects, then its report."""
        task = a.task
        objects: list[ObjectRef] = []
        outcome: tuple[ObjectRef, ...] | str
        try:
            at, chunks = task.start, 0
            while at < task.high and chunks < task.objects:
                chunks += 1
                if self.groups is not None:
                    last, cuts = self.groups.cut_groups(task.ref, at, task.high)
                    for key, first, held, records, body in cuts:
                        objects.append(
                            (yield from self._write_object(a, key, first, held, body, records))
                        )
                    at = last + 1
                    continue
                key, last, body = self.source.cut(task.ref, at, task.high)
                objects.append((yield from self._write_object(a, key, at, last, body)))
                at = last + 1
            outcome = tuple(objects)
        except _Fenced:
            outcome = "fenced"
        except _Replan:
            outcome = "stale"
        except _InTheWay:
            outcome = "in the way"
        except S3UnavailableError as e:
            outcome = "no answer"
            if a.number not in self.dead and a.task in self.tasks and a.task not in self.won:
                self._no_answer = e  # the driver stops with it (Spark: the task failed)
        self._report(a, outcome)

    # -- objects ---------------------------------------------------------------------------

    def _write_object(
        self, a: Attempt, key: str, first: int, last: int, body: bytes, records: int = 0
    ) -> Steps[ObjectRef]:
        assert self.me is not None
        ref = a.task.ref
        # An attempt's bytes are its own: a delete If-Match judged on another attempt's object
        # (its ETag, S3's MD5 of the bytes) never matches this one, however late it lands.
        # A format with no place for a stamp writes at a key of its own attempt instead: no
        # other attempt ever writes there, so no delete is ever judged on another's object.
        if not self._mut("identical_bytes"):
            stamped = self.source.stamp(body, f"{self.me.run_id}.{self.me.epoch}.{a.number}")
            if stamped == body and not self._mut("unstamped_same_key"):
                key = attempt_key(key, self.me.epoch, a.number)
            body = stamped
        records = records or last - first + 1
        ours = ObjectRef(key, first, last, records, len(body), checksum(body))
        meta = {
            "run-id": self.me.run_id,
            "epoch": str(self.me.epoch),
            "attempt": str(a.number),
            "route": ref.route,
            "topic": ref.topic,
            "partition": str(ref.partition),
        }
        dead: Container[int] = a.dead
        if self._mut("lower_attempt_dead"):
            dead = set(a.dead) | set(range(a.number))
        fresh, unanswered = False, 0
        put = Put(key, body, meta, if_none_match=True)
        while True:
            try:
                self.written[key] = yield from create(
                    put,
                    self.multipart_above,
                    self.part_size,
                    conditional_complete=not self._mut("unconditional_complete"),
                )
                return ours
            except Ambiguous:
                unanswered += 1
                if unanswered >= AMBIGUOUS_TRIES and not self._mut("unbounded_ambiguous"):
                    raise no_answer(put) from None
                continue  # sent again: if the first landed, the 412 finds it ours
            except PreconditionFailed:
                pass
            try:
                head: Stored = yield from send_read(Head(key))
            except NotFound:
                continue
            writer, found_attempt, found_ref = object_writer(head.metadata)
            if self._mut("adopt_by_metadata") and found_ref == ref:
                return ours
            found = core.FoundObject(key, head.etag, writer, found_attempt)
            verdict = core.found_object(a.state, self.me, a.number, dead, ref, found)
            if verdict is core.Found.CHECK and (
                self._mut("recover_unfenced")
                or (self._mut("straggler_delete") and writer == self.me)
            ):
                verdict = core.Found.DELETE
            if verdict is core.Found.OURS:
                self.written[key] = head.etag
                return ours
            if verdict is core.Found.NAMED:
                raise _Replan
            if verdict is core.Found.DELETE:
                if_match = None if self._mut("unconditional_delete") else head.etag
                yield from self._delete(key, if_match)
                continue
            if writer == self.me:
                raise _InTheWay  # a live sibling's: the driver waits for it or declares it dead
            if fresh:
                raise RuntimeError(f"{key}: an object of no fenced writer is in the way")
            a.state, fresh = (yield from read_log(self.prefix, a.state)), True
            if core.is_fenced(a.state, self.me, [ref]):
                raise _Fenced

    def _data(self) -> str:
        return f"{self.prefix.rstrip('/')}/" if self.prefix else ""

    def _delete(self, key: str, if_match: str | None) -> Steps[None]:
        """One delete; whatever it answers, the caller looks again (a create, a listing)."""
        with contextlib.suppress(PreconditionFailed, NotFound, Ambiguous):
            yield from send(Delete(key, if_match))

    # -- vacuum ----------------------------------------------------------------------------

    def vacuum(self) -> Steps[int]:
        """Deletes the unnamed objects of fenced writers (and of this run), older than the
        grace: what a crash, a fenced writer or a late create left. Returns how many."""
        assert self.me is not None
        self.state = yield from read_log(self.prefix, self.state)
        named = self.state.named()
        listed = yield from send_read(List(self._data()))
        # The store's clock, not ours (a paused VM's lags, another's runs ahead): the newest
        # LastModified listed, the log included (this session's claim at least, unless the
        # listing is stale: then older, and vacuum only more careful).
        now = max((item.last_modified for item in listed), default=0.0)
        if self._mut("vacuum_local_clock"):
            now = self.clock()
        found = []
        for item in listed:
            if item.key.startswith(log_prefix(self.prefix)):
                continue
            if item.key in named and not self._mut("vacuum_named"):
                continue
            try:
                head: Stored = yield from send_read(Head(item.key))
            except NotFound:
                continue
            writer, _, ref = object_writer(head.metadata)
            found.append(core.Listed(item.key, head.etag, head.last_modified, writer, ref))
        state = self.state
        if self._mut("vacuum_named"):
            state = core.LogState(state.seq, state.max_epoch, {})
        if self._mut("vacuum_by_age_only"):
            doomed = [
                o
                for o in found
                if o.key not in state.named() and now - o.last_modified >= self.grace
            ]
        else:
            times = {s: i.last_modified for i in listed if (s := entry_seq(self.prefix, i.key))}
            doomed = core.vacuum_candidates(state, self.me, found, now, self.grace, times)
        for o in doomed:
            yield from self._delete(o.key, o.etag)
        return len(doomed)

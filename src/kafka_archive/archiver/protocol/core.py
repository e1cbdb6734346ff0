"""The protocol's decisions, from what was observed: no I/O.

The log is folded entry by entry into a `LogState`. A claim takes an epoch above every one
before it and becomes the holder of its partitions; a commit is valid only from the current
holder of each partition it names, starting exactly at the partition's committed end, its
objects covering [start, end) in order; a rewrite (compact, erase, expire) is valid only from
the holder, over objects the log still names, and never moves the committed end (see
`rewrite_problem`). An import (migration from the state protocol) sets the committed end,
objects and passed gaps of partitions whose log end is still 0, from the holder of their
claim. `fold` refuses anything else (`InvalidEntry`): a
correct writer never creates such an entry, so a reader that meets one meets a broken log.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from kafka_archive.archiver.protocol.log import (
    Checkpoint,
    Entry,
    EntryKind,
    ObjectRef,
    PartitionCommit,
    PartitionImport,
    PartitionRef,
    PartitionRewrite,
    PartitionState,
    WriterId,
)
from kafka_archive.archiver.protocol.rewrite_checks import (
    replaced_at as replaced_at,
)
from kafka_archive.archiver.protocol.rewrite_checks import (
    rewrite_problem as rewrite_problem,
)
from kafka_archive.archiver.protocol.rewrite_checks import (
    untiled_objects,
)


class InvalidEntry(ValueError):
    """An entry that no correct writer creates at that place of the log."""


@dataclass(frozen=True)
class LogState:
    """The log folded up to entry `seq` (0: empty)."""

    seq: int = 0
    max_epoch: int = 0
    partitions: Mapping[PartitionRef, PartitionState] = field(default_factory=dict)

    def end(self, ref: PartitionRef) -> int:
        st = self.partitions.get(ref)
        return 0 if st is None else st.end

    def holder(self, ref: PartitionRef) -> WriterId | None:
        st = self.partitions.get(ref)
        return None if st is None else st.holder

    def named(self) -> dict[str, ObjectRef]:
        """Every object a commit names, by key (side objects included: block indexes, dead
        letters)."""
        return {o.key: o for st in self.partitions.values() for o in (*st.objects, *st.sides)}

    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.seq, self.max_epoch, dict(self.partitions))

    @staticmethod
    def from_checkpoint(cp: Checkpoint) -> LogState:
        return LogState(cp.seq, cp.max_epoch, dict(cp.partitions))


def fold(state: LogState, entry: Entry) -> LogState:
    """The state after `entry`, which must be entry `state.seq + 1` and valid there."""
    if entry.seq != state.seq + 1:
        raise InvalidEntry(f"entry {entry.seq} folded after entry {state.seq}")
    parts = dict(state.partitions)
    if entry.kind is EntryKind.CLAIM:
        if (
            entry.writer.epoch <= state.max_epoch
            or entry.commits
            or entry.imports
            or entry.rewrites
            or not entry.claims
        ):
            raise InvalidEntry(
                f"entry {entry.seq}: claim of epoch {entry.writer.epoch} after epoch "
                f"{state.max_epoch}"
            )
        for ref in entry.claims:
            old = parts.get(ref)
            parts[ref] = (
                PartitionState(0, entry.writer, ())
                if old is None
                else replace(old, holder=entry.writer)
            )
        return LogState(entry.seq, entry.writer.epoch, parts)
    if entry.kind is EntryKind.REWRITE:
        return _fold_rewrite(state, entry)
    if entry.kind is EntryKind.IMPORT:
        return _fold_import(state, entry)
    if entry.claims or entry.imports or entry.rewrites or not entry.commits:
        raise InvalidEntry(f"entry {entry.seq}: a commit with claims or without ranges")
    named = state.named()
    for c in entry.commits:
        for o in c.sides:
            if o.key in named:
                raise InvalidEntry(f"entry {entry.seq}: side object {o.key} named before")
            named[o.key] = o
    for c in entry.commits:
        old = parts.get(c.ref)
        if old is None or old.holder != entry.writer:
            raise InvalidEntry(
                f"entry {entry.seq}: {c.ref} committed by {entry.writer}, which does not hold it"
            )
        problem = range_problem(old.end, c, begun=bool(old.objects or old.begin))
        if problem:
            raise InvalidEntry(f"entry {entry.seq}: {c.ref}: {problem}")
        parts[c.ref] = replace(
            old,
            end=c.end,
            objects=old.objects + c.objects,
            committed_at=_committed_at(old, entry),
            gaps=old.gaps + c.gaps,
            begin=c.start if c.begins else old.begin,
            sides=old.sides + c.sides,
        )
    return LogState(entry.seq, state.max_epoch, parts)


def _committed_at(old: PartitionState, entry: Entry) -> float | None:
    """A partition's last commit time after `entry` committed to it (an entry without a
    time, from a version before commit times, leaves the one known)."""
    return old.committed_at if entry.at is None else entry.at


def _fold_import(state: LogState, entry: Entry) -> LogState:
    if entry.claims or entry.commits or entry.rewrites:
        raise InvalidEntry(f"entry {entry.seq}: an import with claims, commits or rewrites")
    if not entry.imports:
        raise InvalidEntry(f"entry {entry.seq}: an import without partitions")
    parts = dict(state.partitions)
    seen: set[PartitionRef] = set()
    for i in entry.imports:
        old = parts.get(i.ref)
        if old is None or old.holder != entry.writer:
            raise InvalidEntry(
                f"entry {entry.seq}: {i.ref} imported by {entry.writer}, which does not hold it"
            )
        if i.ref in seen:
            raise InvalidEntry(f"entry {entry.seq}: {i.ref} imported twice")
        seen.add(i.ref)
        if old.end or old.objects:
            raise InvalidEntry(
                f"entry {entry.seq}: {i.ref} imported where its log end is {old.end}"
            )
        problem = import_problem(i)
        if problem:
            raise InvalidEntry(f"entry {entry.seq}: {i.ref}: {problem}")
        parts[i.ref] = replace(
            old,
            end=i.end,
            objects=i.objects,
            gaps=i.gaps,
            committed_at=_committed_at(old, entry),
        )
    return LogState(entry.seq, state.max_epoch, parts)


def fold_all(state: LogState, entries: Iterable[Entry]) -> LogState:
    for e in entries:
        state = fold(state, e)
    return state


def range_problem(committed_end: int, c: PartitionCommit, *, begun: bool = False) -> str | None:
    """Why `c` cannot follow a partition committed up to `committed_end` (None: it can).
    `begun`: the partition has a commit already (objects, or a start), so `c` cannot begin
    it. Every offset of [start, end) is in exactly one object or in exactly one of `c.gaps`;
    a range that only begins the partition (no object, no gap) may be empty."""
    if c.begins:
        if committed_end != 0 or begun or c.start < 0:
            return f"a start at {c.start} where the partition has begun (end {committed_end})"
    elif c.start != committed_end:
        return f"range starts at {c.start}, committed end is {committed_end}"
    if c.end < c.start or (c.end == c.start and (c.objects or c.gaps or not c.begins)):
        return f"empty range [{c.start}, {c.end})"
    if c.end > c.start and not c.objects and not c.gaps:
        return f"empty range [{c.start}, {c.end}): in no object and no gap"
    at = c.start
    for first, last in c.gaps:
        if first < at or last < first or last >= c.end:
            return f"gap [{first}, {last}] outside [{at}, {c.end}) or out of order"
        at = last + 1
    keys = {o.key for o in c.objects}
    for o in c.sides:
        if o.key in keys:
            return f"side object {o.key} named twice"
        if o.first < c.start or o.last < o.first or o.last >= c.end:
            return f"side object {o.key} about [{o.first}, {o.last}], outside [{c.start}, {c.end})"
        keys.add(o.key)
    if not c.tiled:
        return _interleaved_problem(c)
    at, gaps = c.start, list(c.gaps)
    for o in c.objects:
        while gaps and gaps[0][0] == at:
            at = gaps.pop(0)[1] + 1
        if o.first != at or o.last < o.first:
            return f"object {o.key} holds [{o.first}, {o.last}], expected to start at {at}"
        at = o.last + 1
    while gaps and gaps[0][0] == at:
        at = gaps.pop(0)[1] + 1
    if gaps:
        return f"gap [{gaps[0][0]}, {gaps[0][1]}] inside an object"
    if at != c.end:
        return f"objects end at {at}, range at {c.end}"
    return None


def _interleaved_problem(c: PartitionCommit) -> str | None:
    """Objects that may interleave: each inside [start, end), named once, and no more records
    than offsets in the range (offsets Kafka never had, compacted ones and a transaction's
    markers, are in no object; which offsets Kafka had the driver does not know, so coverage
    is proven from the bodies, by the simulation's invariants, not here)."""
    keys: set[str] = set()
    for o in c.objects:
        if o.last < o.first:
            return f"object {o.key} holds [{o.first}, {o.last}]"
        if any(first <= o.last and o.first <= last for first, last in c.gaps):
            return f"object {o.key} holds [{o.first}, {o.last}], over a gap"
        if o.first < c.start:
            return f"object {o.key} holds [{o.first}, {o.last}], before the start {c.start}"
        if o.last >= c.end:
            return f"object {o.key} holds [{o.first}, {o.last}], beyond the end {c.end}"
        if o.records > o.last - o.first + 1:
            return f"object {o.key} holds {o.records} records in [{o.first}, {o.last}]"
        if o.key in keys:
            return f"object {o.key} named twice"
        keys.add(o.key)
    records = sum(o.records for o in c.objects)
    offsets = c.end - c.start - sum(last - first + 1 for first, last in c.gaps)
    if records > offsets:
        return f"objects hold {records} records in a range of {offsets} offsets"
    return None


def _fold_rewrite(state: LogState, entry: Entry) -> LogState:
    if entry.claims or entry.commits or not entry.rewrites:
        raise InvalidEntry(f"entry {entry.seq}: a rewrite with claims, ranges, or no rewrites")
    # A partition may be rewritten more than once (separate runs of its objects, erase):
    # each rewrite applies to the partition as the ones before it in the entry left it.
    named = state.named()
    new_keys = [o.key for rw in entry.rewrites for o in rw.objects]
    if len(set(new_keys)) != len(new_keys):
        raise InvalidEntry(f"entry {entry.seq}: one key for two new objects")
    parts = dict(state.partitions)
    for rw in entry.rewrites:
        old = parts.get(rw.ref)
        if old is None or old.holder != entry.writer:
            raise InvalidEntry(
                f"entry {entry.seq}: {rw.ref} rewritten by {entry.writer}, which does not hold it"
            )
        problem = rewrite_problem(old, rw, named)
        if problem:
            raise InvalidEntry(f"entry {entry.seq}: {rw.ref}: {problem}")
        if rw.tiled:
            at = replaced_at(old, rw)
            assert at is not None
            objects = old.objects[:at] + rw.objects + old.objects[at + len(rw.replaced) :]
        else:
            objects = untiled_objects(old.objects, rw)
        parts[rw.ref] = replace(
            old,
            objects=objects,
            removed=tuple(sorted(old.removed + rw.removed)),
            rewritten=entry.seq,
            committed_at=_committed_at(old, entry),
        )
    return LogState(entry.seq, state.max_epoch, parts)


def import_problem(i: PartitionImport) -> str | None:
    """Why `i` is no archive of the state protocol (None: it is). Its objects need not be
    contiguous: with PARTITIONBY several groups' objects interleave, and passed gaps and
    offsets Kafka never had (compaction, transaction markers) lie between them."""
    if i.end < 0:
        return f"end {i.end}"
    keys: set[str] = set()
    for o in i.objects:
        if o.last < o.first or o.first < 0:
            return f"object {o.key} holds [{o.first}, {o.last}]"
        if o.last >= i.end:
            return f"object {o.key} holds [{o.first}, {o.last}], at or beyond the end {i.end}"
        if o.key in keys:
            return f"object {o.key} named twice"
        keys.add(o.key)
    for first, last in i.gaps:
        if last < first or first < 0 or last >= i.end:
            return f"gap [{first}, {last}] outside [0, {i.end})"
    return None


def committed_any(state: LogState) -> bool:
    """Whether the log commits anything (an import or a commit moved a partition): readers
    then take the archive from the log, not from the states beside it."""
    return any(st.end > 0 for st in state.partitions.values())


# -- writers' decisions -------------------------------------------------------------------


def claim_entry(
    state: LogState, run_id: str, refs: Sequence[PartitionRef], *, at: float | None = None
) -> Entry:
    """The claim a writer that read the log up to `state` creates next: the lease. `at`, in
    every kind of entry: the writer's wall-clock time (shown, never decided on)."""
    return Entry(
        state.seq + 1,
        EntryKind.CLAIM,
        WriterId(run_id, state.max_epoch + 1),
        claims=tuple(sorted(refs)),
        at=at,
    )


def is_fenced(state: LogState, writer: WriterId, refs: Iterable[PartitionRef]) -> bool:
    """True when a claim above `writer`'s epoch took any of `refs` (it must stop)."""
    return any(
        (h := state.holder(r)) is not None and h != writer and h.epoch > writer.epoch for r in refs
    )


def iceberg_commit_allowed(table_epoch: int | None, epoch: int) -> bool:
    """May a writer holding a claim of ``epoch`` commit to an Iceberg table whose last commit
    of ours carries ``table_epoch`` (None: none carries one)? An Iceberg route's commit is
    pyiceberg's, not an entry: the claim's epoch, written into each snapshot of ours, is its
    fence token. A table a newer claimant committed to (or fenced, with a commit without
    files, at its session's start) refuses every older writer's commit."""
    return table_epoch is None or table_epoch <= epoch


class Verdict(Enum):
    OK = "ok"
    FENCED = "fenced"  # a higher claim took a partition: stop, never commit
    STALE = "stale"  # a range no longer starts at the committed end: plan again


def commit_verdict(
    state: LogState, writer: WriterId, commits: Sequence[PartitionCommit]
) -> Verdict:
    """May `writer` create its commit of `commits` as entry `state.seq + 1`?"""
    refs = [c.ref for c in commits]
    if is_fenced(state, writer, refs):
        return Verdict.FENCED
    if any(state.holder(c.ref) != writer for c in commits):
        return Verdict.FENCED
    if any(range_problem(state.end(c.ref), c, begun=_begun(state, c.ref)) for c in commits):
        return Verdict.STALE
    return Verdict.OK


def _begun(state: LogState, ref: PartitionRef) -> bool:
    st = state.partitions.get(ref)
    return st is not None and bool(st.objects or st.begin)


def commit_entry(
    state: LogState,
    writer: WriterId,
    commits: Sequence[PartitionCommit],
    *,
    at: float | None = None,
) -> Entry:
    return Entry(state.seq + 1, EntryKind.COMMIT, writer, commits=tuple(commits), at=at)


def rewrite_verdict(
    state: LogState, writer: WriterId, rewrites: Sequence[PartitionRewrite]
) -> Verdict:
    """May `writer` create its rewrite of `rewrites` as entry `state.seq + 1`? Only as the
    holder of the claim on each partition (maintenance runs under the job's claim, so a run
    and a rewrite never commit over each other), over objects the log still names (in
    order: as the fold applies them)."""
    refs = [rw.ref for rw in rewrites]
    if is_fenced(state, writer, refs) or any(state.holder(r) != writer for r in refs):
        return Verdict.FENCED
    try:
        _fold_rewrite(state, rewrite_entry(state, writer, rewrites))
    except InvalidEntry:
        return Verdict.STALE
    return Verdict.OK


def rewrite_entry(
    state: LogState,
    writer: WriterId,
    rewrites: Sequence[PartitionRewrite],
    *,
    at: float | None = None,
) -> Entry:
    return Entry(state.seq + 1, EntryKind.REWRITE, writer, rewrites=tuple(rewrites), at=at)


def import_entry(
    state: LogState,
    writer: WriterId,
    imports: Sequence[PartitionImport],
    *,
    at: float | None = None,
) -> Entry:
    return Entry(state.seq + 1, EntryKind.IMPORT, writer, imports=tuple(imports), at=at)


class Outcome(Enum):
    LANDED = "landed"  # the entry at seq is ours: created
    TAKEN = "taken"  # another entry holds seq: ours can never land there
    UNKNOWN = "unknown"  # seq is empty: a create of ours may still land; create it again


def create_outcome(found: Entry | None, ours: Entry) -> Outcome:
    """What an entry create whose response was lost did, from a read of its seq afterwards."""
    if found is None:
        return Outcome.UNKNOWN
    return Outcome.LANDED if found == ours else Outcome.TAKEN


@dataclass(frozen=True)
class FoundObject:
    """An object found at a key a writer wanted to create (412): its writer, from metadata."""

    key: str
    etag: str
    writer: WriterId | None  # None: no readable writer metadata (not ours)
    attempt: int


class Found(Enum):
    NAMED = "named"  # the log names it: the writer's plan is stale, read the log again
    OURS = "ours"  # this attempt's own create, landed though its response was lost
    DELETE = "delete"  # its writer is fenced, or a dead attempt of this run: delete If-Match
    CHECK = "check"  # a writer not fenced by what we read (a live sibling attempt included)


def found_object(
    state: LogState,
    me: WriterId,
    attempt: int,
    dead: Container[int],
    ref: PartitionRef,
    found: FoundObject,
) -> Found:
    """What a 412 on an object create by `attempt` of writer `me` means. Never adoption: an
    object is named only by the attempt that created it, with the checksum it computed.

    `dead`: the attempts of this run declared dead, whose late creates may be deleted. A
    lower attempt number proves nothing where attempts run side by side (a Spark
    speculative copy, a retry whose first attempt still runs): only the one that hands out
    attempts (the driver) declares one dead, and an attempt knows what it declared when it
    launched the attempt. A live sibling's object is CHECK: its attempt fails, the driver
    decides (it waits for the sibling, or declares it dead and launches another)."""
    if found.key in state.named():
        return Found.NAMED
    w = found.writer
    if w is None:
        return Found.CHECK
    if w == me:
        if found.attempt == attempt:
            return Found.OURS
        return Found.DELETE if found.attempt in dead else Found.CHECK
    return Found.DELETE if is_fenced(state, w, [ref]) else Found.CHECK


@dataclass(frozen=True)
class Listed:
    """An object a listing showed, with the writer its metadata names."""

    key: str
    etag: str
    last_modified: float
    writer: WriterId | None
    ref: PartitionRef | None


def vacuum_candidates(
    state: LogState,
    me: WriterId,
    objects: Iterable[Listed],
    now: float,
    grace: float,
    entry_times: Mapping[int, float] | None = None,
) -> list[Listed]:
    """Objects vacuum deletes (If-Match on the listed ETag): named by no entry, created by a
    fenced writer or by this run (whose session is over: its attempts are dead), and older
    than `grace`. A writer the state does not fence keeps its objects: it may still commit.

    An object a rewrite replaced was named until that rewrite: readers that read the log
    before it may still GET it. So in a partition a rewrite touched, vacuum also waits until
    the last rewrite's entry (its LastModified in `entry_times`, by seq, from vacuum's own
    listing) is older than `grace`; an entry the listing does not show is too young."""
    named = state.named()
    times = entry_times or {}
    out = []
    for o in objects:
        if o.key in named or o.writer is None or o.ref is None:
            continue
        if now - o.last_modified < grace:
            continue
        st = state.partitions.get(o.ref)
        if st is not None and st.rewritten and now - times.get(st.rewritten, now) < grace:
            continue
        if o.writer.run_id == me.run_id or is_fenced(state, o.writer, [o.ref]):
            out.append(o)
    return out

"""The protocol's decisions, from what was observed: no I/O.

The log is folded entry by entry into a `LogState`. A claim takes an epoch above every one
before it and becomes the holder of its partitions; a commit is valid only from the current
holder of each partition it names, starting exactly at the partition's committed end, its
objects covering [start, end) in order. An import (migration from the state protocol) sets
the committed end, objects and passed gaps of partitions whose log end is still 0, from the
holder of their claim. `fold` refuses anything else (`InvalidEntry`): a
correct writer never creates such an entry, so a reader that meets one meets a broken log.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from kafka_archive.archiver.protocol.log import (
    Checkpoint,
    Entry,
    EntryKind,
    ObjectRef,
    PartitionCommit,
    PartitionImport,
    PartitionRef,
    PartitionState,
    WriterId,
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
        """Every object a commit names, by key."""
        return {o.key: o for st in self.partitions.values() for o in st.objects}

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
                else PartitionState(old.end, entry.writer, old.objects, old.gaps)
            )
        return LogState(entry.seq, entry.writer.epoch, parts)
    if entry.kind is EntryKind.IMPORT:
        return _fold_import(state, entry)
    if entry.claims or entry.imports or not entry.commits:
        raise InvalidEntry(f"entry {entry.seq}: a commit with claims or without ranges")
    for c in entry.commits:
        old = parts.get(c.ref)
        if old is None or old.holder != entry.writer:
            raise InvalidEntry(
                f"entry {entry.seq}: {c.ref} committed by {entry.writer}, which does not hold it"
            )
        problem = range_problem(old.end, c)
        if problem:
            raise InvalidEntry(f"entry {entry.seq}: {c.ref}: {problem}")
        parts[c.ref] = PartitionState(c.end, old.holder, old.objects + c.objects, old.gaps)
    return LogState(entry.seq, state.max_epoch, parts)


def _fold_import(state: LogState, entry: Entry) -> LogState:
    if entry.claims or entry.commits:
        raise InvalidEntry(f"entry {entry.seq}: an import with claims or commits")
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
        parts[i.ref] = PartitionState(i.end, old.holder, i.objects, i.gaps)
    return LogState(entry.seq, state.max_epoch, parts)


def fold_all(state: LogState, entries: Iterable[Entry]) -> LogState:
    for e in entries:
        state = fold(state, e)
    return state


def range_problem(committed_end: int, c: PartitionCommit) -> str | None:
    """Why `c` cannot follow a partition committed up to `committed_end` (None: it can)."""
    if c.start != committed_end:
        return f"range starts at {c.start}, committed end is {committed_end}"
    if c.end <= c.start or not c.objects:
        return f"empty range [{c.start}, {c.end})"
    at = c.start
    for o in c.objects:
        if o.first != at or o.last < o.first:
            return f"object {o.key} holds [{o.first}, {o.last}], expected to start at {at}"
        at = o.last + 1
    if at != c.end:
        return f"objects end at {at}, range at {c.end}"
    return None


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


def claim_entry(state: LogState, run_id: str, refs: Sequence[PartitionRef]) -> Entry:
    """The claim a writer that read the log up to `state` creates next: the lease."""
    return Entry(
        state.seq + 1,
        EntryKind.CLAIM,
        WriterId(run_id, state.max_epoch + 1),
        claims=tuple(sorted(refs)),
    )


def is_fenced(state: LogState, writer: WriterId, refs: Iterable[PartitionRef]) -> bool:
    """True when a claim above `writer`'s epoch took any of `refs` (it must stop)."""
    return any(
        (h := state.holder(r)) is not None and h != writer and h.epoch > writer.epoch for r in refs
    )


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
    if any(range_problem(state.end(c.ref), c) for c in commits):
        return Verdict.STALE
    return Verdict.OK


def commit_entry(state: LogState, writer: WriterId, commits: Sequence[PartitionCommit]) -> Entry:
    return Entry(state.seq + 1, EntryKind.COMMIT, writer, commits=tuple(commits))


def import_entry(state: LogState, writer: WriterId, imports: Sequence[PartitionImport]) -> Entry:
    return Entry(state.seq + 1, EntryKind.IMPORT, writer, imports=tuple(imports))


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
    state: LogState, me: WriterId, objects: Iterable[Listed], now: float, grace: float
) -> list[Listed]:
    """Objects vacuum deletes (If-Match on the listed ETag): named by no entry, created by a
    fenced writer or by this run (whose session is over: its attempts are dead), and older
    than `grace`. A writer the state does not fence keeps its objects: it may still commit."""
    named = state.named()
    out = []
    for o in objects:
        if o.key in named or o.writer is None or o.ref is None:
            continue
        if now - o.last_modified < grace:
            continue
        if o.writer.run_id == me.run_id or is_fenced(state, o.writer, [o.ref]):
            out.append(o)
    return out

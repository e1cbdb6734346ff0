"""The commit log's entries and checkpoints: model, key naming and JSON codec.

Per target (bucket + prefix) the log is `<prefix>/.kafka-archive/log/<seq:020d>.json`, each
entry created with If-None-Match: * (its creation is the commit point and the fence), and
every K entries a checkpoint `checkpoint/<seq:020d>.json` holding the state folded up to
that entry, so a reader reads the newest checkpoint plus the entries after it. Checkpoints
have their own folder so that finding the newest lists only checkpoints, not every entry
(a follow service makes ~17,000 entries a day: 17 LISTs a session start otherwise).

Entries are never deleted: a writer that read the log long ago creates entry N only because
N is absent; a deleted N would let it commit on a stale view.

A rewrite entry (compact, erase, expire: issue 38) replaces committed objects of a partition
by new ones and records the offsets it removes, by reason and when (never an erased key).
Documents that carry rewrites are format version 2; the others stay version 1, so a log
that was never rewritten stays readable by a reader of version 1, and one that was is
refused by it with "upgrade it" (it would not know which objects are replaced). Entries
with a commit whose objects interleave (``tiled`` false: PARTITIONBY) are version 3, so a
reader of version 2, which would check them as tiled, says "upgrade it" too. Entries with a
commit that moves an end without objects (passed gaps, a partition's start past 0) or names
side objects (block indexes, dead letters), and checkpoints with either, are version 4: an
older reader would find the log broken, or offsets missing below the start, and an older
vacuum would delete side objects. A rewrite entry that rewrites one partition more than once
(separate runs of its objects: erase) is version 5, which readers up to 4 (they refuse it as
a broken log) refuse with "upgrade it". A rewrite of a partition whose objects interleave
(``tiled`` false: one PARTITIONBY group's objects replaced, compact) is version 6: a reader up
to 5 would check it as tiled and call the log broken, so it says "upgrade it". Every entry
carries its writer's wall-clock time (``at``; additive, no version: an older reader ignores
it), and each object it names the time bounds of its records where known (``min_time_ms``,
``max_time_ms``: additive too; ``expire`` drops an object wholly before its cut without
reading it).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

FORMAT_VERSION = 6  # the newest this reads and writes
_UNTILED_REWRITE_VERSION = 6  # rewrites of one group's interleaved objects (PARTITIONBY)
_REWRITES_VERSION = 5  # entries rewriting one partition more than once (issue 38: erase)
_MOVES_VERSION = 4  # commits with gaps, a start past 0 or side objects; such checkpoints
_UNTILED_VERSION = 3  # entries with commits whose objects interleave (PARTITIONBY)
_REWRITE_VERSION = 2  # documents with rewrites (issue 38)
_PLAIN_VERSION = 1  # documents without rewrites: readable by every version
LOG_DIR = ".kafka-archive/log/"
CHECKPOINT_DIR = "checkpoint/"
_SUFFIX = ".json"


class LogFormatError(ValueError):
    """A log document that this reader cannot read: damaged, or of a newer format."""


class LogVersionError(LogFormatError):
    """A log document of a newer format than this reader reads."""


def log_prefix(prefix: str) -> str:
    return f"{prefix.rstrip('/')}/{LOG_DIR}" if prefix else LOG_DIR


def checkpoint_prefix(prefix: str) -> str:
    return f"{log_prefix(prefix)}{CHECKPOINT_DIR}"


def entry_key(prefix: str, seq: int) -> str:
    return f"{log_prefix(prefix)}{seq:020d}{_SUFFIX}"


def checkpoint_key(prefix: str, seq: int) -> str:
    return f"{checkpoint_prefix(prefix)}{seq:020d}{_SUFFIX}"


def entry_seq(prefix: str, key: str) -> int | None:
    """The seq of a log entry key of the target at `prefix`, None for any other key."""
    log = log_prefix(prefix)
    name = key[len(log) :] if key.startswith(log) else ""
    digits = name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else ""
    return int(digits) if len(digits) == 20 and digits.isdigit() else None


def checkpoint_seq(key: str) -> int | None:
    """The seq of a checkpoint key, None for any other key."""
    folder, _, name = key.rpartition("/")
    if not folder.endswith(CHECKPOINT_DIR.rstrip("/")) or not name.endswith(_SUFFIX):
        return None
    digits = name[: -len(_SUFFIX)]
    return int(digits) if len(digits) == 20 and digits.isdigit() else None


@dataclass(frozen=True, order=True)
class PartitionRef:
    """A committed stream: one partition of one topic, as one route writes it."""

    route: str
    topic: str
    partition: int


@dataclass(frozen=True)
class WriterId:
    """Who wrote an entry or an object: a run and the epoch its claim took."""

    run_id: str
    epoch: int


@dataclass(frozen=True)
class ObjectRef:
    """An object a commit names: its key and the offsets [first, last] it holds.

    ``min_time_ms``/``max_time_ms``: the least and greatest time of its records (epoch ms),
    where its writer knew them (records that store their time; None: unknown, e.g. imported
    or written by a version before bounds). Additive (no format version: a reader ignores
    object fields it does not know), and not part of which object it is: a writer that
    does not know them names the same object without them."""

    key: str
    first: int
    last: int
    records: int
    size: int
    checksum: str
    min_time_ms: int | None = field(default=None, compare=False)
    max_time_ms: int | None = field(default=None, compare=False)


Gaps = tuple[tuple[int, int], ...]
"""(first, last) offsets of each gap a run passed (allow_gaps: records Kafka deleted before
they were archived), oldest first: in no object, and not a hole."""


@dataclass(frozen=True)
class PartitionCommit:
    """A partition's committed range moving from `start` to `end` by `objects`: in order,
    each one's range running from where the one before ended (`tiled`), or else objects
    whose offsets interleave within the range (PARTITIONBY, time layouts: several objects
    of a partition open at once), each one's [first, last] its first and last record.

    Ends that move without objects: `gaps` passed in [start, end) (allow_gaps: offsets gone
    from Kafka, in no object), and `begins`, the partition's first commit starting past its
    end 0 (``--start``: the partition begins at `start`; the offsets below it are before
    the start, never archived). Either may come with no object at all.

    `sides`: objects that belong to the commit but hold none of its offsets (a gzip
    object's block index, the partition's dead letters), each named by the offsets it is
    about: named like the objects (vacuum keeps them), never counted as holding offsets."""

    ref: PartitionRef
    start: int
    end: int
    objects: tuple[ObjectRef, ...]
    tiled: bool = True
    gaps: Gaps = ()
    begins: bool = False
    sides: tuple[ObjectRef, ...] = ()


@dataclass(frozen=True)
class PartitionImport:
    """A partition as the state protocol committed it (migration, :mod:`.migrate`): its
    committed end, the objects below it (in start-offset order; with PARTITIONBY their
    ranges interleave) and the gaps its runs passed."""

    ref: PartitionRef
    end: int
    objects: tuple[ObjectRef, ...]
    gaps: Gaps = ()


class EntryKind(Enum):
    CLAIM = "claim"
    COMMIT = "commit"
    REWRITE = "rewrite"
    IMPORT = "import"  # an archive of the state protocol, taken over by the log


REMOVAL_REASONS = ("erased", "expired")


@dataclass(frozen=True, order=True)
class Removed:
    """Offsets [first, last] of a partition removed by a rewrite: why (`erased`: records of
    keys erased; `expired`: records before a time) and when (the rewriter's clock, seconds
    since the epoch). Never the erased key itself."""

    first: int
    last: int
    reason: str
    at: float


@dataclass(frozen=True)
class PartitionRewrite:
    """Committed objects of a partition (`replaced`: consecutive in its object list, as the
    log names them: key, offsets and checksum) replaced by `objects`, which hold every offset
    of the replaced span [replaced[0].first, replaced[-1].last] except those removed before
    and those `removed` now. An object's [first, last] is its span: the offsets in it that
    are removed are not in it (its `records` counts the others).

    `tiled` false (PARTITIONBY, time layouts: the partition's objects interleave): `replaced`
    are named objects of one group, consecutive among that group's objects, not among the
    partition's; `objects` lie inside [min first, max last] of the replaced and hold as many
    records as the replaced less the offsets `removed` now (which offsets Kafka had is not in
    the log: coverage is proven from the bodies, by the simulation)."""

    ref: PartitionRef
    replaced: tuple[ObjectRef, ...]
    objects: tuple[ObjectRef, ...]
    removed: tuple[Removed, ...] = ()
    tiled: bool = True


@dataclass(frozen=True)
class Entry:
    """One log entry: a claim (the lease: its epoch fences every lower one on its partitions),
    a commit (ranges moved, by the writer holding the claim on each), a rewrite (committed
    objects replaced by the holder, the end unmoved), or an import (the committed ends and
    objects of an archive of states, on partitions the log has not committed, by the holder
    of their claim)."""

    seq: int
    kind: EntryKind
    writer: WriterId
    claims: tuple[PartitionRef, ...] = ()
    commits: tuple[PartitionCommit, ...] = ()
    rewrites: tuple[PartitionRewrite, ...] = ()  # kind REWRITE: by the holder, end unmoved
    imports: tuple[PartitionImport, ...] = ()
    # The writer's wall-clock time of the entry, seconds since the epoch (None: written by a
    # version before commit times). Additive: a reader that does not know it ignores it.
    at: float | None = None


@dataclass(frozen=True)
class PartitionState:
    """A partition as the log left it: committed end, claim holder, committed objects; the
    offsets rewrites removed (sorted) and the seq of the last rewrite (0: none), from whose
    time vacuum counts the grace of the objects it replaced; the gaps passed below the end
    (imported from the states, or passed by commits) and the offset it began at (--start);
    the time of the last entry that committed to it (commit, rewrite, import: its writer's
    clock; None: none carried a time)."""

    end: int
    holder: WriterId | None
    objects: tuple[ObjectRef, ...]
    removed: tuple[Removed, ...] = ()
    rewritten: int = 0
    gaps: Gaps = ()
    committed_at: float | None = None
    begin: int = 0  # where the partition began (--start): offsets below it never archived
    sides: tuple[ObjectRef, ...] = ()  # block indexes and dead letters its commits named


@dataclass(frozen=True)
class Checkpoint:
    """The state folded from entries 1..seq (seq 0: the empty log)."""

    seq: int
    max_epoch: int
    partitions: Mapping[PartitionRef, PartitionState]


def _ref_json(ref: PartitionRef) -> dict[str, Any]:
    return {"route": ref.route, "topic": ref.topic, "partition": ref.partition}


def _ref(d: Mapping[str, Any]) -> PartitionRef:
    return PartitionRef(str(d["route"]), str(d["topic"]), int(d["partition"]))


def _writer_json(w: WriterId) -> dict[str, Any]:
    return {"run_id": w.run_id, "epoch": w.epoch}


def _writer(d: Mapping[str, Any]) -> WriterId:
    return WriterId(str(d["run_id"]), int(d["epoch"]))


def _object_json(o: ObjectRef) -> dict[str, Any]:
    return {
        "key": o.key,
        "first": o.first,
        "last": o.last,
        "records": o.records,
        "size": o.size,
        "checksum": o.checksum,
        # Only where known (additive: older readers ignore them; no version bump).
        **({} if o.min_time_ms is None else {"min_time_ms": o.min_time_ms}),
        **({} if o.max_time_ms is None else {"max_time_ms": o.max_time_ms}),
    }


def _object(d: Mapping[str, Any]) -> ObjectRef:
    return ObjectRef(
        str(d["key"]),
        int(d["first"]),
        int(d["last"]),
        int(d["records"]),
        int(d["size"]),
        str(d["checksum"]),
        _time(d.get("min_time_ms")),
        _time(d.get("max_time_ms")),
    )


def _time(value: Any) -> int | None:
    return None if value is None else int(value)


def _removed_json(r: Removed) -> dict[str, Any]:
    return {"first": r.first, "last": r.last, "reason": r.reason, "at": r.at}


def _removed(d: Mapping[str, Any]) -> Removed:
    reason = str(d["reason"])
    if reason not in REMOVAL_REASONS:
        raise ValueError(f"removal reason {reason!r}")
    return Removed(int(d["first"]), int(d["last"]), reason, float(d["at"]))


def _rewrite_json(rw: PartitionRewrite) -> dict[str, Any]:
    return {
        **_ref_json(rw.ref),
        "replaced": [_object_json(o) for o in rw.replaced],
        "objects": [_object_json(o) for o in rw.objects],
        "removed": [_removed_json(r) for r in rw.removed],
        # Only where objects interleave, so that tiled rewrites encode as before.
        **({} if rw.tiled else {"tiled": False}),
    }


def _rewrite(d: Mapping[str, Any]) -> PartitionRewrite:
    return PartitionRewrite(
        _ref(d),
        tuple(_object(o) for o in d["replaced"]),
        tuple(_object(o) for o in d["objects"]),
        tuple(_removed(r) for r in d["removed"]),
        tiled=bool(d.get("tiled", True)),
    )


def _gaps(doc: Mapping[str, Any]) -> Gaps:
    return tuple((int(g[0]), int(g[1])) for g in doc.get("gaps", ()))


def _at(value: Any) -> float | None:
    return None if value is None else float(value)


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _load(data: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise LogFormatError(f"damaged {what}: {e}") from None
    if not isinstance(doc, dict):
        raise LogFormatError(f"damaged {what}: not a JSON object")
    version = doc.get("version")
    if not isinstance(version, int) or version < 1:
        raise LogFormatError(f"damaged {what}: no format version")
    if version > FORMAT_VERSION:
        raise LogVersionError(
            f"{what} has format version {version}; this kafka-archive reads up to "
            f"{FORMAT_VERSION}: upgrade it"
        )
    return doc


def encode_entry(entry: Entry) -> bytes:
    rewrites = entry.kind is EntryKind.REWRITE or entry.rewrites
    extra = {"rewrites": [_rewrite_json(rw) for rw in entry.rewrites]} if rewrites else {}
    return _dump(
        {
            **extra,
            "version": (
                _UNTILED_REWRITE_VERSION
                if any(not rw.tiled for rw in entry.rewrites)
                else _REWRITES_VERSION
                if len({rw.ref for rw in entry.rewrites}) < len(entry.rewrites)
                else _MOVES_VERSION
                if any(c.gaps or c.begins or c.sides for c in entry.commits)
                else _UNTILED_VERSION
                if any(not c.tiled for c in entry.commits)
                else _REWRITE_VERSION
                if rewrites
                else _PLAIN_VERSION
            ),
            "seq": entry.seq,
            "kind": entry.kind.value,
            "writer": _writer_json(entry.writer),
            "claims": [_ref_json(r) for r in entry.claims],
            "commits": [
                {
                    **_ref_json(c.ref),
                    "start": c.start,
                    "end": c.end,
                    "objects": [_object_json(o) for o in c.objects],
                    # Only where objects interleave, so that tiled commits encode as before.
                    **({} if c.tiled else {"tiled": False}),
                    # Only where an end moves without objects (version 4).
                    **({"gaps": [list(g) for g in c.gaps]} if c.gaps else {}),
                    **({"begins": True} if c.begins else {}),
                    **({"sides": [_object_json(o) for o in c.sides]} if c.sides else {}),
                }
                for c in entry.commits
            ],
            # Only in import entries, so that claims and commits encode as before.
            **(
                {
                    "imports": [
                        {
                            **_ref_json(i.ref),
                            "end": i.end,
                            "objects": [_object_json(o) for o in i.objects],
                            "gaps": [list(g) for g in i.gaps],
                        }
                        for i in entry.imports
                    ]
                }
                if entry.imports
                else {}
            ),
            # Only when given (additive: older readers ignore it; no version bump).
            **({} if entry.at is None else {"at": entry.at}),
        }
    )


@functools.lru_cache(maxsize=4096)
def decode_entry(data: bytes) -> Entry:
    """The entry `data` encodes (an entry never changes, and decoding it is pure: cached)."""
    doc = _load(data, "log entry")
    try:
        return Entry(
            seq=int(doc["seq"]),
            kind=EntryKind(doc["kind"]),
            writer=_writer(doc["writer"]),
            claims=tuple(_ref(r) for r in doc["claims"]),
            commits=tuple(
                PartitionCommit(
                    _ref(c),
                    int(c["start"]),
                    int(c["end"]),
                    tuple(_object(o) for o in c["objects"]),
                    tiled=bool(c.get("tiled", True)),
                    gaps=_gaps(c),
                    begins=bool(c.get("begins", False)),
                    sides=tuple(_object(o) for o in c.get("sides", ())),
                )
                for c in doc["commits"]
            ),
            rewrites=tuple(_rewrite(rw) for rw in doc.get("rewrites", ())),
            imports=tuple(
                PartitionImport(
                    _ref(i), int(i["end"]), tuple(_object(o) for o in i["objects"]), _gaps(i)
                )
                for i in doc.get("imports", ())
            ),
            at=_at(doc.get("at")),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise LogFormatError(f"damaged log entry: {e!r}") from None


def encode_checkpoint(cp: Checkpoint) -> bytes:
    rewritten = any(st.rewritten for st in cp.partitions.values())
    return _dump(
        {
            "version": (
                _MOVES_VERSION
                if any(st.begin or st.sides for st in cp.partitions.values())
                else _REWRITE_VERSION
                if rewritten
                else _PLAIN_VERSION
            ),
            "seq": cp.seq,
            "max_epoch": cp.max_epoch,
            "partitions": [
                {
                    **_ref_json(ref),
                    "end": st.end,
                    "holder": None if st.holder is None else _writer_json(st.holder),
                    "objects": [_object_json(o) for o in st.objects],
                    **(
                        {
                            "removed": [_removed_json(r) for r in st.removed],
                            "rewritten": st.rewritten,
                        }
                        if st.rewritten
                        else {}
                    ),
                    **({"gaps": [list(g) for g in st.gaps]} if st.gaps else {}),
                    **({} if st.committed_at is None else {"committed_at": st.committed_at}),
                    **({"begin": st.begin} if st.begin else {}),
                    **({"sides": [_object_json(o) for o in st.sides]} if st.sides else {}),
                }
                for ref, st in sorted(cp.partitions.items())
            ],
        }
    )


def decode_checkpoint(data: bytes) -> Checkpoint:
    doc = _load(data, "log checkpoint")
    try:
        return Checkpoint(
            seq=int(doc["seq"]),
            max_epoch=int(doc["max_epoch"]),
            partitions={
                _ref(p): PartitionState(
                    int(p["end"]),
                    None if p["holder"] is None else _writer(p["holder"]),
                    tuple(_object(o) for o in p["objects"]),
                    tuple(_removed(r) for r in p.get("removed", ())),
                    int(p.get("rewritten", 0)),
                    _gaps(p),
                    _at(p.get("committed_at")),
                    int(p.get("begin", 0)),
                    tuple(_object(o) for o in p.get("sides", ())),
                )
                for p in doc["partitions"]
            },
        )
    except (KeyError, TypeError, ValueError) as e:
        raise LogFormatError(f"damaged log checkpoint: {e!r}") from None

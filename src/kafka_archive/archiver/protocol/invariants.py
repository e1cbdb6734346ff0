"""The simulation's invariants, checked after every move against the store's own contents
(never a writer's view): see `simulation` for the list. `Violation` is what a broken one
raises, with what broke."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    Entry,
    PartitionRef,
    checkpoint_seq,
    decode_checkpoint,
    decode_entry,
    entry_key,
    log_prefix,
)
from kafka_archive.archiver.protocol.memstore import MemStore
from kafka_archive.archiver.protocol.writer import checksum, object_writer


class Violation(Exception):
    pass


@dataclass
class Checker:
    """The invariants, checked against the store's own contents (never a writer's view)."""

    store: MemStore
    prefix: str
    state: core.LogState = field(default_factory=core.LogState)
    entries: dict[int, bytes] = field(default_factory=dict)
    committed: dict[str, str] = field(default_factory=dict)  # key -> ETag when named
    checkpoints: set[int] = field(default_factory=set)
    folds: dict[int, core.LogState] = field(default_factory=dict)
    covered: dict[PartitionRef, tuple[int, int]] = field(default_factory=dict)
    # run, attempt -> declared dead by the run's driver (the truth: not an attempt's view)
    is_dead: Callable[[str, int], bool] = lambda run, attempt: False
    made: dict[str, tuple[str, Mapping[str, str]]] = field(default_factory=dict)
    # rewrites (issue 38): key -> (ETag, store time of the rewrite that replaced it)
    retired: dict[str, tuple[str, float]] = field(default_factory=dict)
    removed_seen: dict[PartitionRef, frozenset[int]] = field(default_factory=dict)
    grace: float = 60.0
    # Objects interleave (PARTITIONBY): offsets for which this is False Kafka never had.
    never_had: Callable[[int], bool] | None = None
    # ... and whether the record at an offset belongs in the object at a key (its group).
    in_group: Callable[[PartitionRef, int, str], bool] | None = None

    def check(self) -> None:
        """Checks what changed in the store since the last call (all of it, the first time)."""
        changed, self.store.changed = self.store.changed, set()
        if not changed:
            return
        log = log_prefix(self.prefix)
        for key in sorted(changed):
            raw = self.store.raw(key)
            if key in self.committed and (raw is None or raw[0] != self.committed[key]):
                raise Violation(f"committed object {key} deleted or overwritten")
            if key in self.retired:
                self._retired_gone(key, raw)
            if not key.startswith(log):
                self._removed(key, raw)
                continue
            cp_seq = checkpoint_seq(key)
            if cp_seq is not None:
                seq = cp_seq
                if raw is not None:  # created, or (a violation if different) rewritten
                    self.checkpoints.add(seq)
                    self._new_entries()
                    if decode_checkpoint(raw[1]) != self.folds[seq].checkpoint():
                        raise Violation(f"checkpoint {seq} is not the fold of entries 1..{seq}")
            elif (seq := int(key[len(log) :].split(".")[0])) in self.entries and (
                raw is None or raw[1] != self.entries[seq]
            ):
                raise Violation(f"log entry {seq} overwritten or deleted")
        self._new_entries()

    def _removed(self, key: str, raw: tuple[str, bytes] | None) -> None:
        """An object is deleted or replaced only when its writer is fenced or its attempt
        was declared dead by its run's driver: never a live attempt's, by a sibling or by
        anyone (its run may still commit it)."""
        old = self.made.get(key)
        if old is not None and (raw is None or raw[0] != old[0]):
            writer, attempt, ref = object_writer(old[1])
            if (
                writer is not None
                and ref is not None
                and not core.is_fenced(self.state, writer, [ref])
                and not self.is_dead(writer.run_id, attempt)
            ):
                raise Violation(
                    f"{key} of live attempt {attempt} of {writer.run_id} (not fenced) "
                    "deleted or replaced"
                )
        if raw is None:
            self.made.pop(key, None)
        else:
            self.made[key] = (raw[0], dict(self.store.objects[key].metadata))

    def _new_entries(self) -> None:
        while (raw := self.store.raw(entry_key(self.prefix, self.state.seq + 1))) is not None:
            entry = decode_entry(raw[1])
            before = self.state
            try:
                self.state = core.fold(self.state, entry)
            except core.InvalidEntry as e:
                raise Violation(f"invalid entry (a stale writer committed?): {e}") from None
            self.entries[entry.seq] = raw[1]
            self.folds[entry.seq] = self.state
            for c in entry.commits:
                for o in c.objects:
                    obj = self.store.raw(o.key)
                    if obj is None or checksum(obj[1]) != o.checksum:
                        raise Violation(
                            f"entry {entry.seq} names {o.key}, which is missing or not "
                            "the bytes it names"
                        )
                    self.committed[o.key] = obj[0]
            if entry.rewrites:
                at = self.store.objects[entry_key(self.prefix, entry.seq)].last_modified
                self._rewrite(before, entry, at)
            if entry.commits or entry.rewrites:
                self._coverage()

    def _coverage(self) -> None:
        """Offsets [0, end) of each partition, each in one committed object or recorded as
        removed by a rewrite, never both (read from the bodies; objects checked before stay
        as they were, by invariant 3; a rewritten partition is read again). A removed offset
        stays recorded removed: it never comes back."""
        if self.never_had is not None:
            self._interleaved_coverage(self.never_had)
            return
        for ref, st in self.state.partitions.items():
            removed = frozenset(x for r in st.removed for x in range(r.first, r.last + 1))
            if not self.removed_seen.get(ref, frozenset()) <= removed:
                lost = sorted(self.removed_seen[ref] - removed)
                raise Violation(f"{ref}: removed offsets {span(lost)} no longer recorded")
            self.removed_seen[ref] = removed
            # Offsets in no object by design: removed by a rewrite, or passed as a gap (gone
            # from Kafka); those below the partition's start were never archived.
            gaps = frozenset(x for g in st.gaps for x in range(g[0], g[1] + 1))
            if removed & gaps:
                both = span(sorted(removed & gaps))
                raise Violation(f"{ref}: offsets {both} both passed and removed")
            gone = removed | gaps
            at, seen = self.covered.get(ref, (0, 0))
            at = max(at, st.begin) if not seen else at  # a partition begun past 0: from there
            for o in st.objects[seen:]:
                raw = self.store.raw(o.key)
                assert raw is not None
                offsets = json.loads(raw[1])["offsets"]
                held = [x for x in range(at, (offsets or [at])[-1] + 1) if x not in gone]
                if offsets != held or not offsets:
                    raise Violation(
                        f"{ref}: committed object {o.key} holds {span(offsets)}, the "
                        f"committed objects before it end at {at}"
                        + (f", removed {span(sorted(removed))}" if removed else "")
                        + (f", passed {span(sorted(gaps))}" if gaps else "")
                    )
                at = offsets[-1] + 1
            if any(x not in gone for x in range(at, st.end)):
                raise Violation(f"{ref}: committed objects end at {at}, committed end {st.end}")
            self.covered[ref] = (at, len(st.objects))

    def _interleaved_coverage(self, had: Callable[[int], bool]) -> None:
        """Objects that interleave: every offset below the committed end that Kafka had in
        exactly one committed object, of its own group, or recorded as removed by a
        rewrite, never both; each object's offsets inside its [first, last] and counted by
        its records (read from the bodies). A removed offset stays recorded removed."""
        for ref, st in self.state.partitions.items():
            removed = frozenset(x for r in st.removed for x in range(r.first, r.last + 1))
            if not self.removed_seen.get(ref, frozenset()) <= removed:
                lost = sorted(self.removed_seen[ref] - removed)
                raise Violation(f"{ref}: removed offsets {span(lost)} no longer recorded")
            self.removed_seen[ref] = removed
            seen: dict[int, str] = {}
            for o in st.objects:
                raw = self.store.raw(o.key)
                assert raw is not None
                offsets = json.loads(raw[1])["offsets"]
                if not offsets or offsets[0] != o.first or offsets[-1] != o.last:
                    raise Violation(
                        f"{ref}: object {o.key} holds {span(offsets)}, named as "
                        f"[{o.first}, {o.last}]"
                    )
                if len(offsets) != o.records:
                    raise Violation(
                        f"{ref}: object {o.key} holds {len(offsets)} records, "
                        f"named with {o.records}"
                    )
                for x in offsets:
                    if x in seen:
                        raise Violation(f"{ref}: offset {x} in {seen[x]} and {o.key}")
                    if x in removed:
                        raise Violation(f"{ref}: offset {x} removed and held by {o.key}")
                    if self.in_group is not None and not self.in_group(ref, x, o.key):
                        raise Violation(f"{ref}: offset {x} in {o.key}, not of its group")
                    seen[x] = o.key
            missing = [x for x in range(st.end) if had(x) and x not in seen and x not in removed]
            if missing:
                raise Violation(
                    f"{ref}: offsets {span(missing)} below the committed end "
                    f"{st.end} in no committed object"
                )
            beyond = sorted(x for x in seen if x >= st.end)
            if beyond:
                raise Violation(f"{ref}: offsets {span(beyond)} committed at or beyond {st.end}")

    def _rewrite(self, before: core.LogState, entry: Entry, at: float) -> None:
        """A rewrite entry (folded): its replaced objects retire (readable until the grace
        after `at`, the entry's creation by the store's clock), the committed end stays, and
        no retired object is named again (readers never see an object and its replacement)."""
        for rw in entry.rewrites:
            if self.state.end(rw.ref) != before.end(rw.ref):
                raise Violation(f"entry {entry.seq}: a rewrite moved {rw.ref}'s committed end")
            for o in rw.replaced:
                self.retired[o.key] = (self.committed.pop(o.key), at)
            for o in rw.objects:
                obj = self.store.raw(o.key)
                if obj is None or checksum(obj[1]) != o.checksum:
                    raise Violation(
                        f"entry {entry.seq} names {o.key}, which is missing or not the bytes "
                        "it names"
                    )
                self.committed[o.key] = obj[0]
            self.covered.pop(rw.ref, None)
        if again := set(self.retired) & set(self.state.named()):
            raise Violation(f"entry {entry.seq}: replaced objects named again: {sorted(again)}")

    def _retired_gone(self, key: str, raw: tuple[str, bytes] | None) -> None:
        """A replaced object deleted or overwritten: only once the grace after its rewrite
        is over (a reader that read the log before the rewrite GETs it until then)."""
        etag, at = self.retired[key]
        if raw is not None and raw[0] == etag:
            return
        if self.store.now - at < self.grace:
            raise Violation(
                f"replaced object {key} deleted {self.store.now - at:g} s after the rewrite "
                f"that replaced it, within the grace ({self.grace:g} s): a reader that read "
                "the log before the rewrite loses it"
            )
        del self.retired[key]


def span(offsets: Sequence[int]) -> str:
    return ",".join(map(str, offsets)) if len(offsets) < 30 else f"{len(offsets)} offsets"

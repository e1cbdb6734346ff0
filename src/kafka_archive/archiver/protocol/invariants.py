"""The simulation's invariants, checked after every move against the store's own contents
(never a writer's view): see `simulation` for the list. `Violation` is what a broken one
raises, with what broke."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
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
            if entry.commits:
                self._coverage()

    def _coverage(self) -> None:
        """Offsets [0, end) of each partition, each in one committed object (read from the
        bodies; objects checked before stay as they were, by invariant 3)."""
        for ref, st in self.state.partitions.items():
            at, seen = self.covered.get(ref, (0, 0))
            for o in st.objects[seen:]:
                raw = self.store.raw(o.key)
                assert raw is not None
                offsets = json.loads(raw[1])["offsets"]
                if offsets != list(range(at, at + len(offsets))) or not offsets:
                    raise Violation(
                        f"{ref}: committed object {o.key} holds {span(offsets)}, the "
                        f"committed objects before it end at {at}"
                    )
                at += len(offsets)
            if at != st.end:
                raise Violation(f"{ref}: committed objects end at {at}, committed end {st.end}")
            self.covered[ref] = (at, len(st.objects))


def span(offsets: Sequence[int]) -> str:
    return ",".join(map(str, offsets)) if len(offsets) < 30 else f"{len(offsets)} offsets"

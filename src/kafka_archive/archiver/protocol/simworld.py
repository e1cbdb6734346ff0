"""The world a simulated schedule runs in (:mod:`.simulation`): the faults the in-memory
store deals each request (:class:`SimFaults`) and the Kafka source the writers read
(:class:`Kafka`; :class:`GroupedKafka` for a PARTITIONBY route, whose objects interleave).
Seeded by the schedule's ``random.Random``: the same seed, the same world."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_archive.archiver.protocol.log import PartitionRef
from kafka_archive.archiver.protocol.memstore import Fate, Faults

PREFIX = "archive/t"


@dataclass
class SimFaults(Faults):
    rng: random.Random
    lose: float = 0.04
    delay: float = 0.06
    stale: float = 0.3
    lose_read: float = 0.02
    on: bool = True
    cut: Fate | None = None  # the sender's run is cut off: every request of it gets this

    def fate(self, op: str, key: str) -> Fate:
        if self.cut is not None:
            return self.cut
        if not self.on:
            return Fate.DELIVER
        r = self.rng.random()
        if op in ("GET", "HEAD", "LIST"):  # no answer: the reader sends it again
            return Fate.LOSE_RESPONSE if r < self.lose_read else Fate.DELIVER
        if r < self.lose:
            return Fate.LOSE_RESPONSE
        if r < self.lose + self.delay:
            return Fate.DELAY
        return Fate.DELIVER

    def stale_by(self) -> int:
        if self.on and self.rng.random() < self.stale:
            return self.rng.randint(1, 3)
        return 0


@dataclass
class Kafka:
    """The source: end offsets that grow; objects cut every `size` records (per writer), JSON
    bodies naming their offsets, under `prefix`. `stamps` False: a format with no place for
    a stamp (TEXT, BYTES, CSV, uncompressed JSON): `stamp` is the identity."""

    highs: dict[PartitionRef, int]
    size: int = 1
    prefix: str = PREFIX
    stamps: bool = True
    lows: Mapping[PartitionRef, int] = field(default_factory=dict)  # retention (moving mode)

    def high(self, ref: PartitionRef) -> int:
        return self.highs[ref]

    def low(self, ref: PartitionRef) -> int:
        return self.lows.get(ref, 0)

    def cut(self, ref: PartitionRef, first: int, high: int) -> tuple[str, int, bytes]:
        last = min(first + self.size, high) - 1
        key = f"{self.prefix}/{ref.topic}/{ref.partition}/{first:020d}.json"
        body = json.dumps({"partition": ref.partition, "offsets": list(range(first, last + 1))})
        return key, last, body.encode()

    def stamp(self, body: bytes, nonce: str) -> bytes:
        if not self.stamps:
            return body
        return json.dumps({**json.loads(body), "writer": nonce}).encode()


@dataclass
class GroupedKafka(Kafka):
    """The source of a PARTITIONBY route: each chunk of about `size` offsets cut into one
    object per group (`groups`; an offset's group is fixed by the record, as a field's value
    is), so a partition's objects interleave. Offsets with ``offset % 5 == 3`` Kafka never
    had (a transaction's markers): in no object; the high never ends on one (a marker is
    seen with the record after it), so every chunk holds a record."""

    groups: int = 2

    def had(self, offset: int) -> bool:
        return offset % 5 != 3

    def high(self, ref: PartitionRef) -> int:
        h = self.highs[ref]
        return h - 1 if h > 0 and not self.had(h - 1) else h

    def group(self, ref: PartitionRef, offset: int) -> int:
        return (offset + offset // 4 + ref.partition) % self.groups

    def in_group(self, ref: PartitionRef, offset: int, key: str) -> bool:
        """Whether the record at `offset` belongs in the object at `key` (its group's folder)."""
        return folder(key) == f"g{self.group(ref, offset)}"

    def cut_groups(
        self, ref: PartitionRef, first: int, high: int
    ) -> tuple[int, tuple[tuple[str, int, int, int, bytes], ...]]:
        last = min(first + self.size, high) - 1
        while not any(self.had(x) for x in range(first, last + 1)) and last + 1 < high:
            last += 1
        by_group: dict[int, list[int]] = {}
        for x in range(first, last + 1):
            if self.had(x):
                by_group.setdefault(self.group(ref, x), []).append(x)
        cuts = []
        for g, offsets in sorted(by_group.items()):
            key = f"{self.prefix}/{ref.topic}/g{g}/{ref.partition}/{offsets[0]:020d}.json"
            body = json.dumps({"partition": ref.partition, "offsets": offsets})
            cuts.append((key, offsets[0], offsets[-1], len(offsets), body.encode()))
        return last, tuple(cuts)


def folder(key: str) -> str:
    """The group folder of a `GroupedKafka` object's key (``<prefix>/<topic>/g<N>/<p>/...``)."""
    return key[len(PREFIX) + 1 :].split("/")[1]

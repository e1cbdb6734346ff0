"""The simulation with maintenance (issue 38): rewrite sessions among the writers.

`RewriteSimulation` is `simulation.Simulation` plus, now and then, a maintenance session
(`maintenance.Maintainer`, up to 3 a schedule: a crashed one's rerun included) whose planner
picks, from the log it read, a run of consecutive committed objects in one or two
partitions and compacts them, erases some of their offsets, or expires the offsets before a
cut (from the partition's first object). Its sessions crash, pause and see the same faults
as the writers'. `Checker` adds the rewrite invariants: every offset below a committed end
is in exactly one committed object or recorded as removed, never both; a removed offset
stays removed (no later commit or rewrite holds it); the fold never names a replaced object
again; a rewrite never moves the committed end; a replaced object stays readable for the
grace after the entry that replaced it. Before the writers that run after the faults start,
the live maintenance sessions finish (a rewrite's claim would fence the writer that must
commit every partition to its end). Then, as in the base simulation, a vacuum past the grace
must leave exactly the objects the log names.

`python -m kafka_archive.archiver.protocol.rewritesim [--schedules N] [--seed S]
[--mutation NAME]` runs many.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import ObjectRef, PartitionRef, PartitionState, Removed
from kafka_archive.archiver.protocol.maintenance import (
    MUTATIONS,
    Maintainer,
    NewObject,
    RewritePlan,
    generation_key,
)
from kafka_archive.archiver.protocol.mutations import GROUPED_REWRITE_MUTATIONS
from kafka_archive.archiver.protocol.simulation import Result, Simulation, _Live
from kafka_archive.archiver.protocol.simworld import PREFIX, GroupedKafka, Kafka, folder


@dataclass
class RewritingKafka(Kafka):
    """The simulation's format engine: records of the replaced bodies, less those dropped,
    cut into objects of up to `merge` records (JSON bodies naming their offsets)."""

    merge: int = 4

    def rewrite(
        self,
        ref: PartitionRef,
        generation: int,
        replaced: Sequence[tuple[ObjectRef, bytes]],
        drop: Sequence[Removed],
    ) -> list[NewObject]:
        chunks = _chunks(_kept(replaced, drop), self.merge)
        return _new_objects(ref, generation, chunks, lambda c: self.cut(ref, c[0], c[0] + 1)[0])


@dataclass
class GroupedRewritingKafka(GroupedKafka):
    """The format engine of a PARTITIONBY route: the records of the replaced bodies (one
    group's objects), less those dropped, cut into objects of up to `merge` records in the
    first replaced object's group folder (the rewriter keeps the group)."""

    merge: int = 4
    mutations: frozenset[str] = frozenset()

    def rewrite(
        self,
        ref: PartitionRef,
        generation: int,
        replaced: Sequence[tuple[ObjectRef, bytes]],
        drop: Sequence[Removed],
    ) -> list[NewObject]:
        where = folder(replaced[0][0].key)
        chunks = _chunks(_kept(replaced, drop), self.merge)
        if "rewrite_positional_offsets" in self.mutations:
            chunks = [list(range(c[0], c[0] + len(c))) for c in chunks]
        return _new_objects(
            ref,
            generation,
            chunks,
            lambda c: f"{self.prefix}/{ref.topic}/{where}/{ref.partition}/{c[0]:020d}.json",
        )


def _kept(replaced: Sequence[tuple[ObjectRef, bytes]], drop: Sequence[Removed]) -> list[int]:
    """The offsets of the replaced bodies' records, less those ``drop`` removes, in order."""
    dropped = {x for r in drop for x in range(r.first, r.last + 1)}
    return sorted(
        x for _, body in replaced for x in json.loads(body)["offsets"] if x not in dropped
    )


def _chunks(held: list[int], merge: int) -> list[list[int]]:
    return [held[i : i + merge] for i in range(0, len(held), merge)]


def _new_objects(
    ref: PartitionRef,
    generation: int,
    chunks: Sequence[list[int]],
    key_of: Callable[[list[int]], str],
) -> list[NewObject]:
    """One new object per chunk of offsets (a JSON body naming them), at ``key_of(chunk)``
    with the generation's suffix."""
    return [
        NewObject(
            generation_key(key_of(c), generation),
            c[0],
            c[-1],
            len(c),
            json.dumps({"partition": ref.partition, "offsets": c}).encode(),
        )
        for c in chunks
    ]


@dataclass
class RandomPlanner:
    """A plan drawn from its own seeded RNG (a replay draws the same): per partition picked,
    1–3 consecutive committed objects, compacted, erased (some offsets) or expired (a
    prefix of the partition's offsets)."""

    rng: random.Random
    clock: float = 0.0
    grouped: GroupedKafka | None = None  # objects interleave: one group's objects a plan
    mutations: frozenset[str] = frozenset()

    def __call__(self, state: core.LogState) -> list[RewritePlan]:
        refs = sorted(r for r, st in state.partitions.items() if st.objects)
        plans = []
        for ref in sorted(self.rng.sample(refs, min(len(refs), self.rng.randint(1, 2)))):
            st = state.partitions[ref]
            mode = self.rng.choice(("compact", "erase", "expire"))
            if self.grouped is not None:
                plans.append(self._grouped(self.grouped, ref, st, mode))
                continue
            i = 0 if mode == "expire" else self.rng.randrange(len(st.objects))
            replaced = st.objects[i : i + self.rng.randint(1, 3)]
            removed = {x for r in st.removed for x in range(r.first, r.last + 1)}
            held = [x for x in range(replaced[0].first, replaced[-1].last + 1) if x not in removed]
            if mode == "erase":
                drop = [x for x in held if self.rng.random() < 0.3]
            elif mode == "expire":
                drop = held[: self.rng.randint(1, len(held))]
            else:
                drop = []
            reason = "erased" if mode == "erase" else "expired"
            plans.append(RewritePlan(ref, replaced, _ranges(drop, reason, self.clock)))
        return plans

    def _grouped(
        self, source: GroupedKafka, ref: PartitionRef, st: PartitionState, mode: str
    ) -> RewritePlan:
        """1-3 consecutive objects of one group (in first-offset order); the offsets an
        erase or expire drops are records they hold (the world's: as a real erase reads
        its objects)."""
        groups = sorted({folder(o.key) for o in st.objects})
        g = self.rng.choice(groups)
        mine = sorted(
            (o for o in st.objects if "rewrite_two_groups" in self.mutations or folder(o.key) == g),
            key=lambda o: o.first,
        )
        i = 0 if mode == "expire" else self.rng.randrange(len(mine))
        replaced = tuple(mine[i : i + self.rng.randint(1, 3)])
        removed = {x for r in st.removed for x in range(r.first, r.last + 1)}
        folders = {folder(o.key) for o in replaced}
        lo, hi = min(o.first for o in replaced), max(o.last for o in replaced)
        held = [
            x
            for x in range(lo, hi + 1)
            if source.had(x) and x not in removed and f"g{source.group(ref, x)}" in folders
        ]
        if mode == "erase":
            drop = [x for x in held if self.rng.random() < 0.3]
        elif mode == "expire":
            drop = held[: self.rng.randint(1, len(held))]
        else:
            drop = []
        reason = "erased" if mode == "erase" else "expired"
        # single offsets: a range of consecutive offsets would cover other groups' records
        removals = tuple(Removed(x, x, reason, self.clock) for x in drop)
        return RewritePlan(ref, replaced, removals, tiled=False)


def _ranges(offsets: Sequence[int], reason: str, at: float) -> tuple[Removed, ...]:
    """Sorted offsets as ranges of consecutive ones."""
    out: list[Removed] = []
    for x in offsets:
        if out and out[-1].last == x - 1:
            out[-1] = Removed(out[-1].first, x, reason, at)
        else:
            out.append(Removed(x, x, reason, at))
    return tuple(out)


class RewriteSimulation(Simulation):
    """`Simulation` with maintenance sessions (see the module)."""

    maintainers = 0

    def __init__(
        self,
        seed: int,
        mutations: frozenset[str] = frozenset(),
        steps: int = 250,
        interleaved: bool = False,
    ):
        super().__init__(seed, mutations, steps, interleaved)

    def _move(self, tick: int) -> None:
        if self.maintainers < 3 and self.rng.random() < 0.02:
            self._spawn_maintainer()
        else:
            super()._move(tick)

    def _spawn_maintainer(self) -> _Live:
        self.maintainers += 1
        self.runs += 1
        name = f"w{self.runs}"
        self.skew[name] = 0.0
        # (the route's format: a rewrite stamps as the runs do, in the bytes or in the key)
        source: RewritingKafka | GroupedRewritingKafka = (
            GroupedRewritingKafka(
                self.highs,
                self.rng.randint(1, 3),
                stamps=self.stamps,
                merge=self.rng.randint(2, 5),
                mutations=self.mutations,
            )
            if self.interleaved
            else RewritingKafka(self.highs, self.rng.randint(1, 3), stamps=self.stamps)
        )
        grouped = source if isinstance(source, GroupedRewritingKafka) else None
        m = Maintainer(
            PREFIX,
            f"run-{self.runs}",
            [],
            source,
            clock=lambda: self.store.now + self.skew[name],
            grace=self.grace,
            checkpoint_every=self.rng.choice((2, 3, 10)),
            mutations=self.mutations,
            planner=RandomPlanner(
                random.Random(f"{self.seed}.{name}"), self.store.now, grouped, self.mutations
            ),
            rewriter=source,
        )
        self.writers[m.run_id] = m
        live = _Live(name, m, m.session())
        self.live.append(live)
        self.moves.append(f"spawn {name}: maintenance")
        return live

    def _spawn(self, every_partition: bool = False) -> _Live:
        if every_partition:  # faults are over: live maintenance sessions finish first
            for w in self.live:
                while isinstance(w.writer, Maintainer) and not w.done:
                    self._step(w)
                    self.checker.check()
        return super()._spawn(every_partition)


def simulate(
    seed: int,
    mutations: frozenset[str] = frozenset(),
    steps: int = 250,
    interleaved: bool = False,
) -> Result:
    return RewriteSimulation(seed, mutations, steps, interleaved).run()


def first_failure(
    seeds: range,
    mutations: frozenset[str] = frozenset(),
    steps: int = 250,
    interleaved: bool = False,
) -> tuple[Result | None, int]:
    """The first schedule of `seeds` that violates an invariant, and how many ran."""
    ran = 0
    for seed in seeds:
        ran += 1
        result = simulate(seed, mutations, steps, interleaved)
        if result.violation is not None:
            return result, ran
    return None, ran


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--schedules", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0, help="the first seed")
    p.add_argument("--steps", type=int, default=250, help="moves before faults stop")
    p.add_argument(
        "--mutation",
        choices=sorted({*MUTATIONS, *GROUPED_REWRITE_MUTATIONS}),
        action="append",
        default=[],
    )
    p.add_argument(
        "--interleaved", action="store_true", help="a PARTITIONBY route: objects interleave"
    )
    p.add_argument("--replay", action="store_true", help="print the moves of --seed")
    args = p.parse_args(argv)
    mutations = frozenset(args.mutation)
    if args.replay:
        result = simulate(args.seed, mutations, args.steps, args.interleaved)
        print("\n".join(result.moves))
        print(f"seed {args.seed}: {result.violation or 'no violation'}")
        return 1 if result.violation else 0
    started = time.monotonic()
    seeds = range(args.seed, args.seed + args.schedules)
    failure, ran = first_failure(seeds, mutations, args.steps, args.interleaved)
    print(f"{ran} schedules in {time.monotonic() - started:.1f} s")
    if failure is not None:
        print("\n".join(failure.moves[-60:]))
        print(f"seed {failure.seed} violates: {failure.violation}")
        print(
            "replay: python -m kafka_archive.archiver.protocol.rewritesim --replay "
            f"--seed {failure.seed} --steps {args.steps}"
            + (" --interleaved" if args.interleaved else "")
            + "".join(f" --mutation {m}" for m in args.mutation)
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

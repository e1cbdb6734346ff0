"""Deterministic simulation of the commit protocol: writers, faults and a seeded scheduler.

One schedule (`simulate(seed)`): 2–3 runs over a few partitions whose end offsets grow
(records keep arriving), against one `MemStore`; half the runs write some of the partitions
only (statements sharing a target share its log). Each run is a driver and the attempts it
launches, each stepped as an actor of its own. A `random.Random(seed)` picks every move:
which actor sends its next request, the fate of each PUT/DELETE (delivered, response lost,
delayed until a later move lands it), reads without answer, stale listings, crashes (a
driver or an executor dropped between two requests; a crashed driver's attempts go on),
pauses, a driver timing an attempt out (declared dead, another launched) or launching a
speculative copy. Each run's clock is off the store's (up to twice the grace either way; a
paused one stays behind by the pause half the time). After every move `Checker` checks the
invariants against the store itself:

1. a log entry, once created, never changes (the commit point cannot be overwritten);
2. the log folds: every claim above every epoch before it, every commit by the holder of the
   claim on its partitions (a fenced writer never commits), starting at the committed end;
3. a committed object is present with the ETag and checksum it had when its entry named it
   (never deleted or overwritten: vacuum and recovery included);
4. every offset below a partition's committed end is in exactly one committed object (read
   from the objects' bodies);
5. a checkpoint is the fold of the entries up to its seq;
6. an object is deleted or replaced only when its writer is fenced or its attempt was
   declared dead by its run's driver (never a live attempt's, by a sibling or anyone).

Then faults stop, delayed requests land, and every live writer plus a new one run to their end
within a bound (liveness: recovery finishes; a driver times out attempts whose executor is
gone); a last run after the grace (store time) vacuums, and the objects under the prefix
must be exactly the committed ones. The same seed replays the same schedule: a failure
prints the seed and the moves.

`python -m kafka_archive.archiver.protocol.simulation [--schedules N] [--seed S]
[--mutation NAME]` runs many (`make simulate`).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from kafka_archive.archiver.core.errors import S3UnavailableError
from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.invariants import Checker, Violation
from kafka_archive.archiver.protocol.log import PartitionRef, log_prefix
from kafka_archive.archiver.protocol.memstore import Fate, MemStore
from kafka_archive.archiver.protocol.mutations import (
    GROUPED_MUTATIONS,
    MOVING_MUTATIONS,
    MUTATIONS,
)
from kafka_archive.archiver.protocol.simworld import PREFIX, GroupedKafka, Kafka, SimFaults
from kafka_archive.archiver.protocol.steps import (
    List,
    ListUploads,
    Request,
    Steps,
    Wait,
    drive,
    execute,
)
from kafka_archive.archiver.protocol.writer import Attempt, Writer


@dataclass
class _Live:
    """A run's driver (its session), or an attempt it launched (an executor of its own)."""

    name: str
    writer: Writer
    steps: Steps[object]
    attempt: Attempt | None = None
    pending: Request | Wait | None = None
    started: bool = False
    paused_until: int = 0
    done: bool = False

    def waiting(self) -> bool:
        return isinstance(self.pending, Wait) and not self.pending.ready()


@dataclass
class Result:
    seed: int
    violation: str | None
    trace: list[str | tuple[str, Request, object]]
    requests: Counter[str]
    objects: int

    @property
    def moves(self) -> list[str]:
        """The schedule, one line a move: what replays with the same seed."""
        return [
            m if isinstance(m, str) else f"{m[0]} {_describe(m[1])} -> {_describe_reply(m[2])}"
            for m in self.trace
        ]


class Simulation:
    def __init__(
        self,
        seed: int,
        mutations: frozenset[str] = frozenset(),
        steps: int = 250,
        interleaved: bool = False,
        moving: bool = False,
    ):
        self.seed = seed
        self.interleaved = interleaved  # a PARTITIONBY route: objects of two groups interleave
        # Ends that move without objects: retention moves Kafka's low past what was archived
        # (runs pass the gap, --allow-gaps) and runs begin partitions at Kafka's end (--start
        # latest), each run drawing its options.
        self.moving = moving
        self.rng = random.Random(seed)
        self.mutations = mutations
        self.max_steps = steps
        self.faults = SimFaults(self.rng)
        self.store = MemStore(self.faults)
        self.writers: dict[str, Writer] = {}
        self.checker = Checker(
            self.store,
            PREFIX,
            is_dead=lambda run, n: n in self.writers[run].dead,
            never_had=GroupedKafka({}).had if interleaved else None,
            in_group=GroupedKafka({}).in_group if interleaved else None,
        )
        self.senders: dict[int, str] = {}  # id of a request in flight -> who sent it
        n = self.rng.randint(2, 3)
        self.refs = [PartitionRef("r", "t", p) for p in range(self.rng.randint(1, 3))]
        self.highs = {r: self.rng.randint(2, 8) for r in self.refs}
        self.lows = {r: 0 for r in self.refs}
        self.stamps = self.rng.random() < 0.5  # the route's format has a place for a stamp
        self.grace = 60.0
        self.skew: dict[str, float] = {}  # each run's clock minus the store's
        self.cut_off: dict[str, Fate] = {}  # runs whose every request goes unanswered, for good
        self.live: list[_Live] = []
        self.runs = 0
        self.moves: list[str | tuple[str, Request, object]] = [
            f"format {'with' if self.stamps else 'without'} a place for a stamp"
        ]  # formatted when read
        if interleaved:
            self.moves.append("interleaved objects: two groups per partition")
        if moving:
            self.moves.append("moving ends: retention, --start latest, --allow-gaps")
        for _ in range(n):
            self._spawn()

    def _spawn(self, every_partition: bool = False) -> _Live:
        """A new run: during the faults, of some partitions half the time (runs of other
        statements share the target's log); the runs after them, of every partition."""
        self.runs += 1
        name = f"w{self.runs}"
        refs = self.refs
        if not every_partition and len(refs) > 1 and self.rng.random() < 0.5:
            refs = sorted(self.rng.sample(refs, self.rng.randint(1, len(refs) - 1)))
        g = self.grace
        self.skew[name] = self.rng.choice((0.0, 0.0, -g / 2, g / 2, -2 * g, 2 * g))
        size = self.rng.randint(1, 3)
        source = (
            GroupedKafka(self.highs, size, stamps=self.stamps)
            if self.interleaved
            else Kafka(self.highs, size, stamps=self.stamps, lows=self.lows)
        )
        latest = self.moving and self.rng.random() < 0.5
        # Runs after the faults pass every gap (liveness: each partition reaches Kafka's end).
        gaps = self.moving and (every_partition or self.rng.random() < 0.7)
        writer = Writer(
            PREFIX,
            f"run-{self.runs}",
            refs,
            source,
            clock=lambda: self.store.now + self.skew[name],
            batch_objects=self.rng.randint(1, 3),
            grace=self.grace,
            checkpoint_every=self.rng.choice((2, 3, 10)),
            multipart_above=self.rng.choice((1 << 30, 1 << 30, 45)),  # some objects multipart
            part_size=self.rng.choice((20, 40)),
            mutations=self.mutations,
            groups=source if isinstance(source, GroupedKafka) else None,
            start_latest=latest,
            allow_gaps=gaps,
        )
        self.writers[writer.run_id] = writer
        live = _Live(name, writer, writer.session())
        self.live.append(live)
        options = (", --start latest" if latest else "") + (", --allow-gaps" if gaps else "")
        self.moves.append(
            f"spawn {name} of {[r.partition for r in refs]}, clock {self.skew[name]:+g}{options}"
        )
        return live

    def _step(self, w: _Live) -> None:
        try:
            if not w.started:
                w.started = True
                w.pending = next(w.steps)
            req = w.pending
            assert req is not None
            if isinstance(req, Wait):
                reply: object = None  # the driver's attempts are over: it goes on
            else:
                flying = len(self.store.in_flight)
                self.faults.cut = self.cut_off.get(w.name.split(".")[0])
                try:
                    reply = execute(self.store, req)
                finally:
                    self.faults.cut = None
                if len(self.store.in_flight) > flying:
                    self.senders[id(self.store.in_flight[-1])] = w.name
                self.moves.append((w.name, req, reply))
            w.pending = w.steps.send(reply)
        except StopIteration as stop:
            w.done = True
            out = stop.value if w.attempt is None else _outcome(w.attempt)
            self.moves.append(f"{w.name} ends: {out}")
        except S3UnavailableError as e:  # a request of its had no answer, time after time
            if w.name.split(".")[0] not in self.cut_off:
                raise Violation(f"{w.name} gave up under passing faults: {e}") from None
            w.done = True
            self.moves.append(f"{w.name} ends: no answer")
        except core.InvalidEntry as e:
            raise Violation(f"{w.name} read an invalid log: {e}") from None
        except Exception as e:
            raise Violation(f"{w.name} failed: {e!r}") from None
        self._adopt()

    def _adopt(self) -> None:
        """Attempts the live drivers launched start on executors of their own (a crashed
        driver's launches none; its running attempts go on, orphans)."""
        for d in [x for x in self.live if x.attempt is None]:
            while d.writer.launched:
                a = d.writer.launched.pop(0)
                self.live.append(_Live(f"{d.name}.{a.number}", d.writer, a.steps, a))
                self.moves.append(
                    f"{d.name} launches attempt {a.number} of partition {a.task.ref.partition}"
                    f" [{a.task.start}, {a.task.high}), dead {sorted(a.dead)}"
                )

    def _running(self, tick: int = 0) -> list[tuple[_Live, Attempt]]:
        """The attempts live drivers (not paused at `tick`) wait for, executor gone or not."""
        return [
            (d, a)
            for d in self.live
            if d.attempt is None and not d.done and d.paused_until <= tick
            for t in d.writer.tasks
            for a in d.writer._running(t)
        ]

    def _finish(self) -> None:
        """Runs every driver and attempt to its end, no faults (liveness: recovery finishes).
        A driver whose attempts' executors are gone times them out and launches others."""
        bound = 20_000
        while any(not w.done for w in self.live):
            bound -= 1
            if bound == 0:
                raise Violation("liveness: writers did not finish once faults stopped")
            w = next((w for w in self.live if not w.done and not w.waiting()), None)
            if w is None:
                names = {x.name for x in self.live if not x.done}
                for d, a in self._running():
                    if f"{d.name}.{a.number}" not in names:
                        d.writer.declare_dead(a)
                        self.moves.append(f"{d.name} declares attempt {a.number} dead")
                self._adopt()
                continue
            self._step(w)
            self.checker.check()

    def _land(self, i: int, tick: int) -> None:
        d = self.store.deliver(i)
        name = self.senders.pop(id(d), "?")
        sender = next((x for x in self.live if x.name == name), None)
        if sender is None:
            how = "crashed"
        elif sender.attempt is not None and sender.attempt.number in sender.writer.dead:
            how = "dead"
        elif sender.paused_until > tick:
            how = "paused"
        else:
            how = "done" if sender.done else "running"
        self.moves.append(f"lands {d.op} {d.key} of {name} ({how})")

    def _move(self, tick: int) -> None:
        self.store.now += 0.5
        if self.moving and self.rng.random() < 0.04:  # retention deletes Kafka's oldest
            ref = self.rng.choice(self.refs)
            self.lows[ref] = min(self.highs[ref], self.lows[ref] + self.rng.randint(1, 4))
            self.moves.append(f"kafka {ref.partition} low -> {self.lows[ref]}")
            return
        runnable = [
            w for w in self.live if not w.done and w.paused_until <= tick and not w.waiting()
        ]
        r = self.rng.random()
        if r < 0.08 and self.store.in_flight:
            self._land(self.rng.randrange(len(self.store.in_flight)), tick)
        elif r < 0.12:
            ref = self.rng.choice(self.refs)
            self.highs[ref] += self.rng.randint(1, 3)
            self.moves.append(f"kafka {ref.partition} -> {self.highs[ref]}")
        elif r < 0.135 and runnable:
            w = self.rng.choice(runnable)
            self.live.remove(w)
            self.moves.append(f"crash {w.name} before {_point(w.pending)}")
        elif r < 0.16 and runnable:
            w = self.rng.choice(runnable)
            w.paused_until = tick + self.rng.randint(5, 60)
            jump = self.rng.choice((0.0, self.grace / 2, 2 * self.grace))
            self.store.now += jump
            run = w.name.split(".")[0]  # an executor's clock is its driver's here
            if self.rng.random() < 0.5:  # its clock stood still while paused, no NTP step
                self.skew[run] -= jump
            self.moves.append(
                f"pause {w.name} until {w.paused_until}, clock +{jump:g}, "
                f"its clock {self.skew[run]:+g}"
            )
        elif r < 0.17 and sum(not w.done and w.attempt is None for w in self.live) < 3:
            self._spawn()
        elif r < 0.185 and (running := self._running(tick)):
            d, a = self.rng.choice(running)
            if self.rng.random() < 0.5:
                d.writer.declare_dead(a)  # its executor lost or silent past the timeout
                self.moves.append(f"{d.name} declares attempt {a.number} dead")
            else:
                d.writer.speculate(a)
                self.moves.append(f"{d.name} speculates on attempt {a.number}")
            self._adopt()
        elif 0.185 <= r < 0.1865 and not self.cut_off and (drivers := self._drivers()):
            w = self.rng.choice(drivers)  # its endpoint times out, applying or not, for good
            self.cut_off[w.name] = self.rng.choice((Fate.LOSE_RESPONSE, Fate.DROP))
            self.moves.append(f"cut off {w.name}: {self.cut_off[w.name].value} for good")
        elif runnable:
            self._step(self.rng.choice(runnable))

    def _drivers(self) -> list[_Live]:
        return [w for w in self.live if w.attempt is None and not w.done]

    def run(self) -> Result:
        try:
            for tick in range(self.max_steps):
                self._move(tick)
                self.checker.check()
            self.faults.on = False
            self.moves.append("faults stop")
            while self.store.in_flight:
                self._land(0, self.max_steps)
                self.checker.check()
            for w in self.live:
                w.paused_until = 0
            self._spawn(every_partition=True)
            self._finish()
            finished = [
                w.writer for w in self.live if w.attempt is None and w.writer.outcome == "done"
            ]
            if not finished:
                raise Violation("liveness: no writer finished once faults stopped")
            for ref in self.refs:
                high = GroupedKafka(self.highs).high(ref) if self.interleaved else self.highs[ref]
                if self.checker.state.end(ref) != high:
                    raise Violation(f"liveness: {ref} committed to {self.checker.state.end(ref)}")
            self.store.now += self.grace + 1
            self._spawn(every_partition=True)
            self._finish()
            data = {
                k
                for k in self.store.objects
                if k.startswith(PREFIX + "/") and not k.startswith(log_prefix(PREFIX))
            }
            if data != set(self.checker.committed):
                extra = sorted(data - set(self.checker.committed))
                raise Violation(f"after vacuum past the grace, uncommitted objects left: {extra}")
            if self.store.uploads:
                left = sorted(u.key for u in self.store.uploads.values())
                raise Violation(f"after the last run's start, open uploads left: {left}")
            violation = None
        except Violation as v:
            violation = str(v)
        return Result(
            self.seed, violation, self.moves, self.store.requests, len(self.checker.committed)
        )


def _outcome(a: Attempt) -> str:
    if isinstance(a.outcome, tuple):
        return f"{len(a.outcome)} objects"
    return str(a.outcome)


def _point(req: Request | Wait | None) -> str:
    """Where a crash hit: before which kind of request."""
    if req is None:
        return "start"
    if isinstance(req, Wait):
        return "wait"
    name = type(req).__name__.upper()
    key = req.prefix if isinstance(req, List | ListUploads) else req.key
    log = log_prefix(PREFIX)
    if key.startswith(log):
        return f"{name} {'checkpoint' if '/checkpoint/' in key else 'entry'}"
    return f"{name} object"


def _describe(req: Request) -> str:
    name = type(req).__name__.upper()
    key = req.prefix if hasattr(req, "prefix") else getattr(req, "key", "")
    cond = ""
    if getattr(req, "if_none_match", False):
        cond = " If-None-Match"
    elif getattr(req, "if_match", None) is not None:
        cond = f" If-Match {getattr(req, 'if_match', '')}"
    return f"{name} {key}{cond}"


def _describe_reply(reply: object) -> str:
    if isinstance(reply, Exception):
        return type(reply).__name__
    if isinstance(reply, list):
        return f"{len(reply)} keys"
    if isinstance(reply, str):
        return f"ETag {reply}"
    return "ok"


def simulate(
    seed: int,
    mutations: frozenset[str] = frozenset(),
    steps: int = 250,
    interleaved: bool = False,
    moving: bool = False,
) -> Result:
    return Simulation(seed, mutations, steps, interleaved, moving).run()


def first_failure(
    seeds: range,
    mutations: frozenset[str] = frozenset(),
    steps: int = 250,
    interleaved: bool = False,
    moving: bool = False,
) -> tuple[Result | None, int]:
    """The first schedule of `seeds` that violates an invariant, and how many ran."""
    ran = 0
    for seed in seeds:
        ran += 1
        result = simulate(seed, mutations, steps, interleaved, moving)
        if result.violation is not None:
            return result, ran
    return None, ran


def steady_state_requests(partitions: int, batches: int, checkpoint_every: int = 10) -> float:
    """Requests per object of one writer committing `batches` batches of one object per
    partition, no faults (the log already claimed: a follow service's steady state)."""
    store = MemStore()
    refs = [PartitionRef("r", "t", p) for p in range(partitions)]
    highs = dict.fromkeys(refs, 0)
    writer = Writer(
        PREFIX,
        "run-1",
        refs,
        Kafka(highs, 1),
        clock=lambda: store.now,
        batch_objects=1,
        checkpoint_every=checkpoint_every,
    )
    drive(writer.session(), store)
    before = store.requests.copy()
    objects = 0
    for _ in range(batches):
        for r in refs:
            highs[r] += 1
        commits = drive(writer._write_batch(), store)
        drive(writer._commit(commits), store)
        writer._end_batch()
        objects += sum(len(c.objects) for c in commits)
    spent = store.requests - before
    return sum(spent.values()) / objects


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--schedules", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0, help="the first seed")
    p.add_argument("--steps", type=int, default=250, help="moves before faults stop")
    p.add_argument(
        "--mutation",
        choices=sorted({*MUTATIONS, *GROUPED_MUTATIONS, *MOVING_MUTATIONS}),
        action="append",
        default=[],
    )
    p.add_argument(
        "--interleaved", action="store_true", help="a PARTITIONBY route: objects interleave"
    )
    p.add_argument("--moving", action="store_true", help="retention, --start latest, --allow-gaps")
    p.add_argument("--replay", action="store_true", help="print the moves of --seed")
    args = p.parse_args(argv)
    mutations = frozenset(args.mutation)
    if args.replay:
        result = simulate(args.seed, mutations, args.steps, args.interleaved, args.moving)
        print("\n".join(result.moves))
        print(f"seed {args.seed}: {result.violation or 'no violation'}")
        return 1 if result.violation else 0
    started = time.monotonic()
    seeds = range(args.seed, args.seed + args.schedules)
    failure, ran = first_failure(seeds, mutations, args.steps, args.interleaved, args.moving)
    took = time.monotonic() - started
    print(f"{ran} schedules in {took:.1f} s ({ran / took:.0f}/s)")
    if failure is not None:
        print("\n".join(failure.moves[-60:]))
        print(f"seed {failure.seed} violates: {failure.violation}")
        print(
            f"replay: python -m kafka_archive.archiver.protocol.simulation --replay "
            f"--seed {failure.seed} --steps {args.steps}"
            + (" --interleaved" if args.interleaved else "")
            + (" --moving" if args.moving else "")
            + "".join(f" --mutation {m}" for m in args.mutation)
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Rewrites (compact, erase, expire: issue 38) as a step machine over the commit log.

A maintenance session: read the log; plan (a pure `Planner`: which consecutive committed
objects of which partitions, and which of their offsets to drop, by reason); claim those
partitions (a claim entry like a run's: a run and a rewrite of the same partitions never
commit over each other, the later claim fences the earlier); check the plan against the log
as the claim left it (replaced objects no longer named: plan again); read the replaced
objects (checksum as named), have the `Rewriter` (the format engine) cut the new objects,
create each If-None-Match, stamped and with the writer's metadata as a run's objects are;
then one rewrite entry at the next seq (a 412: read what was missed; fenced: stop; the
replaced objects no longer named: plan again; else the next seq). The replaced objects are
left to vacuum, which deletes them once the rewrite's entry is older than the grace: a
reader that read the log before the rewrite still finds them until then.

SIGKILL anywhere: before the entry, the new objects are unnamed (a rerun fences this session
with its claim, then deletes and recreates them at their keys, or vacuum deletes them); after
it, the rewrite is done and a rerun plans on the rewritten log.

New objects' keys: a rewrite of objects whose highest generation is g names its objects
generation g + 1 (`<first offset>.g<g+1>` before the extension; a run's objects are
generation 0, no suffix). Every object that holds an offset was made from the one that held
it before, so generations grow along each offset's history, and two objects that start at
the same offset (and so hold it) differ in generation: a new key was never named before. A
reader that seeks by first offset reads the number before the first dot of the name; where
a listing shows two objects of one first offset (until vacuum), the log names one of them.

`MUTATIONS` reintroduce one rewrite bug at a time for the simulation; production passes none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    ObjectRef,
    PartitionRef,
    PartitionRewrite,
    Removed,
)
from kafka_archive.archiver.protocol.steps import Steps, get_or_none, read_log
from kafka_archive.archiver.protocol.store import Stored
from kafka_archive.archiver.protocol.writer import (
    Attempt,
    Source,
    Task,
    Writer,
    _Fenced,
    _InTheWay,
    _Replan,
    checksum,
)

MUTATIONS: Mapping[str, str] = {
    "rewrite_stale_view": "a rewrite does not check that the objects it replaces are still the "
    "ones the log names (after its claim, and after a 412 on its entry)",
    "rewrite_eager_delete": "a rewrite deletes the objects it replaced right after its entry "
    "(If-Match), not leaving them to vacuum after the grace",
    "rewrite_fenced": "a rewrite does not check that it still holds the claim (a fenced "
    "maintenance session creates its entry)",
    "rewrite_unstamped": "a rewrite's new objects carry no stamp (neither in their bytes nor "
    "in their key): every attempt of a group writes the same bytes at the same key, told "
    "apart by their metadata alone",
}


@dataclass(frozen=True)
class RewritePlan:
    """What to rewrite in one partition: `replaced`, consecutive committed objects as the log
    names them, and `drop`, the offsets to remove (by reason, when), held by them. `tiled`
    false: the partition's objects interleave (PARTITIONBY), and `replaced` are consecutive
    objects of one group (an untiled rewrite, `PartitionRewrite.tiled`)."""

    ref: PartitionRef
    replaced: tuple[ObjectRef, ...]
    drop: tuple[Removed, ...] = ()
    tiled: bool = True


Planner = Callable[[core.LogState], Sequence[RewritePlan]]


@dataclass(frozen=True)
class NewObject:
    """An object the rewriter cut: its key, the span [first, last] and records it holds."""

    key: str
    first: int
    last: int
    records: int
    body: bytes


class Rewriter(Source, Protocol):
    """The format engine: new objects from the replaced ones' bodies (and `stamp`, as a run's
    writer stamps its objects)."""

    def rewrite(
        self,
        ref: PartitionRef,
        generation: int,
        replaced: Sequence[tuple[ObjectRef, bytes]],
        drop: Sequence[Removed],
    ) -> list[NewObject]:
        """The objects holding the records of `replaced` except the offsets in `drop`, keyed
        with `generation` (`generation_key`), in offset order."""
        ...


def generation(key: str) -> int:
    """The generation a key names: N for `<first>.gN.<ext>`, 0 for a run's `<first>.<ext>`."""
    parts = key.rpartition("/")[2].split(".")
    if len(parts) >= 2 and parts[1][:1] == "g" and parts[1][1:].isdigit():
        return int(parts[1][1:])
    return 0


def generation_key(key: str, gen: int) -> str:
    """`key` (a run's object, or any generation's) renamed to generation `gen`."""
    folder, _, name = key.rpartition("/")
    parts = name.split(".")
    if generation(key):
        parts = [parts[0], *parts[2:]]
    parts.insert(1, f"g{gen}")
    return f"{folder}/{'.'.join(parts)}" if folder else ".".join(parts)


def still_named(state: core.LogState, plan: RewritePlan) -> bool:
    st = state.partitions.get(plan.ref)
    if st is None:
        return False
    if not plan.tiled:
        return set(plan.replaced) <= set(st.objects)
    return core.replaced_at(st, PartitionRewrite(plan.ref, plan.replaced, ())) is not None


@dataclass(kw_only=True)
class Maintainer(Writer):
    """A maintenance session (`session`): one rewrite entry over the partitions the planner
    picks. The writer's machinery does the claim, the entries and the object creates."""

    planner: Planner
    rewriter: Rewriter
    replans: int = 8
    etags: dict[str, str] = field(default_factory=dict)  # replaced key -> ETag read

    def _mut(self, name: str) -> bool:
        if name == "identical_bytes" and "rewrite_unstamped" in self.mutations:
            return True  # (the writer's mutation, for the rewrite's objects alone)
        return name in self.mutations

    def session(self) -> Steps[str]:
        self.state = yield from read_log(self.prefix)
        plans = list(self.planner(self.state))
        if not plans:
            self.outcome = "nothing to do"
            return self.outcome
        self.refs = sorted({p.ref for p in plans})
        yield from self._claim()
        assert self.me is not None
        for _ in range(self.replans):
            try:
                if core.is_fenced(self.state, self.me, self.refs) and not self._mut(
                    "rewrite_fenced"
                ):
                    raise _Fenced
                if not self._mut("rewrite_stale_view") and not all(
                    still_named(self.state, p) for p in plans
                ):
                    raise _Replan
                rewrites = yield from self._write(plans)
                yield from self._commit_rewrite(rewrites)
                self.outcome = "rewritten"
                break
            except _Replan:
                self.dead.update(range(1, self._attempts + 1))
                self.state = yield from read_log(self.prefix, self.state)
                plans = [p for p in self.planner(self.state) if p.ref in self.refs]
                if not plans:
                    self.outcome = "nothing to do"
                    break
            except (_Fenced, _InTheWay) as e:
                self.dead.update(range(1, self._attempts + 1))
                self.outcome = "fenced" if isinstance(e, _Fenced) else "in the way"
                return self.outcome
        else:
            self.outcome = "gave up"  # the plan went stale every time: a later run retries
        self.dead.update(range(1, self._attempts + 1))
        yield from self.vacuum()
        return self.outcome or "done"

    def _write(self, plans: Sequence[RewritePlan]) -> Steps[list[PartitionRewrite]]:
        """The new objects of each plan, created; the rewrites naming them."""
        out = []
        for plan in plans:
            parts = []
            for o in plan.replaced:
                got: Stored | None = yield from get_or_none(o.key)
                if got is None:
                    raise _Replan  # gone: a later rewrite replaced it and vacuum took it
                if checksum(got.body) != o.checksum:
                    raise RuntimeError(f"{o.key} does not hold the bytes the log names")
                self.etags[o.key] = got.etag
                parts.append((o, got.body))
            gen = 1 + max(generation(o.key) for o in plan.replaced)
            news = self.rewriter.rewrite(plan.ref, gen, parts, plan.drop)
            lo = min(o.first for o in plan.replaced)
            hi = max(o.last for o in plan.replaced)
            self._attempts += 1
            a = Attempt(
                self._attempts,
                Task(plan.ref, lo, hi + 1, len(news)),
                frozenset(self.dead),
                self.state,
            )
            objects = []
            for n in news:
                made = yield from self._write_object(a, n.key, n.first, n.last, n.body)
                objects.append(replace(made, records=n.records))
            out.append(
                PartitionRewrite(
                    plan.ref, plan.replaced, tuple(objects), plan.drop, tiled=plan.tiled
                )
            )
        return out

    def _commit_rewrite(self, rewrites: Sequence[PartitionRewrite]) -> Steps[None]:
        assert self.me is not None
        while True:
            verdict = core.rewrite_verdict(self.state, self.me, rewrites)
            if verdict is core.Verdict.FENCED and self._mut("rewrite_fenced"):
                named = self.state.named()
                stale = any(
                    core.rewrite_problem(self.state.partitions[rw.ref], rw, named)
                    for rw in rewrites
                )
                verdict = core.Verdict.STALE if stale else core.Verdict.OK
            if verdict is core.Verdict.STALE and self._mut("rewrite_stale_view"):
                verdict = core.Verdict.OK
            if verdict is core.Verdict.FENCED:
                raise _Fenced
            if verdict is core.Verdict.STALE:
                raise _Replan
            entry = core.rewrite_entry(self.state, self.me, rewrites)
            if (yield from self._create_entry(entry, [])):
                self.state = core.fold(self.state, entry)
                if entry.seq % self.checkpoint_every == 0:
                    yield from self._checkpoint()
                if self._mut("rewrite_eager_delete"):
                    for rw in rewrites:
                        for o in rw.replaced:
                            yield from self._delete(o.key, self.etags.get(o.key))
                return
            self.state = yield from read_log(self.prefix, self.state)


def joined(removed: Sequence[Removed]) -> tuple[Removed, ...]:
    """Removed ranges in order, those that touch joined (one session's: one reason and
    time), so that expiring many whole objects records one range, not one per object."""
    out: list[Removed] = []
    for r in removed:
        if out and out[-1].last + 1 == r.first and (out[-1].reason, out[-1].at) == (r.reason, r.at):
            out[-1] = Removed(out[-1].first, r.last, r.reason, r.at)
        else:
            out.append(r)
    return tuple(out)

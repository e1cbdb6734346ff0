"""Each (route, partition) with its S3 state and Kafka's offsets: one batched lookup of the
offsets of all partitions, one GET of each state not already known, on a bounded pool.
:func:`learn_states` and :func:`proven_states`: which states a listing of each target's
``.kafka-archive/`` and its state index prove without a GET (:mod:`.state.index`), for a
session under its leases and for the read-only commands."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.core.parallel import in_parallel
from kafka_archive.archiver.kafka.admin import Watermarks
from kafka_archive.archiver.plan.preflight import Preflight
from kafka_archive.archiver.state import checkpoint, index, legacy
from kafka_archive.archiver.state.paths import state_root
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan, Route, Target


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One (route, partition): its loaded S3 state and, with Kafka, its offsets."""

    route_index: int
    route: Route
    tp: TopicPartition
    loaded: checkpoint.LoadedState
    marks: Watermarks | None

    @property
    def state(self) -> checkpoint.PartitionState | None:
        return self.loaded.state

    @property
    def committed(self) -> int | None:
        """The next offset to archive as committed, None when the job has no state here."""
        return self.loaded.state.next_offset if self.loaded.state is not None else None


Known = dict[tuple[int, TopicPartition], checkpoint.LoadedState]
"""States by (route index, partition) known to be current: not read again."""


def partition_states(
    pre: Preflight,
    also: Mapping[int, Iterable[TopicPartition]] | None = None,
    *,
    partitions: Mapping[str, Sequence[int]] | None = None,
    tables: Mapping[int, Mapping[TopicPartition, int]] | None = None,
    legacy: bool = True,
    known: Mapping[tuple[int, TopicPartition], checkpoint.LoadedState] | None = None,
    listed: bool = False,
    logs: Mapping[Target, Mapping[TopicPartition, checkpoint.LoadedState]] | None = None,
) -> list[PartitionView]:
    """Each route's partitions in order: ``partitions`` by topic (a session's, found once),
    else Kafka's (with a preflight that reached Kafka), and those ``also`` names by route
    index (e.g. what the archive holds). Each with Kafka's offsets (one batched lookup for
    all, None without Kafka) and its state: one GET each, on a bounded pool of threads.

    An Iceberg route's state is its table's latest snapshot, from ``tables`` by route index
    (:func:`.iceberg.offsets_by_route`), with no request. With ``legacy`` (read-only
    commands) a partition without state falls back to the state its job kept before routes
    owned it; without (a run, which adopted that state under its lease), the route's state
    is loaded with the ETag a commit must match.

    ``known``: states by (route index, partition) that the caller knows to be current (a
    session's, :class:`.session.Session`); they are not read again. ``listed`` (the
    read-only commands): one listing of each target's ``.kafka-archive/`` and its state
    index prove what they can (:func:`listed_states`); only the rest is read.

    ``logs``: the states of targets that keep a commit log, read from it
    (:func:`.read.committed.logged_states`); a partition the log does not commit has no
    state there, and no state object of such a target is read."""
    plan, admin = pre.plan, pre.admin
    if partitions is None:
        topics = tuple(sorted({r.topic for r in plan.routes}))
        partitions = admin.partitions(topics) if admin else {}
    wanted = wanted_partitions(plan, partitions, also)
    offsets = admin.offsets(tp for _, _, tp in wanted) if admin else {}
    logs = logs or {}
    logged: Known = {
        (index, tp): logs[route.target].get(tp, checkpoint.LoadedState(None, None))
        for index, route, tp in wanted
        if route.iceberg is None and route.target in logs
    }
    unlogged = [w for w in wanted if (w[0], w[2]) not in logged]
    known = {
        **(listed_states(pre, unlogged) if listed else {}),
        **logged,
        **(known or {}),
    }
    read = in_parallel(
        [
            functools.partial(_state, pre, route, tp, (tables or {}).get(index), legacy)
            for index, route, tp in wanted
            if (index, tp) not in known
        ]
    )
    unread = iter(read)
    states = [
        known[(index, tp)] if (index, tp) in known else next(unread) for index, _, tp in wanted
    ]
    return [
        PartitionView(index, route, tp, loaded, offsets.get(tp))
        for (index, route, tp), loaded in zip(wanted, states, strict=True)
    ]


Wanted = list[tuple[int, Route, TopicPartition]]


def wanted_partitions(
    plan: Plan,
    partitions: Mapping[str, Sequence[int]],
    also: Mapping[int, Iterable[TopicPartition]] | None = None,
) -> Wanted:
    """(route index, route, partition) of each route's topic's ``partitions`` and of those
    ``also`` names by route index, in order."""
    wanted: Wanted = []
    for number, route in enumerate(plan.routes):
        tps = set((also or {}).get(number, ()))
        tps |= {TopicPartition(route.topic, p) for p in partitions.get(route.topic, ())}
        wanted += [(number, route, tp) for tp in sorted(tps)]
    return wanted


def learn_states(
    store: S3Store, etags: Mapping[Target, Mapping[TopicPartition, str]]
) -> dict[Target, index.Proof]:
    """What each target's listing (``etags``: each state's ETag) and its state index (read
    here, one GET a target, in parallel) prove."""
    targets = sorted(etags, key=lambda t: (t.bucket, t.prefix))
    entries = in_parallel([functools.partial(index.read, store, t) for t in targets])
    return {t: index.Proof(etags[t], found) for t, found in zip(targets, entries, strict=True)}


def proven_states(proofs: Mapping[Target, index.Proof], wanted: Wanted) -> Known:
    """Of ``wanted``, the states of routes with state objects that ``proofs`` prove."""
    known: Known = {}
    for number, route, tp in wanted:
        proof = proofs.get(route.target)
        loaded = proof.state(tp) if proof is not None and route.iceberg is None else None
        if loaded is not None:
            known[(number, tp)] = loaded
    return known


def listed_states(pre: Preflight, wanted: Wanted) -> Known:
    """For the read-only commands (``status``, ``verify``), which write nothing: one listing
    of each target's ``.kafka-archive/`` and its state index, as a session learns them
    under its leases (:meth:`.session.Session.know_states`). A partition without a route
    state whose job kept one in the layout before routes owned it is left to be read."""
    targets = sorted(
        {r.target for _, r, _ in wanted if r.iceberg is None}, key=lambda t: (t.bucket, t.prefix)
    )
    listings = in_parallel([functools.partial(_listing, pre.store, target) for target in targets])
    etags: dict[Target, dict[TopicPartition, str]] = {}
    older: set[tuple[Target, TopicPartition]] = set()
    for target, listing in zip(targets, listings, strict=True):
        etags[target] = index.state_etags(target, listing)
        layout = legacy.scan(pre.store, target, [key for key, _ in listing])
        older |= {(target, tp) for tp, jobs_ in layout.states.items() if pre.job in jobs_}
    known = proven_states(learn_states(pre.store, etags), wanted)
    routes = pre.plan.routes
    return {
        (number, tp): loaded
        for (number, tp), loaded in known.items()
        if loaded.state is not None or (routes[number].target, tp) not in older
    }


def _listing(store: S3Store, target: Target) -> list[tuple[str, str]]:
    return list(store.list_etags(target.bucket, f"{state_root(target)}/"))


def _state(
    pre: Preflight,
    route: Route,
    tp: TopicPartition,
    table: Mapping[TopicPartition, int] | None,
    legacy: bool,
) -> checkpoint.LoadedState:
    if route.iceberg is not None:  # no state objects: the table's snapshot
        next_offset = (table or {}).get(tp)
        if next_offset is None:
            return checkpoint.LoadedState(None, None)
        return checkpoint.LoadedState(checkpoint.PartitionState(next_offset, "", ""), None)
    if legacy:
        return checkpoint.LoadedState(checkpoint.read(pre.store, route.target, pre.job, tp), None)
    return checkpoint.load(pre.store, route.target, pre.job, tp)

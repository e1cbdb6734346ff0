"""``adopt``: take a foreign archive over, so that the next ``run`` continues where the
sink stopped, without a gap and without writing into the sink's objects.

It reads the archive's offsets (every object, decoded: names alone do not give the ends of
every layout's objects), checks them against the connector's consumer group and Kafka's
offsets, reports holes and duplicates, and writes each partition's state of each route of
the plan that archives one of the archive's topics (``next_offset``: one past the archive's
last offset), under the route's lease as ``run`` takes it, create-only: a route with state
already is refused. The topic's Kafka id is recorded as a run's first commit records it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass

from kafka_archive.archiver.commands.foreign import ForeignSpec, open_archive
from kafka_archive.archiver.commands.foreign_verify import scan
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core import errors
from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.kafka.admin import KafkaAdmin, Watermarks
from kafka_archive.archiver.plan.naming import new_run_id
from kafka_archive.archiver.plan.preflight import preflight
from kafka_archive.archiver.read.foreign.archive import ForeignArchive, grouped
from kafka_archive.archiver.read.foreign.model import ForeignObject
from kafka_archive.archiver.state import checkpoint, identity
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.kcql.plan import Plan, Target


@dataclass(frozen=True, slots=True)
class AdoptedPartition:
    tp: TopicPartition
    first_offset: int
    next_offset: int  # what the state says: the archive's last offset + 1
    objects: int
    records: int
    holes: tuple[tuple[int, int], ...]  # offsets in no object, between the first and last
    duplicates: tuple[int, ...]  # offsets archived more than once (the first few)
    duplicate_count: int
    low: int
    high: int
    group_offset: int | None  # the connector's consumer group's, when --group was given
    notes: tuple[str, ...]
    written: bool = False

    @property
    def gaps(self) -> tuple[tuple[int, int], ...]:
        """Offsets Kafka had that neither the archive nor the next run will hold."""
        out = list(self.holes)
        if self.next_offset < self.low:
            out.append((self.next_offset, self.low - 1))
        return tuple(out)


@dataclass(frozen=True, slots=True)
class AdoptResult:
    """What ``adopt`` found and wrote; ``refused``: why it wrote nothing (holes in the
    archive), raised by the caller once the survey is shown."""

    location: str
    layout: str
    targets: tuple[str, ...]
    partitions: tuple[AdoptedPartition, ...]
    refused: errors.RecordsLostError | None = None


def _survey(
    settings: Settings, spec: ForeignSpec, topics: set[str], group: str | None, admin: KafkaAdmin
) -> tuple[str, list[AdoptedPartition]]:
    archive = open_archive(settings, spec)
    found = archive.objects(topics)
    if not found:
        raise errors.NotInArchiveError(
            f"no {archive.layout.name} objects of {', '.join(sorted(topics))} under "
            f"{spec.location}",
            hint="Check --from, --layout and the KCQL's topics",
        )
    marks = admin.offsets(found)
    indexes = lenses_indexes(archive) if archive.layout.name == "lenses" else {}
    out = []
    for tp, objects in found.items():
        if grouped(objects, archive.kept(objects[0])):
            out.append(_grouped(archive.layout.name, tp, objects, marks[tp], group, admin))
        else:
            out.append(
                _adopt_partition(archive, tp, objects, marks[tp], group, admin, indexes.get(tp))
            )
    return archive.layout.name, out


def _adopt_partition(
    archive: ForeignArchive,
    tp: TopicPartition,
    objects: list[ForeignObject],
    mark: Watermarks,
    group: str | None,
    admin: KafkaAdmin,
    indexed: int | None,
) -> AdoptedPartition:
    """A partition whose records have offsets: its first and end offset, holes and
    duplicates, checked against Kafka's end, the sink's index and the connector's group."""
    by_offset, damaged, records = scan(archive, objects)
    if damaged:
        bad = damaged[0]
        raise errors.DamagedObjectError(
            f"{bad.key}: {bad.problem}",
            tp=tp,
            hint="Run kafka-archive verify --layout ... and repair or remove it first",
        )
    offsets = sorted(by_offset)
    first, last = offsets[0], offsets[-1]
    holes: list[tuple[int, int]] = []
    for before, after in itertools.pairwise(offsets):
        if after > before + 1:
            holes.append((before + 1, after - 1))
    dups = [o for o, placed in by_offset.items() if len(placed) > 1]
    notes = []
    group_offset = admin.group_offset(tp, group) if group else None
    end = last + 1
    if end > mark.high:
        raise errors.TopicRecreatedError(
            f"{tp}: the archive holds offsets up to {last}, beyond Kafka's end "
            f"({mark.high}): the topic was re-created since the sink archived it",
            tp=tp,
            hint="Adopt into a new topic's route only what belongs to it; this archive "
            "stays readable with cat, verify and restore",
        )
    if indexed is not None and indexed > last:
        holes.append((end, indexed))
        notes.append(
            f"the sink's index ({lenses_index}) says it committed offset {indexed}, past "
            f"the archive's last {last}: offsets {end}..{indexed} are in no object"
        )
    elif indexed is not None:
        notes.append(f"the sink's index ({lenses_index}) says it committed offset {indexed}")
    if group_offset is not None and group_offset > end:
        holes.append((end, group_offset - 1))
        notes.append(
            f"the group {group} committed {group_offset}, past the archive's end {end}: "
            f"offsets {end}..{group_offset - 1} were acknowledged but are in no object"
        )
    elif group_offset is not None and group_offset < end:
        notes.append(
            f"the group {group} committed {group_offset}, before the archive's end {end}: "
            "the sink had written objects it had not committed (the next run starts at "
            f"{end}, so nothing is written twice)"
        )
    return AdoptedPartition(
        tp,
        first,
        end,
        len(objects),
        records,
        tuple(holes),
        tuple(sorted(dups)[:10]),
        len(dups),
        mark.low,
        mark.high,
        group_offset,
        tuple(notes),
    )


lenses_index = ".indexes/<connector>/.locks/<topic>/<partition>.lock"


def lenses_indexes(archive: ForeignArchive) -> dict[TopicPartition, int]:
    """The offsets Lenses' sink committed, from its index files (``IndexManagerV2``:
    ``{"owner", "committedOffset", "pendingState"}`` at :data:`lenses_index`): the last
    offset it wrote of each partition."""
    found: dict[TopicPartition, int] = {}
    head = f"{archive.target.head}.indexes/"
    for key, _ in archive.store.list_objects(archive.target.bucket, head):
        parts = key[len(head) :].split("/")
        if len(parts) != 4 or parts[1] != ".locks" or not parts[3].endswith(".lock"):
            continue
        number = parts[3].removesuffix(".lock")
        try:
            doc = json.loads(archive.store.get_bytes(archive.target.bucket, key) or b"{}")
        except ValueError:
            continue  # not the index the sink writes: no offset from it
        offset = doc.get("committedOffset") if isinstance(doc, dict) else None
        if number.isdigit() and isinstance(offset, int):
            tp = TopicPartition(parts[2], int(number))
            found[tp] = max(found.get(tp, offset), offset)
    return found


def _grouped(
    layout: str,
    tp: TopicPartition,
    objects: list[ForeignObject],
    mark: Watermarks,
    group: str | None,
    admin: KafkaAdmin,
) -> AdoptedPartition:
    """A partition spread over partitioner folders in a format without offsets: where its
    archive ends is not in the objects (only their first offsets are), so the connector's
    consumer group says it, checked to lie past the last object's start."""
    last_start = max(o.first_offset for o in objects)
    if group is None:
        raise errors.ConfigError(
            f"{tp}: the {layout} archive spreads it over partitioner folders and keeps no "
            "offsets, so its end is known only to the connector's consumer group",
            hint="Pass --group connect-<connector name>",
        )
    committed = admin.group_offset(tp, group)
    if committed is None or committed <= last_start:
        raise errors.ConfigError(
            f"{tp}: the group {group} committed {committed}, not past the archive's last "
            f"object (which starts at {last_start}): it is not the connector that wrote it",
            hint="Pass the consumer group of the connector that wrote the archive",
        )
    if committed > mark.high:
        raise errors.TopicRecreatedError(
            f"{tp}: the group {group} committed {committed}, beyond Kafka's end ({mark.high})",
            tp=tp,
        )
    note = (
        f"spread over {len({o.group for o in objects})} partitioner folders without offsets: "
        f"the archive's end is the group's committed offset {committed}; holes between "
        "objects are not visible here (run verify --layout)"
    )
    return AdoptedPartition(
        tp,
        objects[0].first_offset,
        committed,
        len(objects),
        0,
        (),
        (),
        0,
        mark.low,
        mark.high,
        committed,
        (note,),
    )


def adopt(
    settings: Settings,
    plan: Plan,
    spec: ForeignSpec,
    *,
    group: str | None = None,
    allow_gaps: bool = False,
) -> AdoptResult:
    """Take the foreign archive of ``spec`` over for ``plan``'s routes (see the module doc).

    Holes in the archive, or records the group committed that are in no object, leave
    nothing written: the result's ``refused`` says why (``allow_gaps`` writes the states
    all the same).

    Raises:
        ConfigError: a route already has state, or archives none of the archive's topics.
    """
    with preflight(settings, plan, kafka=True) as pre:
        topics = {r.topic for r in pre.plan.routes}
        name, partitions = _survey(settings, spec, topics, group, pre.kafka)
        gaps = [(p.tp, g) for p in partitions for g in p.gaps]
        if gaps and not allow_gaps:
            tp, (a, b) = gaps[0]
            refused = errors.RecordsLostError(
                f"{tp}: offsets {a}..{b} are in no object of the archive "
                f"({len(gaps)} gap(s) in all): adopting it would keep the hole",
                tp=tp,
                hint="Restore or re-archive those records first, or pass --allow-gaps "
                "to adopt the archive with its holes",
            )
            return AdoptResult(spec.location, name, (), tuple(partitions), refused)
        routes = [r for r in pre.plan.routes if any(p.tp.topic == r.topic for p in partitions)]
        if not routes:
            raise errors.ConfigError(f"no KCQL statement archives a topic of {spec.location}")
        ids = pre.kafka.topic_ids({r.topic for r in routes})
        run_id = new_run_id()
        written: set[TopicPartition] = set()
        targets = sorted({r.target for r in routes}, key=lambda t: (t.bucket, t.prefix))
        for target in targets:
            with _lease(pre.store, target, pre.job, run_id, settings.lock_ttl_seconds) as lock:
                mine = {r.topic for r in routes if r.target == target}
                identity.check(pre.store, [(target, t) for t in mine], ids, record=True)
                for p in partitions:
                    if p.tp.topic in mine:
                        _write_state(pre.store, target, pre.job, p, run_id, lock)
                        written.add(p.tp)
    return AdoptResult(
        spec.location,
        name,
        tuple(str(t) for t in targets),
        tuple(dataclasses.replace(p, written=p.tp in written) for p in partitions),
    )


@contextlib.contextmanager
def _lease(store: S3Store, target: Target, job: str, run_id: str, ttl: int) -> Iterator[JobLock]:
    lock = JobLock(store, target, job, run_id, ttl)
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()


def _write_state(
    store: S3Store, target: Target, job: str, p: AdoptedPartition, run_id: str, lock: JobLock
) -> None:
    lock.check()
    loaded = checkpoint.load(store, target, job, p.tp)
    if loaded.state is not None:
        if loaded.state.next_offset == p.next_offset:
            return  # adopted already (a repeated adopt)
        raise errors.ConfigError(
            f"{p.tp}: s3://{target.bucket}/{target.head} already archives it (its state is at "
            f"offset {loaded.state.next_offset:,}): adopt takes an archive over into a route "
            "without state",
            hint="Adopt into another INSERT INTO target (a new prefix), or leave the route "
            "as it is",
        )
    state = checkpoint.PartitionState(
        next_offset=p.next_offset,
        run_id=run_id,
        committed_at=checkpoint.now_iso(),
        epoch=lock.epoch,
    )
    checkpoint.commit(store, target, job, p.tp, state, expected_etag=None)


def render(result: AdoptResult) -> str:
    lines = [f"adopt {result.location} ({result.layout} layout)"]
    for p in result.partitions:
        group = f", group at {p.group_offset}" if p.group_offset is not None else ""
        lines.append(
            f"  {p.tp}: {p.objects} object(s), {p.records} record(s), offsets "
            f"{p.first_offset}..{p.next_offset - 1}; Kafka {p.low}..{p.high - 1}{group}"
            + (f"; state written: next run starts at {p.next_offset}" if p.written else "")
        )
        for a, b in p.holes:
            lines.append(f"    GAP offsets {a}..{b}: in no object")
        if p.next_offset < p.low:
            lines.append(
                f"    GAP offsets {p.next_offset}..{p.low - 1}: deleted by Kafka (retention) "
                "before they were archived; the next run reports it (exit 16, or --allow-gaps)"
            )
        if p.duplicate_count:
            shown = ", ".join(map(str, p.duplicates))
            lines.append(
                f"    DUPLICATES {p.duplicate_count} offset(s) archived more than once "
                f"(e.g. {shown}): the sink's rotation was not deterministic"
            )
        for note in p.notes:
            lines.append(f"    note: {note}")
    if result.targets:
        lines.append(f"the next run continues into {', '.join(result.targets)}")
    return "\n".join(lines)

"""The checks of a rewrite entry (compact, erase, expire: issue 38), pure: whether a
`PartitionRewrite` can apply to a partition as the log left it (`rewrite_problem`: tiled, its
new objects tiling the replaced span; untiled, one PARTITIONBY group's interleaved objects,
counted), and the partition's objects after an untiled one. `core` folds with them."""

from __future__ import annotations

from collections.abc import Container, Sequence

from kafka_archive.archiver.protocol.log import (
    ObjectRef,
    PartitionRewrite,
    PartitionState,
    Removed,
)


def untiled_objects(objects: Sequence[ObjectRef], rw: PartitionRewrite) -> tuple[ObjectRef, ...]:
    """The partition's objects without the replaced, with the new ones, in first-offset order
    (readers merge a partition's groups by offset; a commit lists its groups' objects by
    group, so the list before may be in another order)."""
    gone = set(rw.replaced)
    return tuple(sorted((*(o for o in objects if o not in gone), *rw.objects), key=_first))


def _first(o: ObjectRef) -> int:
    return o.first


def replaced_at(st: PartitionState, rw: PartitionRewrite) -> int | None:
    """Where `rw.replaced` stands in the partition's objects, exactly as named (None: not)."""
    n = len(rw.replaced)
    for i, o in enumerate(st.objects):
        if o == rw.replaced[0]:
            return i if st.objects[i : i + n] == rw.replaced else None
    return None


def removed_count(removed: Sequence[Removed], first: int, last: int) -> int:
    return sum(max(0, min(r.last, last) - max(r.first, first) + 1) for r in removed)


def rewrite_problem(
    st: PartitionState, rw: PartitionRewrite, named: Container[str] = ()
) -> str | None:
    """Why `rw` cannot apply to a partition in state `st` (None: it can). `named`: every key
    the log names (a new object's key must be none of them).

    The replaced objects must be consecutive committed objects exactly as the log names
    them (key, offsets, checksum: a rewrite planned on a stale view is refused). Its span
    [lo, hi] = [replaced[0].first, replaced[-1].last] is then held by the new objects
    except the offsets removed before and those `rw.removed` removes now: new objects in
    order inside the span, each starting and ending at an offset it holds, `records` the
    offsets of its span not removed; what lies between them removed; the removals inside
    the span, sorted, disjoint, of a known reason, none removed before. The committed end
    does not move (the span is below it).

    An untiled rewrite (`rw.tiled` false: one group's objects of a partition whose objects
    interleave) is checked by `_untiled_rewrite_problem`."""
    if not rw.replaced:
        return "a rewrite that replaces nothing"
    if not rw.tiled:
        return _untiled_rewrite_problem(st, rw, named)
    if replaced_at(st, rw) is None:
        return "the replaced objects are not the committed ones (a stale view)"
    lo, hi = rw.replaced[0].first, rw.replaced[-1].last
    problem = _removals_problem(st, rw.removed, lo, hi)
    if problem:
        return problem
    removed = tuple(st.removed) + tuple(rw.removed)
    at = lo
    for o in rw.objects:
        if o.key in named:
            return f"new object {o.key} has the key of a committed object"
        if o.first < at or o.last < o.first or o.last > hi:
            return f"new object {o.key} holds [{o.first}, {o.last}], outside [{at}, {hi}]"
        gap = o.first - at
        if gap and removed_count(removed, at, o.first - 1) != gap:
            return f"offsets [{at}, {o.first - 1}] in no new object and not removed"
        if removed_count(removed, o.first, o.first) or removed_count(removed, o.last, o.last):
            return f"new object {o.key} starts or ends at a removed offset"
        if o.records != o.last - o.first + 1 - removed_count(removed, o.first, o.last):
            return f"new object {o.key} counts {o.records} records, its span holds others"
        at = o.last + 1
    if at <= hi and removed_count(removed, at, hi) != hi - at + 1:
        return f"offsets [{at}, {hi}] in no new object and not removed"
    return None


def _removals_problem(
    st: PartitionState, removed: Sequence[Removed], lo: int, hi: int
) -> str | None:
    """Removals inside [lo, hi], sorted, disjoint, of a known reason, none removed before."""
    at = lo
    for r in sorted(removed):
        if r.first < at or r.last < r.first or r.last > hi:
            return f"removed [{r.first}, {r.last}] outside [{at}, {hi}] or overlapping"
        if r.reason not in ("erased", "expired"):
            return f"removed [{r.first}, {r.last}] for an unknown reason {r.reason!r}"
        if removed_count(st.removed, r.first, r.last):
            return f"removed [{r.first}, {r.last}] holds offsets removed before"
        at = r.last + 1
    return None


def _untiled_rewrite_problem(
    st: PartitionState, rw: PartitionRewrite, named: Container[str]
) -> str | None:
    """An untiled rewrite: named objects of one group (which group a key is in, the log does
    not say: the writer's planner keeps to one, the simulation proves it) replaced exactly as
    named (key, offsets, checksum), each new object inside [min first, max last] of the
    replaced, with a new key and no more records than its span's offsets, and the new
    objects' records the replaced ones' less those removed now (which offsets Kafka had is
    not in the log: coverage is proven from the bodies, by the simulation)."""
    keys = [o.key for o in rw.replaced]
    if len(set(keys)) != len(keys):
        return "a rewrite that names a replaced object twice"
    committed = set(st.objects)
    if any(o not in committed for o in rw.replaced):
        return "the replaced objects are not the committed ones (a stale view)"
    if any(o.records <= 0 for o in rw.replaced):
        return "a replaced object counts no records (imported: its count is unknown)"
    lo, hi = min(o.first for o in rw.replaced), max(o.last for o in rw.replaced)
    problem = _removals_problem(st, rw.removed, lo, hi)
    if problem:
        return problem
    removed = tuple(st.removed) + tuple(rw.removed)
    for o in rw.objects:
        if o.key in named:
            return f"new object {o.key} has the key of a committed object"
        if o.first < lo or o.last < o.first or o.last > hi:
            return f"new object {o.key} holds [{o.first}, {o.last}], outside [{lo}, {hi}]"
        if not 0 < o.records <= o.last - o.first + 1 - removed_count(removed, o.first, o.last):
            return f"new object {o.key} holds {o.records} records in [{o.first}, {o.last}]"
        if removed_count(removed, o.first, o.first) or removed_count(removed, o.last, o.last):
            return f"new object {o.key} starts or ends at a removed offset"
    held = sum(o.records for o in rw.objects)
    was = sum(o.records for o in rw.replaced)
    gone = sum(r.last - r.first + 1 for r in rw.removed)
    if held != was - gone:
        return (
            f"the new objects hold {held} records; the replaced counts {was}, less {gone} removed"
        )
    return None

"""The commit log of a target read independently, for tests: boto3 lists and GETs the entries
(``<prefix>/.kafka-archive/log/<seq:020d>.json``), json parses them, and the fold below checks
each as a correct log must be. Never our log codec or fold (``protocol/log.py``,
``protocol/core.py``): this is the check those are held to.

The fold covers every entry kind a log holds: claims (epochs grow), imports of a migrated
archive of states (ends, objects and passed gaps as given, on partitions with no end yet),
commits by the claim's holder from the partition's end (or past 0 where a first commit
``begins``, ``--start``), tiled (objects and passed ``gaps`` cover the range in order) or
untiled (``"tiled": false``, PARTITIONBY: objects interleave, each inside the range)
and rewrites (compact, erase, expire: consecutive named objects replaced, exactly as named, by
objects inside their span that hold every offset of it but the removed ones), tiled or
untiled (``"tiled": false``, PARTITIONBY and time layouts: named objects of one group
replaced exactly as named by objects inside [min first, max last] of them holding as many
records less the removed ones; the partition's objects kept in first-offset order).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

Partition = tuple[str, int]
Writer = tuple[str, int]


@dataclass
class CommitLog:
    """The log folded: its entries in order and, per (topic, partition), the holder of its
    claim, its committed end, the objects named now (an imported one marked ``imported``: the
    states kept no record counts), its passed gaps and its removed ranges."""

    entries: list[dict[str, Any]] = field(default_factory=list)
    holders: dict[Partition, Writer] = field(default_factory=dict)
    ends: dict[Partition, int] = field(default_factory=dict)
    objects: dict[Partition, list[dict[str, Any]]] = field(default_factory=dict)
    gaps: dict[Partition, list[tuple[int, int]]] = field(default_factory=dict)
    removed: dict[Partition, list[dict[str, Any]]] = field(default_factory=dict)
    begins: dict[Partition, int] = field(default_factory=dict)  # where --start began it

    @property
    def kinds(self) -> list[str]:
        return [e["kind"] for e in self.entries]

    @property
    def committers(self) -> set[str]:
        """The runs that created an entry other than a claim."""
        return {e["writer"]["run_id"] for e in self.entries if e["kind"] != "claim"}

    def named(self) -> set[str]:
        """The keys of every object the log names now."""
        return {o["key"] for objs in self.objects.values() for o in objs}


def log_folder(prefix: str) -> str:
    return f"{prefix}/.kafka-archive/log/" if prefix else ".kafka-archive/log/"


def entry_keys(s3: Any, bucket: str, prefix: str = "arch") -> list[str]:
    """The keys of the log's entries (checkpoints left out), checked numbered 1.. in order
    without a hole."""
    folder = log_folder(prefix)
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=folder):
        keys += [i["Key"] for i in page.get("Contents", []) if "/checkpoint/" not in i["Key"]]
    keys.sort()
    for n, key in enumerate(keys, start=1):
        assert key == f"{folder}{n:020d}.json", "entries are numbered 1.. without a hole"
    return keys


def read_log(s3: Any, bucket: str, prefix: str = "arch") -> CommitLog:
    """Every entry of the log under ``prefix``, folded and checked in order."""
    log, epoch = CommitLog(), 0
    for n, key in enumerate(entry_keys(s3, bucket, prefix), start=1):
        doc = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        assert doc["seq"] == n, f"{key} holds seq {doc['seq']}"
        writer = (doc["writer"]["run_id"], doc["writer"]["epoch"])
        log.entries.append(doc)
        if doc["kind"] == "claim":
            assert writer[1] > epoch, f"entry {n}: a claim at epoch {writer[1]} after {epoch}"
            epoch = writer[1]
            for c in doc["claims"]:
                log.holders[(c["topic"], c["partition"])] = writer
            continue
        for i in doc.get("imports", []):
            _import(log, n, writer, i)
        for c in doc["commits"]:
            _commit(log, n, writer, c)
        for rw in doc.get("rewrites", []):
            _rewrite(log, n, writer, rw)
        assert doc["kind"] in ("import", "commit", "rewrite"), f"entry {n}: {doc['kind']}"
    return log


def _import(log: CommitLog, n: int, writer: Writer, i: dict[str, Any]) -> None:
    tp = (i["topic"], i["partition"])
    assert log.holders.get(tp) == writer, f"entry {n}: {tp} imported by a non-holder"
    assert tp not in log.ends, f"entry {n}: {tp} imported over committed offsets"
    log.ends[tp] = i["end"]
    log.objects[tp] = [dict(o, imported=True) for o in i["objects"]]
    log.gaps[tp] = [(int(g[0]), int(g[1])) for g in i["gaps"]]
    for o in i["objects"]:
        assert o["first"] <= o["last"] < i["end"], f"entry {n}: {o} past the end {i['end']}"


def _commit(log: CommitLog, n: int, writer: Writer, c: dict[str, Any]) -> None:
    tp = (c["topic"], c["partition"])
    assert log.holders.get(tp) == writer, f"entry {n}: {tp} committed by a non-holder"
    if c.get("begins"):  # a partition's first commit, past 0 (--start): below it, never had
        assert log.ends.get(tp, 0) == 0 and not log.objects.get(tp), f"entry {n}: {tp} begins late"
        assert tp not in log.begins, f"entry {n}: {tp} begins twice"
        log.begins[tp] = c["start"]
    else:
        assert c["start"] == log.ends.get(tp, 0), f"entry {n}: {tp} leaves a gap or overlaps"
    # Passed gaps (--allow-gaps): offsets Kafka deleted, inside the range, in no object.
    gaps = sorted((int(g[0]), int(g[1])) for g in c.get("gaps", []))
    for first, last in gaps:
        assert c["start"] <= first <= last < c["end"], f"entry {n}: gap {first}..{last} outside"
    named = log.named()
    for o in c["objects"]:
        assert o["key"] not in named, f"entry {n}: {o['key']} named twice"
        named.add(o["key"])
        for first, last in gaps:
            assert o["last"] < first or o["first"] > last, f"entry {n}: {o} over a gap"
    if c.get("tiled", True):  # objects and gaps tile the range, in order
        at, left = c["start"], list(gaps)
        for o in c["objects"]:
            while left and left[0][0] == at:
                at = left.pop(0)[1] + 1
            assert o["first"] == at and o["last"] >= o["first"], f"entry {n}: {o} from {at}"
            at = o["last"] + 1
        while left and left[0][0] == at:
            at = left.pop(0)[1] + 1
        assert at == c["end"] and not left, f"entry {n}: {tp} tiled to {at}, not {c['end']}"
    else:  # objects of several groups interleave: each inside the range, no more records
        for o in c["objects"]:
            assert c["start"] <= o["first"] <= o["last"] < c["end"], f"entry {n}: {c}, {o}"
        assert sum(o["records"] for o in c["objects"]) <= c["end"] - c["start"]
    log.gaps.setdefault(tp, []).extend(gaps)
    log.ends[tp] = c["end"]
    log.objects.setdefault(tp, []).extend(c["objects"])


def _rewrite(log: CommitLog, n: int, writer: Writer, rw: dict[str, Any]) -> None:
    tp = (rw["topic"], rw["partition"])
    assert log.holders.get(tp) == writer, f"entry {n}: {tp} rewritten by a non-holder"
    objs, replaced = log.objects.get(tp, []), rw["replaced"]
    plain = [{k: v for k, v in o.items() if k != "imported"} for o in objs]
    if rw.get("tiled", True) is False:
        _untiled_rewrite(log, n, tp, plain, rw)
        return
    assert replaced and replaced[0] in plain, f"entry {n}: replaces an object not named"
    at = plain.index(replaced[0])
    assert plain[at : at + len(replaced)] == replaced, f"entry {n}: not as named, in order"
    removed = log.removed.setdefault(tp, [])
    removed += rw["removed"]
    gone = {x for r in removed for x in range(r["first"], r["last"] + 1)}
    span = {x for o in replaced for x in range(o["first"], o["last"] + 1)}
    lo, hi = min(span), max(span)
    named = log.named() - {o["key"] for o in replaced}
    held: set[int] = set()
    for o in rw["objects"]:
        assert o["key"] not in named, f"entry {n}: {o['key']} named twice"
        named.add(o["key"])
        assert lo <= o["first"] <= o["last"] <= hi, f"entry {n}: {o} outside [{lo}, {hi}]"
        held |= set(range(o["first"], o["last"] + 1))
    assert span - gone <= held, f"entry {n}: offsets of the span lost"
    log.objects[tp] = objs[:at] + rw["objects"] + objs[at + len(replaced) :]


def _untiled_rewrite(
    log: CommitLog, n: int, tp: Partition, plain: list[dict[str, Any]], rw: dict[str, Any]
) -> None:
    replaced = rw["replaced"]
    keys = [o["key"] for o in replaced]
    assert replaced and len(set(keys)) == len(keys), f"entry {n}: replaces nothing or twice"
    assert all(o in plain for o in replaced), f"entry {n}: replaces an object not as named"
    assert all(o["records"] > 0 for o in replaced), f"entry {n}: replaces an uncounted object"
    lo, hi = min(o["first"] for o in replaced), max(o["last"] for o in replaced)
    removed = log.removed.setdefault(tp, [])
    for r in rw["removed"]:
        assert lo <= r["first"] <= r["last"] <= hi, f"entry {n}: removes outside [{lo}, {hi}]"
    removed += rw["removed"]
    named = log.named() - set(keys)
    for o in rw["objects"]:
        assert o["key"] not in named, f"entry {n}: {o['key']} named twice"
        named.add(o["key"])
        assert lo <= o["first"] <= o["last"] <= hi, f"entry {n}: {o} outside [{lo}, {hi}]"
        assert 0 < o["records"] <= o["last"] - o["first"] + 1, f"entry {n}: {o}"
    gone = sum(r["last"] - r["first"] + 1 for r in rw["removed"])
    held = sum(o["records"] for o in rw["objects"])
    was = sum(o["records"] for o in replaced)
    assert held == was - gone, f"entry {n}: {held} records for {was} less {gone} removed"
    kept = [o for o in log.objects[tp] if o["key"] not in set(keys)]
    log.objects[tp] = sorted(kept + rw["objects"], key=lambda o: o["first"])

"""Hypothesis strategies for the protocol's tests: entries, and valid logs built by folding."""

from __future__ import annotations

from hypothesis import strategies as st

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    Entry,
    EntryKind,
    ObjectRef,
    PartitionCommit,
    PartitionImport,
    PartitionRef,
    WriterId,
)

texts = st.text(min_size=1, max_size=8)
refs = st.builds(PartitionRef, texts, texts, st.integers(0, 5))
writers = st.builds(WriterId, texts, st.integers(1, 10**6))
objects = st.builds(
    ObjectRef,
    texts,
    st.integers(0, 2**62),
    st.integers(0, 2**62),
    st.integers(0, 10**9),
    st.integers(0, 10**12),
    st.text(max_size=64),
)
commits = st.builds(
    PartitionCommit,
    refs,
    st.integers(0, 2**62),
    st.integers(0, 2**62),
    st.lists(objects, max_size=4).map(tuple),
)
gaps = st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), max_size=3).map(tuple)
imports = st.lists(
    st.builds(
        PartitionImport,
        refs,
        st.integers(0, 2**62),
        st.lists(objects, max_size=4).map(tuple),
        gaps,
    ),
    max_size=4,
).map(tuple)
entries = st.builds(
    Entry,
    st.integers(1, 10**9),
    st.sampled_from(EntryKind),
    writers,
    st.lists(refs, max_size=4).map(tuple),
    st.lists(commits, max_size=4).map(tuple),
    imports=imports,
)

_REFS = [PartitionRef("r", "t", p) for p in range(3)]


@st.composite
def valid_logs(draw: st.DrawFn, max_entries: int = 20) -> list[Entry]:
    """A log as correct writers leave it: claims with growing epochs, commits by holders."""
    state = core.LogState()
    out: list[Entry] = []
    for _ in range(draw(st.integers(0, max_entries))):
        holders = {r: h for r in _REFS if (h := state.holder(r)) is not None}
        if not holders or draw(st.integers(0, 3)) == 0:
            claimed = draw(st.lists(st.sampled_from(_REFS), min_size=1, unique=True))
            entry = core.claim_entry(state, f"run-{state.seq}", claimed)
        else:
            writer = draw(st.sampled_from(sorted(set(holders.values()), key=str)))
            mine = [r for r, h in holders.items() if h == writer]
            cs = []
            for r in draw(st.lists(st.sampled_from(mine), min_size=1, unique=True)):
                at = start = state.end(r)
                objs = []
                for size in draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)):
                    objs.append(
                        ObjectRef(f"{r.partition}/{at:020d}", at, at + size - 1, size, 10, "c")
                    )
                    at += size
                cs.append(PartitionCommit(r, start, at, tuple(objs)))
            entry = core.commit_entry(state, writer, cs)
        state = core.fold(state, entry)
        out.append(entry)
    return out

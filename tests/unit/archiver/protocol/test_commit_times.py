"""Commit times: every entry carries its writer's wall-clock time (``at``, seconds since the
epoch; an additive field an older reader ignores), and the fold keeps per partition the time
of the last entry that committed to it (commit, rewrite, import), which ``status`` shows."""

import json

from hypothesis import given
from hypothesis import strategies as st

from kafka_archive.archiver.protocol import core
from kafka_archive.archiver.protocol.log import (
    ObjectRef,
    PartitionCommit,
    PartitionImport,
    PartitionRef,
    PartitionRewrite,
    decode_checkpoint,
    decode_entry,
    encode_checkpoint,
    encode_entry,
)

P0 = PartitionRef("t", "t", 0)
P1 = PartitionRef("t", "t", 1)


def obj(first: int, last: int, gen: str = "") -> ObjectRef:
    return ObjectRef(f"t/0/{first:020d}{gen}.json", first, last, last - first + 1, 10, "c")


def test_each_kind_of_entry_carries_its_time_through_the_codec() -> None:
    state = core.LogState()
    claim = core.claim_entry(state, "r", [P0, P1], at=1_700_000_000.25)
    assert decode_entry(encode_entry(claim)).at == 1_700_000_000.25
    state = core.fold(state, claim)
    commit = core.commit_entry(
        state, claim.writer, [PartitionCommit(P0, 0, 3, (obj(0, 2),))], at=1_700_000_100.5
    )
    assert decode_entry(encode_entry(commit)) == commit
    state = core.fold(state, commit)
    rewrite = core.rewrite_entry(
        state, claim.writer, [PartitionRewrite(P0, (obj(0, 2),), (obj(0, 2, ".g1"),))], at=7.0
    )
    assert decode_entry(encode_entry(rewrite)).at == 7.0
    imp = core.import_entry(state, claim.writer, [PartitionImport(P1, 0, ())], at=8.0)
    assert decode_entry(encode_entry(imp)).at == 8.0


def test_an_entry_without_a_time_encodes_as_before_and_the_time_is_no_new_version() -> None:
    """Older readers ignore the field: no version bump, and no "at" where none was given."""
    state = core.LogState()
    plain = json.loads(encode_entry(core.claim_entry(state, "r", [P0])))
    timed = json.loads(encode_entry(core.claim_entry(state, "r", [P0], at=5.0)))
    assert "at" not in plain and timed.pop("at") == 5.0
    assert timed == plain and plain["version"] == 1
    assert decode_entry(encode_entry(core.claim_entry(state, "r", [P0]))).at is None


def test_the_fold_keeps_each_partitions_last_commit_time_a_claim_moves_none() -> None:
    state = core.LogState()
    claim = core.claim_entry(state, "r", [P0, P1], at=1.0)
    state = core.fold(state, claim)
    assert state.partitions[P0].committed_at is None
    me = claim.writer
    state = core.fold(
        state, core.commit_entry(state, me, [PartitionCommit(P0, 0, 3, (obj(0, 2),))], at=2.0)
    )
    assert state.partitions[P0].committed_at == 2.0
    assert state.partitions[P1].committed_at is None
    state = core.fold(state, core.claim_entry(state, "r2", [P0, P1], at=3.0))
    assert state.partitions[P0].committed_at == 2.0, "a claim commits nothing"
    me = state.holder(P0)
    assert me is not None
    state = core.fold(
        state,
        core.rewrite_entry(
            state, me, [PartitionRewrite(P0, (obj(0, 2),), (obj(0, 2, ".g1"),))], at=4.0
        ),
    )
    assert state.partitions[P0].committed_at == 4.0
    state = core.fold(state, core.import_entry(state, me, [PartitionImport(P1, 0, ())], at=5.0))
    assert state.partitions[P1].committed_at == 5.0
    # An entry without a time (an older writer) leaves the partition's last known time.
    state = core.fold(
        state,
        core.commit_entry(state, me, [PartitionCommit(P0, 3, 4, (obj(3, 3),))]),
    )
    assert state.partitions[P0].committed_at == 4.0


@given(st.one_of(st.none(), st.floats(0, 4e9, allow_nan=False)))
def test_a_checkpoint_keeps_the_commit_time(at: float | None) -> None:
    state = core.LogState()
    claim = core.claim_entry(state, "r", [P0])
    state = core.fold(state, claim)
    state = core.fold(
        state,
        core.commit_entry(state, claim.writer, [PartitionCommit(P0, 0, 3, (obj(0, 2),))], at=at),
    )
    data = encode_checkpoint(state.checkpoint())
    assert decode_checkpoint(data) == state.checkpoint()
    assert (b'"committed_at"' in data) == (at is not None)
    assert json.loads(data)["version"] == 1

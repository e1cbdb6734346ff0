"""The historical bugs the writers can reintroduce, one at a time (``Writer(mutations=...)``),
for the simulation to prove that a seed catches each (:mod:`.simulation`,
``--mutation NAME``); production passes none. By name, what the mutated writer does."""

from __future__ import annotations

from collections.abc import Mapping

MUTATIONS: Mapping[str, str] = {
    "unconditional_entry": "claims and commits PUT without If-None-Match (the unconditional "
    "lock release/write: a commit point that can be overwritten)",
    "unconditional_delete": "a found object deleted without If-Match on the ETag it was judged by",
    "adopt_by_metadata": "a found object adopted when its metadata names the same partition",
    "vacuum_named": "vacuum does not skip objects the log names",
    "vacuum_by_age_only": "vacuum deletes unnamed objects by age alone, whatever their writer",
    "recover_unfenced": "recovery deletes a found object whose writer is not fenced",
    "fenced_cleanup": "a writer that lost (fenced) deletes the keys it wrote, unconditionally",
    "straggler_delete": "an object of this run (its run and epoch) found at the key is deleted "
    "and replaced whatever its attempt (the straggler of a failed batch that passed every "
    "check and replaced a later batch's object)",
    "lower_attempt_dead": "an attempt of this run with a lower number is taken as dead (a "
    "speculative copy deletes its live sibling's object)",
    "ambiguous_commit_is_failure": "a commit without response taken as failed: its objects "
    "deleted (If-Match)",
    "foreign_entry_as_ours": "after a create without answer, any entry found at its seq taken "
    "as ours (the foreign Iceberg snapshot taken for the run's own commit)",
    "skip_fence_check": "after a 412 on its commit, a writer re-validates ranges only, not epochs",
    "vacuum_local_clock": "vacuum ages objects by the writer's own clock, not the store's (a "
    "paused VM's clock lags: a late create outlives the grace)",
    "identical_bytes": "every attempt writes the same bytes for an object (no stamp): S3's ETag "
    "is the MD5 of the bytes, so a delete If-Match judged on one attempt's object also matches "
    "a later attempt's at the same key, and a delete that lands late removes a committed object",
    "unbounded_ambiguous": "a create without answer is sent again for ever (no budget: a "
    "writer whose endpoint never answers loops instead of stopping)",
    "unconditional_complete": "a multipart upload completed without If-None-Match (the "
    "create of an object above the part size can replace an object at its key)",
    "unstamped_same_key": "a format with no place for a stamp (TEXT, BYTES, CSV, uncompressed "
    "JSON) keeps the planned key: two attempts' objects at it have the same bytes, so the same "
    "ETag (the identical_bytes hole, for those formats)",
}
# Bugs only a source whose objects interleave (`Writer.groups`) can show.
MOVING_MUTATIONS: Mapping[str, str] = {
    "gap_over_object": "a passed gap is recorded, yet the partition's task still reads from the "
    "committed end (its low read stale), and the objects are named by ranges from the gap's "
    "end: the gap's offsets are also in an object (recorded gone and archived)",
    "gap_unrecorded": "the task reads from Kafka's low but the commit records no gap, its "
    "objects named by ranges from the committed end (as a range runs from where the one "
    "before ended): offsets in no object and no gap, lost without a word",
}

GROUPED_MUTATIONS: Mapping[str, str] = {
    "partial_groups": "a commit of a range names only one group's objects of it (PARTITIONBY: "
    "the other groups' records below the new end are lost; the fold's count check passes)",
}

# Rewrite bugs only a source whose objects interleave (PARTITIONBY: untiled rewrites) can show.
GROUPED_REWRITE_MUTATIONS: Mapping[str, str] = {
    "rewrite_two_groups": "a compaction plan takes consecutive objects of the partition, not "
    "of one group: their records are written into the first one's group folder (a group's "
    "reader misses them; the fold's count check passes)",
    "rewrite_positional_offsets": "a rewrite of interleaved objects takes each record's offset "
    "as its new object's first offset plus its position (as a format that stores no offsets "
    "reads them back): the new objects hold as many records as the replaced, so the fold's "
    "count passes, but the replaced records' own offsets are in none of them",
}

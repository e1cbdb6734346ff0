"""``run --reset-state``: forget what a plan's routes archived, under the job's lease."""

from __future__ import annotations

from kafka_archive.archiver import iceberg
from kafka_archive.archiver.commands.locks import held_locks
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.plan.naming import new_run_id
from kafka_archive.archiver.plan.preflight import preflight, targets_of
from kafka_archive.archiver.state import legacy
from kafka_archive.archiver.state.paths import (
    state_root,
    topic_pending_prefix,
    topic_state_prefix,
)
from kafka_archive.kcql.plan import Plan


def reset_state(settings: Settings, plan: Plan) -> int:
    """Forget what the plan's routes archived: delete their partition states and intent
    markers (also those of the layout before routes owned their state; other topics under
    the same targets keep theirs), holding each target's lock (so never under a live run).
    Archived objects stay; the next run starts where ``--start`` says and may archive
    records again. Returns the number of state objects deleted."""
    iceberg.refuse_tables(plan, "run --reset-state")
    deleted = 0
    with (
        preflight(settings, plan, kafka=False) as pre,
        held_locks(pre.store, plan, pre.job, new_run_id(), settings.lock_ttl_seconds),
    ):
        for target in targets_of(plan):
            topics = {r.topic for r in plan.routes if r.target == target}
            every = any(r.all_topics for r in plan.routes if r.target == target)
            folders = (
                [f"{state_root(target)}/state/", f"{state_root(target)}/pending/"]
                if every
                else [
                    f(target, t) for t in topics for f in (topic_state_prefix, topic_pending_prefix)
                ]
            )
            keys = [key for folder in folders for key in pre.store.list_keys(target.bucket, folder)]
            keys += legacy.forget(pre.store, target, topics, every=every)
            if keys:
                pre.store.delete(target.bucket, keys)
            deleted += len(keys)
    return deleted

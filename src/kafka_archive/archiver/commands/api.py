"""Library entry points: the CLI calls these; they never print (progress is passed in).

Each command lives in its own module; this facade names them:

- ``compile_plan``, ``check_layouts`` (:mod:`.plan.checks`): KCQL text -> a checked plan;
- ``run`` (:mod:`.session`), ``follow`` (:mod:`.follow`): archive, once or continuously,
  each batch's :class:`Outcome` (what it committed, and its error); ``reset_state``
  (:mod:`.reset`); ``serve`` (:mod:`.service`): follow with signals and metrics;
  ``write_outputs``;
- ``verify`` (:mod:`.verify`), ``status`` (:mod:`.status`): check the archive, show the lag;
- ``cat`` (:mod:`.read.display`), ``restore`` (:mod:`.restore`): read it back.

They share the driver's seam: ``preflight`` (:mod:`.plan.preflight`), ``partition_states``
(:mod:`.plan.views`) and ``map_units`` (:mod:`.spark.driver`); ``Progress`` is how they
report while they work.
"""

from __future__ import annotations

from kafka_archive.archiver.commands.follow import FollowResult, follow
from kafka_archive.archiver.commands.outcome import Outcome
from kafka_archive.archiver.commands.reset import reset_state
from kafka_archive.archiver.commands.restore import RestoreFilter, RestoreRun, restore
from kafka_archive.archiver.commands.service import FollowOptions, serve, write_outputs
from kafka_archive.archiver.commands.session import run
from kafka_archive.archiver.commands.status import JobStatus, status
from kafka_archive.archiver.commands.verify import VerifyResult, verify
from kafka_archive.archiver.plan.checks import check_layouts, compile_plan
from kafka_archive.archiver.read.display import cat
from kafka_archive.archiver.spark.progress import NullProgress, Progress

__all__ = [
    "FollowOptions",
    "FollowResult",
    "JobStatus",
    "NullProgress",
    "Outcome",
    "Progress",
    "RestoreFilter",
    "RestoreRun",
    "VerifyResult",
    "cat",
    "check_layouts",
    "compile_plan",
    "follow",
    "reset_state",
    "restore",
    "run",
    "serve",
    "status",
    "verify",
    "write_outputs",
]

"""A job's names: the job (from what its plan writes where, or given), its consumer group and
a run's id."""

from __future__ import annotations

import hashlib
import re
import uuid

from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.kcql.plan import Plan

_JOB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def job_name_for(plan: Plan) -> str:
    """A stable default job name from what the plan writes where (not from formats or flush
    settings). The job names the consumer group, the Spark application and the metrics;
    the archive's state belongs to each route (:mod:`.state.paths`), whatever the job."""
    identity = sorted(f"{r.target.bucket}:{r.target.prefix}<-{r.topic}" for r in plan.routes)
    digest = hashlib.sha256("\n".join(identity).encode()).hexdigest()[:8]
    topics = "+".join(sorted({"all-topics" if r.all_topics else r.topic for r in plan.routes}))
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", topics)[:48].lstrip("._-") or "archive"
    return f"{readable}-{digest}"


def check_job_name(name: str) -> str:
    if not _JOB_NAME.match(name) or name in (".", ".."):
        raise ConfigError(
            f"job name {name!r} is not allowed",
            hint="Use 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return name


def group_for(job: str) -> str:
    return f"kafka-archive.{job}"


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]

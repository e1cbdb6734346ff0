"""The start-up check that the S3 endpoint honours conditional writes, on which every fence
of the exactly-once protocol rests: If-None-Match on creates (PUT and CompleteMultipartUpload)
and the lock, If-Match on the state, the lock and the deletes of replacements and recovery."""

from __future__ import annotations

import logging

from kafka_archive.archiver.core.errors import ConditionalWritesError
from kafka_archive.archiver.state.paths import probe_key
from kafka_archive.archiver.store.s3 import ConditionalWritesIgnored, S3Store
from kafka_archive.kcql.plan import Plan

log = logging.getLogger(__name__)


def check_conditional_writes(
    store: S3Store, plan: Plan, job: str, run_id: str, *, unsafe: bool
) -> None:
    """Refuse an endpoint that applies a request whose If-None-Match / If-Match is false
    (older MinIO; a store that honours it on PUT but not on CompleteMultipartUpload: older
    moto, LocalStack, some gateways), unless ``unsafe`` (the user's
    ``unsafe_single_writer_without_conditional_writes``): then warn. Probed once per bucket
    and run (nine requests), with a throw-away object under the job's state prefix."""
    probed: set[str] = set()
    for route in plan.routes:
        bucket = route.target.bucket
        if bucket in probed:
            continue
        probed.add(bucket)
        key = probe_key(route.target, run_id)
        try:
            store.probe_conditional_writes(bucket, key)
        except ConditionalWritesIgnored as exc:
            message = (
                f"the S3 endpoint applied a request whose condition was false ({exc}, "
                f"s3://{bucket}): it does not honour conditional writes"
            )
            if not unsafe:
                raise ConditionalWritesError(
                    message,
                    hint="Use an endpoint that does (AWS S3, a current MinIO); or, "
                    "accepting that two overlapping runs of the job can lose or duplicate "
                    "records, set unsafe_single_writer_without_conditional_writes: true",
                ) from None
            log.warning(
                "%s; UNSAFE: continuing because unsafe_single_writer_without_"
                "conditional_writes is set: overlapping runs of this job can lose "
                "or duplicate records",
                message,
            )

"""A retried task finds the object its first attempt wrote under the same key. It is the same
object only if its content is: on a compacted topic the log cleaner can run between the two
attempts, and the retry then cuts other boundaries from other records. Adopting the first
attempt's object because its metadata names the same run and unit lost records (or
duplicated them).

The first attempt's object is put in S3 as that attempt writes it (its metadata included);
the retry runs for real (the planning, the task's Kafka read, chunks, create-only upload and
commit, in this process); an independent reader (boto3 + json) checks the archive.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from archive_helpers import archived_ids

from kafka_archive.archiver.config.load import load_settings
from kafka_archive.archiver.core.model import UnitResult
from kafka_archive.archiver.kafka.admin import KafkaAdmin
from kafka_archive.archiver.plan import units as jobs
from kafka_archive.archiver.plan.preflight import Preflight
from kafka_archive.archiver.plan.views import partition_states
from kafka_archive.archiver.state import pending
from kafka_archive.archiver.state.lock import JobLock
from kafka_archive.archiver.store.s3 import S3Store
from kafka_archive.archiver.write.task import archive_unit
from kafka_archive.kcql import parse

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("first_attempt", "tagged"),
    [
        ([range(900)], False),  # fewer records under the key: 900..999 were lost
        ([range(1100)], False),  # more: 1000..1099 were archived twice
        ([range(900)], True),  # as this version's first attempt tags it
        # ... and its next object too, under a key the retry does not write
        ([range(1100), range(1100, 2000)], True),
    ],
    ids=["fewer", "more", "tagged", "next-object"],
)
def test_a_retry_replaces_its_first_attempts_object_of_other_content(
    first_attempt: list[range],
    tagged: bool,
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    name, bkt = topic(partitions=1), bucket()
    produce(name, 2000, partitions=1)
    loaded = load_settings(None, {}, {"bootstrap_servers": broker, "endpoint_url": s3_endpoint})
    settings = loaded.settings
    plan = parse(f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.count'=1000)")
    store = S3Store(settings.s3)
    target = plan.routes[0].target
    with (
        JobLock(store, target, "j", "run-r", ttl_seconds=600) as lock,
        KafkaAdmin(settings.kafka, "g") as admin,
    ):
        work = jobs.plan_work(
            partition_states(Preflight("j", store, plan, admin), legacy=False),
            store=store,
            admin=admin,
            settings=settings,
            job="j",
            run_id="run-r",
            now_ms=0,
            epochs={target: lock.epoch},
        )
        (unit,) = work.units
        assert (unit.start, unit.stop, unit.epoch) == (0, 2000, lock.epoch)
        # The first attempt's objects, with the metadata it wrote.
        for records in first_attempt:
            body = b"".join(json.dumps({"id": i}).encode() + b"\n" for i in records)
            metadata = pending.writer_metadata(
                unit.run_id, unit.epoch, f"{unit.start}-{unit.stop}-{unit.young_after_ms}"
            )
            first, last = records[0], records[-1]
            if tagged:
                tag = pending.content_tag(first, last, len(records), len(body))
                metadata[pending.CONTENT_META] = tag
            s3_client.put_object(
                Bucket=bkt, Key=f"arch/{name}/0/{first:012d}.json", Body=body, Metadata=metadata
            )
        result = archive_unit(unit, settings)
    assert isinstance(result, UnitResult), result
    assert result.next_offset == 2000
    ids = archived_ids(s3_client, bkt)
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} records archived twice"
    assert ids == list(range(2000)), f"{2000 - len(set(ids))} records lost"


def test_a_retry_adopts_its_first_attempts_object_of_the_same_content(
    broker: str,
    produce: Callable[..., None],
    s3_endpoint: str,
    s3_client: Any,
    topic: Callable[..., str],
    bucket: Callable[..., str],
) -> None:
    """Same records, same bytes, same tag: adopted, not sent again (its ETag unchanged)."""
    name, bkt = topic(partitions=1), bucket()
    produce(name, 2000, partitions=1)
    settings = load_settings(
        None, {}, {"bootstrap_servers": broker, "endpoint_url": s3_endpoint}
    ).settings
    plan = parse(f"INSERT INTO {bkt}:arch SELECT * FROM {name} PROPERTIES('flush.count'=1000)")
    store = S3Store(settings.s3)
    target = plan.routes[0].target
    with (
        JobLock(store, target, "j", "run-r", ttl_seconds=600) as lock,
        KafkaAdmin(settings.kafka, "g") as admin,
    ):
        work = jobs.plan_work(
            partition_states(Preflight("j", store, plan, admin), legacy=False),
            store=store,
            admin=admin,
            settings=settings,
            job="j",
            run_id="run-r",
            now_ms=0,
            epochs={target: lock.epoch},
        )
        (unit,) = work.units
        first = archive_unit(unit, settings)
        assert isinstance(first, UnitResult)
        key = f"arch/{name}/0/{0:012d}.json"
        etag = s3_client.head_object(Bucket=bkt, Key=key)["ETag"]
        # The state moved: a retry of the unit after its commit (its result was lost) finds
        # its objects, adopts them and takes the commit as its own.
        again = archive_unit(unit, settings)
        assert isinstance(again, UnitResult), again
        assert s3_client.head_object(Bucket=bkt, Key=key)["ETag"] == etag
    assert archived_ids(s3_client, bkt) == list(range(2000))

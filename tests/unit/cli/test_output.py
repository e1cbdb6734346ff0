"""Result lines name each partition unambiguously: one topic archived by several statements
(to several targets) has its lines followed by the target, in run, verify and status."""

from __future__ import annotations

import dataclasses

from kafka_archive.archiver.commands.status import JobStatus, PartitionStatus
from kafka_archive.archiver.commands.verify import PartitionVerdict, VerifyResult
from kafka_archive.archiver.core.model import RunResult, TopicPartition, UnitResult
from kafka_archive.cli.output import render_status, render_summary, render_verify

TARGETS = ("bkt:json", "bkt:avro", "bkt:other")
ROUTES = [(0, TopicPartition("orders", 0)), (1, TopicPartition("orders", 0))]
ROUTES += [(2, TopicPartition("clicks", 0))]


def test_a_run_summary_names_the_target_of_a_topic_archived_twice() -> None:
    units = tuple(UnitResult(i, tp, 0, 10, 10, 100, (), 0.1) for i, tp in ROUTES)
    text = render_summary(RunResult("job", "run", units, (), 1.0, targets=TARGETS))
    lines = text.splitlines()[1:4]
    assert [line.split(":")[0].strip() for line in lines] == [
        "orders-0 (bkt",
        "orders-0 (bkt",
        "clicks-0",
    ]
    assert "orders-0 (bkt:json): offsets 0..9" in text
    assert "orders-0 (bkt:avro): offsets 0..9" in text


def test_verify_and_status_name_the_target_of_a_topic_archived_twice() -> None:
    verdicts = tuple(PartitionVerdict(i, tp, 10, 1, 10, 0, 10, 0, 0, (), ()) for i, tp in ROUTES)
    text = render_verify(VerifyResult("job", False, verdicts, 1.0, TARGETS))
    assert "orders-0 (bkt:json): ok" in text and "orders-0 (bkt:avro): ok" in text
    assert "  clicks-0: ok" in text
    rows = tuple(
        PartitionStatus(tp.topic, tp.partition, 10, 10, 0, None, 1, 100, TARGETS[i])
        for i, tp in ROUTES
    )
    text = render_status(JobStatus("job", rows))
    assert "orders-0 (bkt:json)" in text and "orders-0 (bkt:avro)" in text
    assert "clicks-0 (" not in text


def test_a_unit_that_read_no_offsets_names_none() -> None:
    from kafka_archive.archiver.spark.progress import UnitProgress
    from kafka_archive.cli.console import _done_line

    offline = UnitProgress(0, "orders", 1, 0, 0, 0, records=60, size=2000, objects=2)
    assert _done_line(offline, 0.5) == "orders[1]: 60 records, 2.0 KB, 2 object(s) in 0.5 s"
    read = UnitProgress(0, "orders", 1, 5, 9, 9, records=4, size=100, objects=1)
    assert _done_line(read, 0.5).startswith("orders[1]: offsets 5..8: 4 records")


def test_a_partition_kafka_deleted_records_of_shows_its_gap() -> None:
    rows = (
        PartitionStatus("orders", 0, 10, 30, 5, None, 1, 100, lost=15),
        PartitionStatus("orders", 1, 30, 30, 0, None, 1, 100),
    )
    lines = render_status(JobStatus("job", rows)).splitlines()
    assert lines[-1] == (
        "  orders-0: GAP offsets 10..24 (15 records) deleted by Kafka before they were "
        "archived; runs stop there (exit 16) until --allow-gaps passes it"
    )
    assert sum("GAP" in line for line in lines) == 1


def test_status_and_verify_show_every_row_and_mark_a_re_created_topic() -> None:
    reason = "topic 'orders' was deleted and re-created since s3://bkt/arch/ archived it"
    rows = (
        PartitionStatus("orders", 0, 10, 15, 15, None, 1, 100, "bkt:arch", recreated=reason),
        PartitionStatus("orders", 1, 10, 15, 15, None, 1, 100, "bkt:arch", recreated=reason),
        PartitionStatus("clicks", 0, 30, 30, 0, None, 1, 100, "bkt:arch"),
    )
    lines = render_status(JobStatus("job", rows)).splitlines()
    assert [line.split()[0] for line in lines[2:5]] == ["orders-0", "orders-1", "clicks-0"]
    assert [line.endswith("RE-CREATED") for line in lines[2:5]] == [True, True, False]
    assert lines[5:] == [f"  orders: RE-CREATED: {reason}"]
    verdicts = (
        PartitionVerdict(
            0, TopicPartition("orders", 0), 10, 1, 10, None, None, 0, 0, (), (), reason
        ),
        PartitionVerdict(1, TopicPartition("clicks", 0), 30, 1, 30, 0, 30, 0, 0, (), ()),
    )
    text = render_verify(VerifyResult("job", False, verdicts, 1.0, ("bkt:arch", "bkt:arch")))
    assert (
        "  orders-0: ok (committed up to 10; 1 object(s), 10 records; nothing compared "
        "with Kafka) RE-CREATED" in text
    )
    assert f"  orders (bkt:arch): RE-CREATED (checked offline only): {reason}" in text
    assert text.count("RE-CREATED") == 2 and text.splitlines()[-1].startswith("clean")


def test_a_run_summary_shows_its_s3_requests_by_type_and_their_price() -> None:
    """Issue 38: one line after the totals, the types sent in the table's order, the price at
    the configured prices (the AWS list prices by default)."""
    from kafka_archive.archiver.config.settings import S3Prices
    from kafka_archive.archiver.core.model import S3Requests

    unit = UnitResult(0, TopicPartition("orders", 0), 0, 10, 10, 100, (), 0.1)
    unit = dataclasses.replace(unit, s3_requests=S3Requests.of({"PUT": 38, "GET": 2}))
    other = S3Requests.of({"DELETE": 5, "LIST": 3, "GET": 10, "PUT": 2})
    result = RunResult("job", "run", (unit,), (), 1.0, other_s3=other)
    lines = render_summary(result).splitlines()
    assert lines[-1] == "S3: 60 requests (40 PUT, 3 LIST, 12 GET, 5 DELETE), est. $0.0002198"
    assert lines[-2].startswith("total: 10 records")
    free = render_summary(result, S3Prices(0.0, 0.0)).splitlines()[-1]
    assert free == "S3: 60 requests (40 PUT, 3 LIST, 12 GET, 5 DELETE), est. $0"
    assert "S3:" not in render_summary(RunResult("job", "run", (), (), 1.0))


def test_verify_and_restore_show_their_s3_requests() -> None:
    """Issue 38: verify's line comes before its verdict (the last line), restore's last."""
    from kafka_archive.archiver.commands.restore import RestoreResult, RestoreRun
    from kafka_archive.archiver.core.model import S3Requests
    from kafka_archive.cli.output import render_restore

    spent = S3Requests.of({"LIST": 2, "GET": 6})
    verdict = PartitionVerdict(0, TopicPartition("orders", 0), 10, 1, 10, 0, 10, 0, 0, (), ())
    lines = render_verify(VerifyResult("job", False, (verdict,), 1.0, s3_requests=spent))
    assert lines.splitlines()[-2:] == [
        "S3: 8 requests (2 LIST, 6 GET), est. $0.0000124",
        "clean: 1 partition(s), 1 object(s), 10 records, 0 problem(s) in 1.0 s",
    ]
    unit = RestoreResult(TopicPartition("orders", 0), None, 10, 10, 0.5)
    text = render_restore(RestoreRun("copy", (unit,), 1.0, spent))
    assert text.splitlines()[-1] == "S3: 8 requests (2 LIST, 6 GET), est. $0.0000124"
    assert "S3:" not in render_restore(RestoreRun("copy", (unit,), 1.0))

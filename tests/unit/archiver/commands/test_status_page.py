"""The status page of `run --follow --metrics-port` (`/`): pure, data in, HTML out. Read back
with the standard library's HTML parser, never by matching our own markup as text."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from html_cells import cells
from kafka_archive.archiver.commands.status import JobStatus, PartitionStatus
from kafka_archive.archiver.commands.status_page import (
    ERRORS_WINDOW,
    BatchLine,
    ErrorLine,
    JobLine,
    PageData,
    RouteLine,
    page_json,
    render_html,
    routes_of,
)
from kafka_archive.kcql import parse

NOW = 1_800_000_000.0


def partition(topic: str, number: int, archived: int | None, end: int) -> PartitionStatus:
    lag = end - (archived or 0)
    return PartitionStatus(topic, number, archived, end, lag, None, 2, 2048, target="b:arch")


def page(
    *,
    topic: str = "orders",
    errors: tuple[ErrorLine, ...] = (),
    status: JobStatus | None = None,
) -> PageData:
    rows = (partition(topic, 0, 20, 23), partition(topic, 1, None, 22))
    return PageData(
        job=JobLine("orders-1234", (RouteLine(topic, "b:arch", "JSON"),), NOW - 600),
        now=NOW,
        batches=7,
        failed_batches=len(errors),
        last=BatchLine(NOW - 2, 0.5, records=0, bytes=0, objects=0, ok=True),
        last_archived=BatchLine(NOW - 30, 1.25, records=40, bytes=4096, objects=4, ok=True),
        status=status or JobStatus("orders-1234", rows),
        errors=errors,
    )


def test_the_page_shows_the_job_routes_partitions_last_batch_and_lag() -> None:
    found = cells(render_html(page(), refresh_seconds=5))
    assert found.refresh == "5"
    assert found.cells["job"] == "orders-1234"
    assert found.cells["batches"] == "7"
    assert found.cells["route-0-topic"] == "orders"
    assert found.cells["route-0-target"] == "b:arch"
    assert found.cells["orders[0]@b:arch.archived"] == "20"
    assert found.cells["orders[0]@b:arch.end"] == "23"
    assert found.cells["orders[0]@b:arch.lag"] == "3"
    assert found.cells["orders[1]@b:arch.archived"] == "none"  # nothing archived yet
    assert found.cells["orders[1]@b:arch.lag"] == "22"
    assert found.cells["last_archived.records"] == "40"
    assert found.cells["last_archived.objects"] == "4"
    assert found.cells["last_archived.seconds"] == "1.25 s"
    assert found.cells["last.records"] == "0"
    assert found.cells["errors"].strip() == "none in the last hour"
    assert "script" not in found.tags  # no JavaScript


def test_errors_of_the_last_hour_only_newest_first() -> None:
    errors = (
        ErrorLine(NOW - ERRORS_WINDOW - 1, "S3UnavailableError", "too old"),
        ErrorLine(NOW - 60, "S3UnavailableError", "S3 answered 503"),
        ErrorLine(NOW - 5, "KafkaUnavailableError", "no broker"),
    )
    found = cells(render_html(page(errors=errors)))
    assert found.cells["error-0.message"] == "no broker"
    assert found.cells["error-0.kind"] == "KafkaUnavailableError"
    assert found.cells["error-1.message"] == "S3 answered 503"
    assert "error-2.message" not in found.cells
    assert "too old" not in found.cells["errors"]


def test_no_status_yet_says_so() -> None:
    data = page()
    empty = PageData(
        job=data.job,
        now=NOW,
        batches=0,
        failed_batches=0,
        last=None,
        last_archived=None,
        status=None,
        errors=(),
    )
    found = cells(render_html(empty))
    assert found.cells["partitions"].strip() == "not known yet (no micro-batch has finished)"
    assert found.cells["last"].strip() == "none yet"


text = st.text(alphabet=st.characters(exclude_categories=("Cs", "Cc")), min_size=1)


@given(topic=text, message=text, kind=text)
def test_every_shown_text_comes_back_as_text_never_as_markup(
    topic: str, message: str, kind: str
) -> None:
    """Topic names and error text are escaped: whatever they hold, the browser's parse of
    the page gives them back as the cell's text and adds no element."""
    plain = cells(render_html(page(topic="t", errors=(ErrorLine(NOW - 1, "k", "m"),))))
    errors = (ErrorLine(NOW - 1, kind, message),)
    found = cells(render_html(page(topic=topic, errors=errors)))
    assert found.tags == plain.tags
    assert found.cells["route-0-topic"] == topic
    assert found.cells[f"{topic}[0]@b:arch.archived"] == "20"
    assert found.cells["error-0.message"] == message
    assert found.cells["error-0.kind"] == kind


def test_the_json_holds_the_same_data() -> None:
    errors = (ErrorLine(NOW, "S3UnavailableError", "S3 answered 503"),)
    document = json.loads(json.dumps(page_json(page(errors=errors))))
    assert document["job"]["name"] == "orders-1234"
    assert document["job"]["routes"] == [{"topic": "orders", "target": "b:arch", "format": "JSON"}]
    assert document["batches"] == 7
    assert document["last_archived"]["objects"] == 4
    assert [p["lag"] for p in document["partitions"]] == [3, 22]
    (error,) = document["errors"]
    assert error == {
        "at": "2027-01-15T08:00:00Z",
        "kind": "S3UnavailableError",
        "message": "S3 answered 503",
    }


def test_routes_of_a_plan_name_topic_target_and_format_only() -> None:
    plan = parse(
        "INSERT INTO bkt:arch SELECT * FROM orders STOREAS `PARQUET`;"
        "INSERT INTO other-bkt SELECT * FROM clicks"
    )
    assert routes_of(plan) == (
        RouteLine("orders", "bkt:arch", "PARQUET"),
        RouteLine("clicks", "other-bkt", "JSON"),
    )

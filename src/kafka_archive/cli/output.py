"""Every text the CLI prints for a result: plan, run, follow, status, verify, restore."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafka_archive.archiver.commands.follow import FollowResult
from kafka_archive.archiver.commands.report import write_atomically
from kafka_archive.archiver.commands.restore import RestoreRun
from kafka_archive.archiver.commands.status import JobStatus, PartitionStatus
from kafka_archive.archiver.commands.verify import VerifyResult
from kafka_archive.archiver.config.settings import LIST_PRICES, S3Prices, requests_json
from kafka_archive.archiver.core.model import BatchTimings, RunResult, S3Requests, TopicPartition
from kafka_archive.archiver.read.verdict import offset_ranges


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _shared_topics(lines: Iterable[tuple[str, str]]) -> set[str]:
    """The topics that lines (``(topic, target)`` each) show under several targets: their
    lines name the target too (``(bucket:prefix)``), else they would read the same."""
    targets: dict[str, set[str]] = {}
    for topic, target in lines:
        targets.setdefault(topic, set()).add(target)
    return {topic for topic, where in targets.items() if len(where) > 1}


def _labeller(
    targets: tuple[str, ...], keys: list[tuple[int, TopicPartition]]
) -> Callable[[int, TopicPartition], str]:
    """How lines name a partition: ``topic-p``, followed by ``(bucket:prefix)`` when the
    lines hold one topic under several routes (``targets``: by route index)."""

    def target(index: int) -> str:
        return targets[index] if index < len(targets) else ""

    shared = _shared_topics((tp.topic, target(index)) for index, tp in keys)

    def label(index: int, tp: TopicPartition) -> str:
        return f"{tp} ({target(index)})" if tp.topic in shared else str(tp)

    return label


def usd(amount: float) -> str:
    """Dollars to 4 significant digits (at least the cent), without trailing zeros:
    ``$0.0002198``, ``$1.5``, ``$1234.57``, ``$0``."""
    if amount <= 0:
        return "$0"
    decimals = max(2, 3 - math.floor(math.log10(amount)))
    return "$" + f"{amount:.{decimals}f}".rstrip("0").rstrip(".")


def render_requests(requests: S3Requests, prices: S3Prices) -> str:
    """``S3: 57 requests (40 PUT, 3 LIST, 12 GET, 2 DELETE), est. $0.000212``: the types sent,
    as AWS bills them, and their estimated price."""
    kinds = ", ".join(f"{n} {kind}" for kind, n in requests.counts)
    return f"S3: {requests.total} requests ({kinds}), est. {usd(prices.cost(requests))}"


def write_report(
    path: Path | None,
    command: str,
    summary: Mapping[str, Any],
    requests: S3Requests,
    prices: S3Prices,
) -> None:
    """A command's ``--report FILE`` (nothing without one), in run's report format: the
    summary as JSON with ``s3_requests`` by type and ``s3_cost_usd`` (``requests_json``),
    written atomically (``report.write_atomically``). ``command`` names the command."""
    if path is None:
        return
    document = {"command": command, **summary, **requests_json(requests, prices)}
    write_atomically(path, json.dumps(document, indent=2) + "\n")


def requests_lines(requests: S3Requests, prices: S3Prices) -> list[str]:
    """Every command's S3 line (:func:`render_requests`; none when nothing was sent): run,
    follow, status, verify, restore and compact print it with their result, ``cat`` on
    stderr (its stdout is the records)."""
    return [render_requests(requests, prices)] if requests.total else []


def render_summary(result: RunResult, prices: S3Prices = LIST_PRICES) -> str:
    """Per partition the offset range archived, then totals with elapsed time and MB/s, and
    the S3 requests with their estimated price."""
    lines = [f"job {result.job} (run {result.run_id})"]
    label = _labeller(
        result.targets,
        [(u.route_index, u.tp) for u in result.units]
        + [(g.route_index, g.tp) for g in result.gaps],
    )
    for unit in result.units:
        if unit.next_offset <= unit.start:
            continue
        lines.append(
            f"  {label(unit.route_index, unit.tp)}: offsets {unit.start}..{unit.next_offset - 1}  "
            f"{unit.records} records, {len(unit.objects)} object(s), {human_bytes(unit.bytes)}"
        )
        if unit.skipped_records:
            lines.append(
                f"    {unit.skipped_records} record(s) the format cannot store were "
                "skipped (error.policy=skip)"
            )
        if unit.dead_letters:
            lines.append(
                f"    {unit.dead_letters} record(s) the format cannot store went to "
                f"{unit.dead_letter_key}"
            )
    for gap in result.gaps:
        then = (
            f"continued at offset {gap.last + 1} (allow_gaps)"
            if gap.passed
            else f"partition left at offset {gap.first}"
        )
        lines.append(
            f"  {label(gap.route_index, gap.tp)}: GAP offsets {gap.first}..{gap.last} "
            f"({gap.records} records) deleted by Kafka before they were archived; {then}"
        )
    up_to_date = [s for s in result.skipped if s.reason == "nothing new"]
    if not result.units and not result.gaps:
        lines.append(f"  nothing new to archive ({len(up_to_date)} partition(s) up to date)")
    elif up_to_date:
        lines.append(f"  {len(up_to_date)} partition(s) had nothing new")
    seconds = max(result.seconds, 1e-9)
    rate = result.bytes / 1_000_000 / seconds
    lines.append(
        f"total: {result.records} records, {human_bytes(result.bytes)}, {result.objects} "
        f"object(s) in {result.seconds:.1f} s ({rate:.2f} MB/s)"
    )
    lines.extend(requests_lines(result.s3_requests, prices))
    if result.timings is not None and result.units:
        lines.append(render_timings(result.timings))
    return "\n".join(lines)


def _span(first: int | None, last: int | None) -> str:
    if first is None:
        return ""
    return f"offset {first}" if last in (None, first) else f"offsets {first}..{last}"


def render_verify(result: VerifyResult, prices: S3Prices = LIST_PRICES) -> str:
    """Per partition: what was checked and every discrepancy, the S3 requests and their
    estimated price, then the verdict."""
    how = "offline (objects and state only)" if result.offline else "against Kafka"
    lines = [f"job {result.job}: verified {how}"]
    label = _labeller(result.targets, [(v.route_index, v.tp) for v in result.partitions])
    for v in result.partitions:
        checked = (
            f"offsets {v.checked_from}..{v.checked_to - 1} compared"
            if v.checked_from is not None and v.checked_to is not None
            else "nothing compared with Kafka"
        )
        verdict = "ok" if v.clean else f"{len(v.discrepancies)} problem(s)"
        committed = "no state" if v.committed is None else f"committed up to {v.committed}"
        lines.append(
            f"  {label(v.route_index, v.tp)}: {verdict} ({committed}; {v.objects} object(s), "
            f"{v.records} records; {checked}){' RE-CREATED' if v.recreated else ''}"
        )
        for d in v.discrepancies:
            where = " ".join(part for part in (_span(d.first_offset, d.last_offset), d.key) if part)
            lines.append(f"    {where}: {d.problem}" if where else f"    {d.problem}")
        if v.unverifiable_objects:
            lines.append(
                f"    note: {v.unverifiable_objects} object(s) begin before Kafka's "
                "retained offsets and were checked offline only"
            )
        if v.unarchivable_records:
            lines.append(
                f"    note: {v.unarchivable_records} record(s) cannot be stored in "
                "this format and are not expected in the archive"
            )
        lines.extend(f"    note: {note}" for note in v.notes)
    told: set[int] = set()
    for v in result.partitions:
        if v.recreated and v.route_index not in told:
            told.add(v.route_index)
            where = f" ({result.targets[v.route_index]})" if result.targets else ""
            lines.append(f"  {v.tp.topic}{where}: RE-CREATED (checked offline only): {v.recreated}")
    problems = sum(len(v.discrepancies) for v in result.partitions)
    lines.extend(requests_lines(result.s3_requests, prices))
    lines.append(
        f"{'clean' if result.clean else 'NOT CLEAN'}: {len(result.partitions)} partition(s), "
        f"{result.objects} object(s), {result.records} records, {problems} problem(s) "
        f"in {result.seconds:.1f} s"
    )
    return "\n".join(lines)


def render_restore(result: RestoreRun, prices: S3Prices = LIST_PRICES) -> str:
    """Per archived partition what was produced, then the total and the S3 requests with
    their estimated price."""
    lines = [f"restored into {result.to_topic}"]
    for unit in result.units:
        resumed = "" if unit.resumed_from is None else f" (resumed at offset {unit.resumed_from})"
        upto = "" if unit.next_offset is None else f", up to archived offset {unit.next_offset - 1}"
        lines.append(f"  {unit.tp}: {unit.records} records{upto}{resumed}")
    lines.append(f"total: {result.records} records in {result.seconds:.1f} s")
    lines.extend(requests_lines(result.s3_requests, prices))
    return "\n".join(lines)


def render_plan(document: dict[str, Any]) -> str:
    """``plan``: the job, each route and its KCQL, every setting with its source."""
    lines = [f"job: {document['job']}"]
    for number, route in enumerate(document["routes"], start=1):
        lines.append(
            f"route {number}: {route['topic']} -> s3://{route['bucket']}/"
            f"{route['prefix']}  ({route['format']})"
        )
        lines.append(f"  kcql: {route['kcql']}")
    lines.append("settings:")
    for name, shown in document["settings"].items():
        lines.append(f"  {name} = {shown['value']!r}  ({shown['source']})")
    return "\n".join(lines)


def render_status(report: JobStatus, prices: S3Prices = LIST_PRICES) -> str:
    """``status``: one row per partition, then the S3 requests with their estimated price."""
    lines = [
        f"job {report.job}",
        f"  {'partition':<32} {'archived':>12} {'end':>12} {'lag':>10} "
        f"{'objects':>8} {'bytes':>14}  last commit",
    ]
    shared = _shared_topics((row.topic, row.target) for row in report.partitions)
    for row in report.partitions:
        archived = "-" if row.archived_offset is None else str(row.archived_offset)
        name = f"{row.topic}-{row.partition}"
        if row.topic in shared:  # one topic archived to several places
            name += f" ({row.target})"
        lines.append(
            f"  {name:<32} {archived:>12} "
            f"{row.end_offset:>12} {row.lag:>10} {row.objects:>8} {row.bytes:>14}  "
            f"{row.last_commit or 'never'}{'  RE-CREATED' if row.recreated else ''}"
        )
    for row in report.partitions:
        if row.lost and row.archived_offset is not None:
            lines.append(f"  {gap_line(row)}")
    for row in report.partitions:
        for what, ranges in (("erased", row.erased), ("expired", row.expired)):
            if ranges:
                lines.append(f"  {row.topic}-{row.partition}: {removal_text(what, ranges)}")
    told: set[tuple[str, str]] = set()
    for row in report.partitions:
        if row.recreated and (row.topic, row.target) not in told:
            told.add((row.topic, row.target))
            where = f" ({row.target})" if row.topic in shared else ""
            lines.append(f"  {row.topic}{where}: RE-CREATED: {row.recreated}")
    lines.extend(requests_lines(report.s3_requests, prices))
    return "\n".join(lines)


def removal_text(what: str, ranges: Sequence[tuple[int, int]]) -> str:
    """``erased offsets 3..4, 9 (3 records)``: offsets erase or expire removed."""
    count = sum(b - a + 1 for a, b in ranges)
    return f"{what} offsets {offset_ranges(ranges)} ({count} records, kafka-archive {what[:-1]})"


def gap_line(row: PartitionStatus) -> str:
    """A partition whose next records to archive Kafka deleted (``status``)."""
    assert row.archived_offset is not None
    last = row.archived_offset + row.lost - 1
    return (
        f"{row.topic}-{row.partition}: GAP offsets {row.archived_offset}..{last} ({row.lost} "
        "records) deleted by Kafka before they were archived; runs stop there (exit 16) "
        "until --allow-gaps passes it"
    )


def render_timings(timings: BatchTimings) -> str:
    """Where a batch's time went: the work (the longest unit) and the overhead around it."""
    started = f"; Spark started in {timings.spark_start:.2f} s" if timings.spark_start > 0 else ""
    return (
        f"time: plan {timings.plan:.2f} s, Spark job {timings.spark_job:.2f} s (tasks' work "
        f"{timings.work:.2f} s), commit {timings.commit:.2f} s; overhead "
        f"{timings.overhead:.2f} s{started}"
    )


def render_follow(totals: FollowResult, prices: S3Prices = LIST_PRICES) -> str:
    """The totals of ``run --follow`` once it stopped."""
    line = (
        f"stopped after {totals.batches} batch(es): {totals.records} records, "
        f"{human_bytes(totals.bytes)}, {totals.objects} object(s) in {totals.seconds:.1f} s"
    )
    if not totals.s3_requests.total:
        return line
    return f"{line}\n{render_requests(totals.s3_requests, prices)}"

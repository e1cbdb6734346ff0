"""The status page of ``run --follow --metrics-port N`` (``/``) and its data (``/status.json``).

Pure: what the metrics server knows (the job, the last status, the last batches, the errors
it kept) in, HTML or a JSON document out. The HTML is rendered on the server: no script, a
``<meta http-equiv="refresh">`` reloads it. Every text is escaped (topic names, targets and
error messages may hold anything). It shows what ``status`` shows and the job's routes
(topic, target, format), never a setting: no credential can appear, and error messages
arrive scrubbed (:meth:`.metrics_server.MetricsServer.failed`).
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from kafka_archive.archiver.commands.status import JobStatus, PartitionStatus
from kafka_archive.archiver.core.model import RunResult
from kafka_archive.kcql.plan import Plan

ERRORS_WINDOW = 3600.0  # the page shows the errors of the last hour
REFRESH_SECONDS = 5


@dataclass(frozen=True, slots=True)
class RouteLine:
    """One statement: which topic goes where, in what format (nothing else of it)."""

    topic: str
    target: str
    format: str


@dataclass(frozen=True, slots=True)
class JobLine:
    name: str
    routes: tuple[RouteLine, ...]
    started: float  # Unix time the process started serving


@dataclass(frozen=True, slots=True)
class BatchLine:
    """A micro-batch as the page shows it: when it ended, how long it took, what it wrote
    (``ok=False``: it failed after its units committed this much)."""

    ended: float
    seconds: float
    records: int
    bytes: int
    objects: int
    ok: bool

    @classmethod
    def of(cls, result: RunResult, ended: float, *, ok: bool) -> BatchLine:
        return cls(ended, result.seconds, result.records, result.bytes, result.objects, ok)


@dataclass(frozen=True, slots=True)
class ErrorLine:
    at: float  # Unix time
    kind: str  # the error's class, as in kafka_archive_errors_total{error=…}
    message: str  # one line, scrubbed


@dataclass(frozen=True, slots=True)
class PageData:
    job: JobLine
    now: float
    batches: int  # micro-batches that finished
    failed_batches: int  # micro-batches that failed on a retriable error
    last: BatchLine | None
    last_archived: BatchLine | None  # the last batch that wrote records
    status: JobStatus | None  # None: not known yet
    errors: tuple[ErrorLine, ...]  # all the server kept; the page shows the last hour's


def routes_of(plan: Plan) -> tuple[RouteLine, ...]:
    return tuple(
        RouteLine(
            route.topic,
            str(route.target),
            route.format.value + (" (Iceberg table)" if route.iceberg is not None else ""),
        )
        for route in plan.routes
    )


def recent_errors(page: PageData) -> list[ErrorLine]:
    """The errors of the last hour, newest first."""
    recent = [e for e in page.errors if e.at >= page.now - ERRORS_WINDOW]
    return sorted(recent, key=lambda e: e.at, reverse=True)


def _iso(when: float) -> str:
    moment = datetime.datetime.fromtimestamp(when, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _ago(when: float, now: float) -> str:
    return f"{_iso(when)} ({max(now - when, 0.0):.0f} s ago)"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _cell(name: str, value: object, tag: str = "td") -> str:
    return f'<{tag} data-cell="{_e(name)}">{_e(value)}</{tag}>'


def _row(cells: Iterable[str]) -> str:
    return "<tr>" + "".join(cells) + "</tr>"


def _header(*names: str) -> str:
    return _row(f"<th>{_e(n)}</th>" for n in names)


_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; }
th, td { border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: left; }
td.n, th.n { text-align: right; }
tr.lagging td { background: #fff4d6; }
tr.failed td, table.errors td { background: #fde2e2; }
.muted { color: #666; }
"""


def _routes_table(job: JobLine) -> str:
    rows = [_header("topic", "target", "format")]
    for i, route in enumerate(job.routes):
        rows.append(
            _row(
                [
                    _cell(f"route-{i}-topic", route.topic),
                    _cell(f"route-{i}-target", route.target),
                    _cell(f"route-{i}-format", route.format),
                ]
            )
        )
    return '<table id="routes">' + "".join(rows) + "</table>"


def _note(row: PartitionStatus) -> str:
    if row.recreated is not None:
        return f"RE-CREATED: {row.recreated}"
    if row.lost:
        return f"gap: {row.lost} offsets deleted before they were archived"
    return ""


def _partition_row(row: PartitionStatus) -> str:
    name = f"{row.topic}[{row.partition}]@{row.target}"
    archived = "none" if row.archived_offset is None else row.archived_offset
    committed = "" if row.last_commit is None else row.last_commit
    cells = [
        _cell(f"{name}.topic", row.topic),
        _cell(f"{name}.partition", row.partition),
        _cell(f"{name}.target", row.target),
        _cell(f"{name}.archived", archived),
        _cell(f"{name}.end", row.end_offset),
        _cell(f"{name}.lag", row.lag),
        _cell(f"{name}.objects", row.objects),
        _cell(f"{name}.bytes", row.bytes),
        _cell(f"{name}.last_commit", committed),
        _cell(f"{name}.note", _note(row)),
    ]
    kind = ' class="lagging"' if row.lag or row.lost or row.recreated else ""
    return f"<tr{kind}>" + "".join(cells) + "</tr>"


_PARTITION_COLUMNS = (
    "topic",
    "partition",
    "target",
    "archived offset",
    "Kafka end offset",
    "lag",
    "objects",
    "bytes",
    "last commit",
    "note",
)


def _partitions(page: PageData) -> str:
    if page.status is None:
        return '<div id="partitions">not known yet (no micro-batch has finished)</div>'
    header = _header(*_PARTITION_COLUMNS)
    ordered = sorted(page.status.partitions, key=lambda p: (p.target, p.topic, p.partition))
    rows = "".join(_partition_row(p) for p in ordered)
    return f'<div id="partitions"><table>{header}{rows}</table></div>'


def _batch(name: str, batch: BatchLine | None, now: float) -> str:
    if batch is None:
        return f'<div id="{name}">none yet</div>'
    outcome = "finished" if batch.ok else "failed after committing this"
    cells = [
        _cell(f"{name}.ended", _ago(batch.ended, now)),
        _cell(f"{name}.seconds", f"{batch.seconds:.2f} s"),
        _cell(f"{name}.records", batch.records),
        _cell(f"{name}.objects", batch.objects),
        _cell(f"{name}.bytes", batch.bytes),
        _cell(f"{name}.outcome", outcome),
    ]
    header = _header("ended", "duration", "records", "objects", "bytes", "")
    kind = "" if batch.ok else ' class="failed"'
    return f'<div id="{name}"><table>{header}<tr{kind}>{"".join(cells)}</tr></table></div>'


def _errors(page: PageData) -> str:
    recent = recent_errors(page)
    if not recent:
        return '<div id="errors">none in the last hour</div>'
    rows = [_header("when", "error", "message")]
    for i, error in enumerate(recent):
        rows.append(
            _row(
                [
                    _cell(f"error-{i}.at", _ago(error.at, page.now)),
                    _cell(f"error-{i}.kind", error.kind),
                    _cell(f"error-{i}.message", error.message),
                ]
            )
        )
    return f'<div id="errors"><table class="errors">{"".join(rows)}</table></div>'


def render_html(page: PageData, *, refresh_seconds: int = REFRESH_SECONDS) -> str:
    """The whole page (UTF-8 text; no script)."""
    job = page.job
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="refresh" content="{int(refresh_seconds)}">',
            f"<title>kafka-archive: {_e(job.name)}</title><style>{_STYLE}</style></head><body>",
            f'<h1>kafka-archive job <span id="job">{_e(job.name)}</span></h1>',
            f'<p>Following since <span id="started">{_e(_iso(job.started))}</span>: ',
            f'<span id="batches">{page.batches}</span> micro-batch(es) finished, ',
            f'<span id="failed_batches">{page.failed_batches}</span> failed. ',
            f'<span class="muted">As of <span id="now">{_e(_iso(page.now))}</span>, ',
            f"reloaded every {int(refresh_seconds)} s; the same as JSON: ",
            '<a href="status.json">status.json</a>.</span></p>',
            "<h2>Routes</h2>",
            _routes_table(job),
            "<h2>Partitions</h2>",
            _partitions(page),
            "<h2>Last micro-batch</h2>",
            _batch("last", page.last, page.now),
            "<h2>Last micro-batch that archived records</h2>",
            _batch("last_archived", page.last_archived, page.now),
            "<h2>Errors of the last hour</h2>",
            _errors(page),
            "</body></html>\n",
        ]
    )


def _batch_json(batch: BatchLine | None) -> dict[str, Any] | None:
    if batch is None:
        return None
    document = asdict(batch)
    document["ended"] = _iso(batch.ended)
    return document


def page_json(page: PageData) -> dict[str, Any]:
    """The page's data (``/status.json``); ``partitions`` as ``status --output json`` has
    them, null until the first micro-batch has finished."""
    return {
        "job": {
            "name": page.job.name,
            "routes": [asdict(r) for r in page.job.routes],
            "started": _iso(page.job.started),
        },
        "now": _iso(page.now),
        "batches": page.batches,
        "failed_batches": page.failed_batches,
        "last": _batch_json(page.last),
        "last_archived": _batch_json(page.last_archived),
        "partitions": None if page.status is None else page.status.to_json()["partitions"],
        "errors": [
            {"at": _iso(e.at), "kind": e.kind, "message": e.message} for e in recent_errors(page)
        ],
    }

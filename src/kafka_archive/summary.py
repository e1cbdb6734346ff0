"""Human-readable renderings of run results, for the CLI."""

from __future__ import annotations

from kafka_archive.archiver.model import RunResult


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def render_summary(result: RunResult) -> str:
    """Per partition the offset range archived, then totals with elapsed time and MB/s."""
    lines = [f"job {result.job} (run {result.run_id})"]
    for unit in result.units:
        if unit.next_offset <= unit.start:
            continue
        lines.append(
            f"  {unit.tp}: offsets {unit.start}..{unit.next_offset - 1}  "
            f"{unit.records} records, {len(unit.objects)} object(s), {human_bytes(unit.bytes)}"
        )
    up_to_date = [s for s in result.skipped if s.reason == "nothing new"]
    if not result.units:
        lines.append(f"  nothing new to archive ({len(up_to_date)} partition(s) up to date)")
    elif up_to_date:
        lines.append(f"  {len(up_to_date)} partition(s) had nothing new")
    seconds = max(result.seconds, 1e-9)
    rate = result.bytes / 1_000_000 / seconds
    lines.append(
        f"total: {result.records} records, {human_bytes(result.bytes)}, {result.objects} "
        f"object(s) in {result.seconds:.1f} s ({rate:.2f} MB/s)"
    )
    return "\n".join(lines)

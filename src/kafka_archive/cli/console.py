"""How a run shows its progress: a live display on a terminal, log lines everywhere else.

:class:`LogProgress` writes one log line per step and one per finished unit (so ``--quiet``
and ``--log-format json`` apply, and CI logs stay readable). :class:`LiveProgress` draws,
on a terminal, units done / total, records, MB/s and the records still to read (the lag of
this run), refreshed as tasks report; log lines print above it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from kafka_archive.archiver.spark.progress import UnitProgress
from kafka_archive.cli.output import human_bytes

log = logging.getLogger("kafka_archive.progress")


def _name(unit: UnitProgress) -> str:
    return f"{unit.topic}[{unit.partition}]"


class _Board:
    """The latest update of each unit of the running Spark job (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.units: dict[tuple[int, str, int], UnitProgress] = {}
        self.started: dict[tuple[int, str, int], float] = {}
        self.since = time.monotonic()

    @staticmethod
    def key(unit: UnitProgress) -> tuple[int, str, int]:
        return (unit.route_index, unit.topic, unit.partition)

    def reset(self, units: Sequence[UnitProgress]) -> None:
        with self._lock:
            self.units = {self.key(u): u for u in units}
            self.started = {}
            self.since = time.monotonic()

    def put(self, update: UnitProgress) -> tuple[UnitProgress | None, float]:
        """Store ``update``; returns the previous state and the unit's seconds so far."""
        key = self.key(update)
        with self._lock:
            previous = self.units.get(key)
            self.units[key] = update
            begun = self.started.setdefault(key, time.monotonic())
        return previous, time.monotonic() - begun

    def snapshot(self) -> list[UnitProgress]:
        with self._lock:
            return list(self.units.values())


def _done_line(unit: UnitProgress, seconds: float) -> str:
    if unit.failed:
        return f"{_name(unit)}: stopped at offset {unit.offset} (the error follows)"
    # Offline verify reads no offsets: then the line names none.
    read = f"offsets {unit.start}..{unit.offset - 1}: " if unit.offset > unit.start else ""
    return (
        f"{_name(unit)}: {read}{unit.records:,} records, "
        f"{human_bytes(unit.size)}, {unit.objects} object(s) in {seconds:.1f} s"
    )


class LogProgress:
    """Progress as log lines: each step, and one line per unit when it ends."""

    def __init__(self) -> None:
        self._board = _Board()

    def step(self, message: str) -> None:
        log.info(message)

    def units_started(self, units: Sequence[UnitProgress]) -> None:
        self._board.reset(units)

    def unit_update(self, update: UnitProgress) -> None:
        previous, seconds = self._board.put(update)
        if update.done and not (previous is not None and previous.done):
            (log.warning if update.failed else log.info)(_done_line(update, seconds))

    def units_ended(self) -> None:
        return None


class LiveProgress(LogProgress):
    """A rich live display on the terminal while Spark runs the units; log lines above it."""

    def __init__(self, console: Any) -> None:
        super().__init__()
        self._console = console
        self._live: Any = None

    def units_started(self, units: Sequence[UnitProgress]) -> None:
        from rich.live import Live  # rich is heavy: imported for a terminal only

        super().units_started(units)
        self._live = Live(
            self._render(),
            console=self._console,
            refresh_per_second=4,
            transient=True,
            get_renderable=self._render,
        )
        self._live.start()

    def units_ended(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _render(self) -> Any:
        from rich.table import Table  # rich is heavy: imported for a terminal only

        units = self._board.snapshot()
        done = sum(1 for u in units if u.done)
        records = sum(u.records for u in units)
        size = sum(u.size for u in units)
        remaining = sum(u.remaining for u in units)
        elapsed = max(time.monotonic() - self._board.since, 1e-3)
        table = Table.grid(padding=(0, 2))
        table.add_row(
            f"[bold]units {done}/{len(units)}[/]",
            f"{records:,} records",
            human_bytes(size),
            f"{size / 1e6 / elapsed:.1f} MB/s",
            f"to read {remaining:,}",
        )
        running = [u for u in units if not u.done and u.offset > u.start]
        for unit in running[:8]:
            span = max(unit.stop - unit.start, 1)
            share = (unit.offset - unit.start) / span
            table.add_row(
                f"  {_name(unit)}",
                f"{unit.records:,} records",
                human_bytes(unit.size),
                f"{share:.0%}",
                f"to read {unit.remaining:,}",
            )
        if len(running) > 8:
            table.add_row(f"  … {len(running) - 8} more running", "", "", "", "")
        return table

"""The state of one invocation of the CLI: how it speaks on stderr and whether its progress
may be drawn live.

``main`` makes an :class:`Invocation` before click parses the command line (so that a usage
error is a JSON line too under ``--log-format json``) and hands it to click as the context's
object; the group's callback sets it from the parsed options. Nothing of it is module state:
each call of ``main`` has its own.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import click

from kafka_archive.cli.console import LiveProgress, LogProgress


class CurrentStderr:
    """sys.stderr as it is at each write: a live display swaps it to print above itself."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log shippers."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        exit_code = getattr(record, "exit_code", None)
        if exit_code is not None:
            line["exit_code"] = exit_code
        return json.dumps(line)


def json_requested(args: Sequence[str]) -> bool:
    """Whether the command line asks for --log-format json (read before click parses it, so
    that a usage error is a JSON line too)."""
    for index, arg in enumerate(args):
        if arg == "--log-format=json" or (
            arg == "--log-format" and args[index + 1 : index + 2] == ["json"]
        ):
            return True
    return False


@dataclass(slots=True)
class Invocation:
    """``json_lines``: --log-format json, so the lines the CLI writes itself (the final
    error, warnings, notices) are JSON objects too, not only the log's. ``live``: a live
    display is allowed (not --quiet, not --log-format json)."""

    json_lines: bool = False
    live: bool = False

    def line(self, message: str, level: int = logging.INFO, exit_code: int | None = None) -> str:
        """``kafka-archive: message``, or under --log-format json one JSON object (its
        message may hold several lines, a KCQL error's)."""
        if not self.json_lines:
            return f"kafka-archive: {message}"
        record = logging.makeLogRecord(
            {
                "name": "kafka_archive",
                "levelno": level,
                "levelname": logging.getLevelName(level),
                "msg": message,
                "exit_code": exit_code,
            }
        )
        return JsonFormatter().format(record)

    def say(self, message: str, level: int = logging.INFO, exit_code: int | None = None) -> None:
        """One line on stderr (:meth:`line`)."""
        click.echo(self.line(message, level, exit_code), err=True)

    def progress(self) -> LogProgress:
        """A live display on a terminal (unless --quiet or --log-format json), else log
        lines."""
        if self.live and sys.stderr.isatty():
            from rich.console import Console  # rich is heavy: imported for a terminal only

            return LiveProgress(Console(stderr=True))
        return LogProgress()


def current() -> Invocation:
    """The invocation of the running command (a default one when click was called without
    ``main``)."""
    return click.get_current_context().ensure_object(Invocation)

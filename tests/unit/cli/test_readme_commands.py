"""The front door cannot lie: every `kafka-archive` command line in the README and the docs
names a command that exists, with options that command has (read with click's own
declarations of the CLI, not a list kept by hand)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from kafka_archive.cli import cli

ROOT = Path(__file__).resolve().parents[3]
DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    ROOT / "bench" / "README.md",
]


def _command_lines(text: str) -> list[str]:
    """`kafka-archive …` in fenced blocks (continued lines joined, a `$ ` prompt and `VAR=value`
    assignments before the command dropped) and in inline code spans."""
    found: list[str] = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.strip().removeprefix("$ ")
            for part in re.split(r"&&|\|", line):
                # VAR=value before the command sets its environment
                part = re.sub(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)+", "", part.strip())
                if part.startswith("kafka-archive "):
                    found.append(part)
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    found += [m for m in re.findall(r"`(kafka-archive [^`]+)`", prose)]
    return found


def _options(command: click.Command) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")}


def _lines() -> list[tuple[str, str]]:
    return [(d.name, line) for d in DOCUMENTS for line in _command_lines(d.read_text())]


def test_the_documents_have_command_lines_to_check() -> None:
    assert len(_lines()) >= 10


@pytest.mark.parametrize(("document", "line"), _lines())
def test_every_documented_command_line_names_a_command_and_options_that_exist(
    document: str, line: str
) -> None:
    try:
        words = shlex.split(line.replace("…", ""))
    except ValueError:
        words = line.replace("…", "").split()
    assert isinstance(cli, click.Group)
    group_options = _options(cli)
    args = iter(words[1:])
    name = None
    for word in args:
        if word in group_options:
            if word == "--log-format":
                next(args, None)
            continue
        name = word
        break
    if name is None or name.startswith("-"):
        assert name in (None, "--help", "-h", "--version"), (document, line)
        return
    command = cli.get_command(click.Context(cli), name)
    assert command is not None, f"{document}: `{line}` names no command {name!r}"
    known = _options(command) | group_options | {"--help", "-h"}
    if name == "submit":  # takes every option of run, passed on
        run = cli.get_command(click.Context(cli), "run")
        assert run is not None
        known |= _options(run)
    for word in args:
        if word.startswith("--"):
            option = word.split("=", 1)[0]
            assert option in known, f"{document}: `{line}`: {name} has no option {option}"

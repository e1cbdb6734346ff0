"""Write the reference pages of the manual from the code's own tables (`make docs`).

- ``docs/reference/options.md``: the settings of ``kafka_archive.archiver.config.options.OPTIONS``
  (config key, environment variable, default, meaning) with the flag that sets each, and the
  other flags of ``run`` from click's declarations;
- ``docs/reference/properties.md``: ``PROPERTIES('key'=value)`` from
  ``kafka_archive.kcql.properties.PROPERTY_SPECS``, and the older clauses that state them;
- ``docs/reference/exit-codes.md``: the exit codes of the ``ArchiveError`` families of
  ``kafka_archive.archiver.core.errors`` (``exit_code``, ``meaning``, ``retriable``).

``tests/unit/docs/test_reference_pages.py`` renders them in memory and fails when a committed
page differs: change the table in the code, then run ``make docs``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import click

from kafka_archive.archiver.config import options
from kafka_archive.archiver.core import errors
from kafka_archive.cli import cli
from kafka_archive.kcql.properties import (
    LEGACY_PROPERTIES,
    PARTITIONERS,
    PROPERTY_SPECS,
    Kind,
    PropertySpec,
)

DOCS = Path(__file__).resolve().parent
REFERENCE = DOCS / "reference"

_NOTICE = (
    "<!-- Written by docs/gen_reference.py (`make docs`) from {source}: edit the code's table, "
    "not this page. -->\n"
)


def _cell(text: str) -> str:
    """Text as one Markdown table cell: ``<name>`` shown as written, not taken for HTML
    (outside code spans, where Markdown would not decode ``&lt;``)."""
    parts = " ".join(text.split()).split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).replace("|", "\\|")


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _command(name: str) -> click.Command:
    assert isinstance(cli, click.Group)
    command = cli.get_command(click.Context(cli), name)
    assert command is not None, name
    return command


def _flag(param: click.Parameter) -> str:
    names = [*param.opts, *param.secondary_opts]
    metavar = ""
    if isinstance(param, click.Option) and not param.is_flag:
        metavar = " " + (param.metavar or param.type.name.upper())
    return ", ".join(f"`{n}{metavar}`" for n in names)


def _default(value: object) -> str:
    if not isinstance(value, (str, int, float)) or value == "":
        return ""  # None, or click's sentinel of an option without default
    if isinstance(value, bool):
        return _code(str(value).lower())
    return _code(str(value))


def options_page() -> str:
    run = _command("run")
    by_name = {p.name: p for p in run.params}
    rows = []
    for option in options.OPTIONS:
        param = by_name.get(option.name)
        rows.append(
            (
                _code(option.name),
                _code(option.env),
                _flag(param) if param is not None else "",
                _default(option.default),
                option.help,
            )
        )
    in_settings = {option.name for option in options.OPTIONS}
    flags = [
        (_flag(p), _default(p.default) if not getattr(p, "is_flag", False) else "", _help(p))
        for p in run.params
        if p.name not in in_settings and p.name != "help"
    ]
    group = [(_flag(p), _default(p.default), _help(p)) for p in cli.params if p.name != "help"]
    return (
        "# Options and settings\n\n"
        + _NOTICE.format(source="`options.OPTIONS` and the click options of `run`")
        + "\n"
        "Every setting can come from the config file (`--config FILE`, YAML: the setting's "
        "name as key), from the environment (`KAFKA_ARCHIVE_<NAME>`) or, where it has one, "
        "from a flag; a flag wins over the environment, which wins over the file. An empty "
        "environment variable counts as unset. `run`, `plan`, `status`, `verify`, `submit`, "
        "`cat` and `restore` take the same connection and job settings. The config file also "
        "holds `kcql:` (a list of statements, as `--kcql`) and `kafka:` (librdkafka "
        "properties, as `-X`).\n\n"
        "## Settings\n\n"
        + _table(("setting", "environment", "flag", "default", "meaning"), rows)
        + "\n## Other flags of `run`\n\n"
        + _table(("flag", "default", "meaning"), flags)
        + "\n## Options of every command\n\n"
        "Given before the command's name (`kafka-archive --debug run …`).\n\n"
        + _table(("option", "default", "meaning"), group)
        + "\nEvery command and its options, as `--help` shows them: "
        "[the command line](cli.md).\n"
    )


def _help(param: click.Parameter) -> str:
    return getattr(param, "help", None) or ""


def _value(spec: PropertySpec) -> str:
    text = spec.kind.value
    if spec.choices:
        text += ": " + ", ".join(f"`{c}`" for c in spec.choices)
    if spec.kind is Kind.INT:
        bounds = f"at least {spec.minimum:,}"
        if spec.maximum is not None:
            bounds += f", at most {spec.maximum:,}"
        text += f" ({bounds})"
    return text


def properties_page() -> str:
    rows = [(_code(key), _value(spec), spec.description) for key, spec in PROPERTY_SPECS.items()]
    legacy = [(_code(clause), _code(key)) for clause, key in LEGACY_PROPERTIES.items()]
    partitioners = [
        (_code(f"WITHPARTITIONER = {name}"), _code(f"'partition.include.keys'={value}"))
        for name, value in PARTITIONERS.items()
    ]
    return (
        "# KCQL properties\n\n" + _NOTICE.format(source="`kcql.properties.PROPERTY_SPECS`") + "\n"
        "What `PROPERTIES('key'=value, …)` accepts, key by key. An unknown key, a value of "
        "another kind or outside its bounds, or a setting stated twice with different "
        "values is refused before anything runs (exit 2). What each does, with examples: "
        "[KCQL](../kcql.md), [formats and layouts](../formats.md), "
        "[Iceberg tables](../iceberg.md), [transforms](../transforms.md).\n\n"
        + _table(("property", "value", "meaning"), rows)
        + "\n## Clauses of the older KCQL\n\n"
        "The 5.x–6.x clauses state these properties (stating both, with different values, is "
        "refused):\n\n"
        + _table(("clause", "property"), legacy)
        + "\n"
        + _table(("partitioner", "property"), partitioners)
    )


def _error_families() -> list[type[errors.ArchiveError]]:
    """``ArchiveError`` and its subclasses in ``errors`` (not the finer kinds other modules
    derive from them, which exit as their family does)."""
    found: list[type[errors.ArchiveError]] = [errors.ArchiveError]
    for family in found:
        found += [c for c in family.__subclasses__() if c not in found]
    ours = [c for c in found if c.__module__ == errors.__name__]
    return sorted(ours, key=lambda c: (c.exit_code, c.__name__))


def exit_codes_page() -> str:
    rows = [("0", "success (including “nothing new”)", "", "")]
    for family in _error_families():
        rows.append(
            (
                str(family.exit_code),
                family.meaning,
                _code(family.__name__),
                "yes" if family.retriable else "",
            )
        )
    return (
        "# Exit codes\n\n"
        + _NOTICE.format(source="the `ArchiveError` families of `archiver.errors`")
        + "\n"
        "Every user mistake or unreachable system ends with one line on stderr (a traceback "
        "only with `--debug`) and one of these codes. `--follow` tries a micro-batch that "
        "failed with an error marked *yes* again (after a back-off) instead of exiting; see "
        "[errors and exit codes](../operations.md#errors-and-exit-codes) for what each "
        "looks like.\n\n"
        + _table(("code", "meaning", "error", "`--follow` retries"), rows)
        + "\nKCQL that does not parse or compile also exits 2, with the error pointed at; "
        "a command line click refuses (an unknown option, a missing value) too. `verify` "
        "exits 1 when it finds a discrepancy, `status --max-lag N` when a partition lags "
        "by more than N. Interrupted (Ctrl-C, or `--reset-state` not confirmed): 130.\n"
    )


def pages() -> dict[Path, str]:
    """Each reference page's path and its text, from the code as it is."""
    return {
        REFERENCE / "options.md": options_page(),
        REFERENCE / "properties.md": properties_page(),
        REFERENCE / "exit-codes.md": exit_codes_page(),
    }


def main(argv: Sequence[str]) -> int:
    REFERENCE.mkdir(exist_ok=True)
    for path, text in pages().items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(DOCS.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

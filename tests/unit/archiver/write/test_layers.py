"""The write path reads in one direction: each step imports only the steps below it, and the
format writers (a lower layer) import nothing of the write path (issue 36)."""

from __future__ import annotations

import ast
from pathlib import Path

import kafka_archive.archiver.formats as formats_package
import kafka_archive.archiver.write as write_package

WRITE = Path(write_package.__file__).parent
FORMATS = Path(formats_package.__file__).parent
PREFIX = "kafka_archive.archiver.write"

# The steps of one unit, top down: a module imports only modules after it in this list.
ORDER = [
    "rewrite",  # maintenance (issue 38): committed objects read, filtered, written again
    "task",  # read, and the unit's failure value
    "commit",  # dead letters, the partition state, the unit's result
    "chunks",  # route each record to its open object, roll by the flush policy
    "uploads",  # mark closed objects together, upload each create-only
    "objects",  # open, encode into, close or let go of one object
    "lifecycle",  # each object's stage, behind the lease's proofs
    "deadletter",
    "transforms",
    "flush",
]


def imported(path: Path) -> tuple[set[str], list[int]]:
    """The kafka_archive.archiver.write modules ``path`` imports (short names), and the lines
    of any import made inside a function."""
    found: set[str] = set()
    inner: list[int] = []
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inner += [
                n.lineno for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)
            ]
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith(PREFIX + "."):
                found.add(name[len(PREFIX) + 1 :].split(".")[0])
    return found, inner


def test_every_write_module_has_its_place() -> None:
    modules = {p.stem for p in WRITE.glob("*.py")} - {"__init__"}
    assert modules == set(ORDER)


def test_each_step_imports_only_the_steps_below_it() -> None:
    for name in ORDER:
        below = set(ORDER[ORDER.index(name) + 1 :])
        found, _ = imported(WRITE / f"{name}.py")
        assert found <= below, f"write/{name}.py imports {sorted(found - below)} (not below it)"


def test_the_formats_import_nothing_of_the_write_path() -> None:
    for path in sorted(FORMATS.glob("*.py")):
        found, _ = imported(path)
        assert not found, f"formats/{path.name} imports write/{sorted(found)}"


def test_no_write_module_imports_inside_a_function() -> None:
    for name in ORDER:
        _, inner = imported(WRITE / f"{name}.py")
        assert not inner, f"write/{name}.py imports inside a function at lines {inner}"

"""The size limits of the code (issue 36): no module of ``src`` over 600 lines, no function
over 80 lines unless it says why at its top (a first body line ``# Long because: ...``, or
a docstring sentence starting "Long because"). The offenders are listed. And no import
inside a function without its reason (a comment on or just above it, or its function's
docstring saying why it is imported there): the default is the top of the module.

:data:`ALLOWED` names today's offenders, each with its reason; an entry that is no longer
an offender fails too, so the list can only shrink. (The layers and the absence of import
cycles are import-linter's contracts in pyproject.toml, run by ``make lint``.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80

ALLOWED: dict[str, str] = {}
"""Offenders of today, by path (a module) or path::qualified name (a function)."""

_REASON = re.compile(r"(?:^|[.!?]\s+)Long because\b")


def _has_reason(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> bool:
    """Whether the function says why it is long, at its top."""
    docstring = ast.get_docstring(node)
    if docstring is not None and _REASON.search(docstring):
        return True
    head = lines[node.lineno : node.body[0].lineno]  # from the line after ``def``
    return any(line.strip().startswith("# Long because:") for line in head)


def _functions(
    tree: ast.AST, prefix: str = ""
) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function of ``tree`` with its qualified name (methods, nested functions)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            found.append((name, node))
            found += _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            found += _functions(node, f"{prefix}{node.name}.")
        else:
            found += _functions(node, prefix)
    return found


def offenders(root: Path) -> dict[str, str]:
    """What breaks the limits under ``root``, by path or path::function: what it is."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        if len(lines) > MAX_MODULE_LINES:
            found[where] = f"{len(lines)} lines"
        for name, node in _functions(ast.parse(text, where)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES and not _has_reason(node, lines):
                found[f"{where}::{name}"] = f"{length} lines, no 'Long because' at its top"
    return found


def test_no_module_or_function_is_over_its_limit() -> None:
    found = offenders(SRC)
    new = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not new, "over the limits (split it, or say why at its top):\n" + "\n".join(
        f"  {k}: {v}" for k, v in sorted(new.items())
    )


def test_the_allowed_offenders_only_shrink() -> None:
    found = offenders(SRC)
    gone = sorted(k for k in ALLOWED if k not in found)
    assert not gone, "no longer over the limits: remove from ALLOWED:\n" + "\n".join(
        f"  {k}" for k in gone
    )


def _imports_in_functions(
    node: ast.AST, function: ast.FunctionDef | ast.AsyncFunctionDef | None = None
) -> list[tuple[ast.Import | ast.ImportFrom, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every import statement inside a function, with the innermost function."""
    found: list[tuple[ast.Import | ast.ImportFrom, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom) and function is not None:
            found.append((child, function))
        inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
        found += _imports_in_functions(child, inner)
    return found


def _says_why(
    node: ast.Import | ast.ImportFrom,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    lines: list[str],
) -> bool:
    """Whether an import inside ``function`` gives its reason: a comment on its line, or
    above it (over the imports of its group, a ``try:`` and blank lines), or a docstring
    that says why the function imports."""
    if "#" in lines[node.lineno - 1]:
        return True
    for line in reversed(lines[: node.lineno - 1]):
        text = line.strip()
        if text.startswith("#"):
            return True
        if text and text != "try:" and not text.startswith(("import ", "from ")):
            break
    docstring = ast.get_docstring(function) or ""
    return "import" in docstring.lower()


def unexplained_imports(root: Path) -> list[str]:
    """``path:line`` of each import inside a function under ``root`` that says not why."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node, function in _imports_in_functions(ast.parse(text, where)):
            if not _says_why(node, function, lines):
                found.append(f"{where}:{node.lineno}")
    return found


def test_every_import_inside_a_function_says_why() -> None:
    found = unexplained_imports(SRC)
    assert not found, (
        "imports inside a function without a reason (move them to the top of the module, "
        "or say why in a comment):\n" + "\n".join(f"  {k}" for k in found)
    )


def test_an_import_inside_a_function_needs_its_reason(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "m.py",
        "import os\n\n\n"
        "def bare() -> None:\n    import json\n\n    json.dumps(1)\n\n\n"
        "def trailing() -> None:\n    import json  # heavy: on first use\n\n\n"
        "def above() -> None:\n    x = 1\n    # heavy: on first use\n"
        "    import json\n    from json import dumps\n\n\n"
        "def guarded() -> None:\n    # may be missing: say so in one line\n    try:\n"
        "        import json\n    except ImportError:\n        pass\n\n\n"
        'def documented() -> None:\n    """Imported here: heavy."""\n    import json\n\n\n'
        "def late() -> None:\n    # a comment about x\n    x = 1\n    import json\n\n\n"
        "def outer() -> None:\n    # heavy\n    import json\n\n"
        "    def inner() -> None:\n        import csv\n",
    )
    assert unexplained_imports(tmp_path) == ["m.py:5", "m.py:37", "m.py:45"]


def _write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _function(name: str, body_lines: int, top: str = "") -> str:
    body = "".join(f"    x{i} = {i}\n" for i in range(body_lines))
    return f"def {name}() -> None:\n{top}{body}"


def test_a_long_module_and_long_functions_are_found(tmp_path: Path) -> None:
    _write(tmp_path, "pkg/big.py", "x = 1\n" * (MAX_MODULE_LINES + 1))
    _write(tmp_path, "pkg/small.py", "x = 1\n" * MAX_MODULE_LINES)
    _write(
        tmp_path,
        "pkg/funcs.py",
        _function("fits", MAX_FUNCTION_LINES - 1)
        + _function("too_long", MAX_FUNCTION_LINES)
        + "class Session:\n"
        + "".join(f"    {line}\n" for line in _function("batch", 100).splitlines())
        + _function("outer", 5).replace("    x0 = 0\n", _nested(90)),
    )
    assert offenders(tmp_path) == {
        "pkg/big.py": f"{MAX_MODULE_LINES + 1} lines",
        "pkg/funcs.py::too_long": "81 lines, no 'Long because' at its top",
        "pkg/funcs.py::Session.batch": "101 lines, no 'Long because' at its top",
        "pkg/funcs.py::outer": "96 lines, no 'Long because' at its top",
        "pkg/funcs.py::outer.inner": "91 lines, no 'Long because' at its top",
    }


def _nested(body_lines: int) -> str:
    return "".join(f"    {line}\n" for line in _function("inner", body_lines).splitlines())


@pytest.mark.parametrize(
    "top",
    [
        "    # Long because: one table of cases, read top to bottom\n",
        '    """Parse it. Long because each flag is one branch."""\n',
        '    """Long because it is one state machine.\n\n    More.\n    """\n',
    ],
)
def test_a_long_function_that_says_why_passes(tmp_path: Path, top: str) -> None:
    _write(tmp_path, "m.py", _function("long", MAX_FUNCTION_LINES + 20, top))
    assert offenders(tmp_path) == {}


@pytest.mark.parametrize(
    "top",
    [
        "    x = 1\n    # Long because: not at the top\n",
        '    """Parse it, not long because of anything."""\n',
    ],
)
def test_a_reason_elsewhere_does_not_count(tmp_path: Path, top: str) -> None:
    _write(tmp_path, "m.py", _function("long", MAX_FUNCTION_LINES + 20, top))
    assert list(offenders(tmp_path)) == ["m.py::long"]

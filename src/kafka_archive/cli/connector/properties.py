"""A Java ``.properties`` text (connect-standalone's connector file) read as
``java.util.Properties.load`` reads it."""

from __future__ import annotations

import re

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str) -> dict[str, str]:
    """The settings of a Java .properties text: ``key=value``, ``key: value`` or
    ``key value``; escapes; continued lines."""
    settings: dict[str, str] = {}
    for line in _logical_lines(text):
        # The key ends at the first unescaped '=', ':' or blank.
        match = re.match(r"((?:\\.|[^=:\s\\])*)[ \t\f]*[=:]?[ \t\f]*(.*)\Z", line, re.S)
        assert match is not None  # the pattern matches any text
        settings[_unescape(match.group(1))] = _unescape(match.group(2))
    return settings


def _logical_lines(text: str) -> list[str]:
    """The logical lines of a .properties text: comments and blank lines dropped, a line
    ending in an odd number of backslashes joined with the next (its leading blanks
    dropped)."""
    lines: list[str] = []
    pending: str | None = None
    for natural in text.splitlines():
        line = natural.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        joined = line[:-1] if trailing % 2 else line
        pending = joined if pending is None else pending + joined
        if not trailing % 2:
            lines.append(pending)
            pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            escaped = text[i + 1]
            if escaped == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(escaped, escaped))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)

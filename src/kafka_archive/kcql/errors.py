"""KCQL errors: structured data with a position, what was expected, and a fix.

Every error knows where it happened (1-based line and column, end exclusive), a stable
``label`` that tests assert on, and how to show itself::

    kcql:1:83: unknown STOREAS format 'AVOR'. Did you mean 'AVRO'?
      … PARTITIONBY _header.country STOREAS `AVOR` WITH_FLUSH_COUNT = 5000
                                            ^^^^^^
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from kafka_archive.kcql.plan import Span

# How much of a long line to show on each side of the error.
_CONTEXT_BEFORE = 40
_CONTEXT_AFTER = 36
_ELLIPSIS = "…"


class KcqlError(Exception):
    """A KCQL text that cannot become a plan.

    Attributes:
        message: What is wrong, one line, no trailing period.
        hint: How to fix it (``Did you mean 'AVRO'?``), or ``None``.
        expected: What would have been accepted at this point, in words.
        label: A short stable name for the kind of error (``unknown-format``).
        setting: The property at fault (``layout.template``), when one is.
        span: Where in the text; ``None`` only for errors about no text at all.
        source: Names the text in messages (``kcql``, ``--kcql``, a file name).
        text: The whole KCQL text, when known, so that :meth:`render` can show the line.
    """

    def __init__(
        self,
        message: str,
        *,
        span: Span | None,
        hint: str | None = None,
        expected: Iterable[str] = (),
        label: str = "",
        source: str = "kcql",
        text: str | None = None,
        setting: str | None = None,
    ) -> None:
        self.message = message
        self.span = span
        self.hint = hint
        self.expected = tuple(expected)
        self.label = label
        self.setting = setting
        self.source = source
        self.text = text
        super().__init__(message)

    @property
    def line(self) -> int:
        return self.span.line if self.span else 1

    @property
    def column(self) -> int:
        return self.span.column if self.span else 1

    @property
    def end_line(self) -> int:
        return self.span.end_line if self.span else self.line

    @property
    def end_column(self) -> int:
        return self.span.end_column if self.span else self.column

    def located(self, *, text: str, source: str) -> KcqlError:
        """Attach the text and its name (done once, by :func:`kafka_archive.kcql.parse`)."""
        self.text = text
        self.source = source
        return self

    def __str__(self) -> str:
        hint = f". {self.hint}" if self.hint else ""
        return f"{self.source}:{self.line}:{self.column}: {self.message}{hint}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r}, label={self.label!r})"

    def render(self, text: str | None = None) -> str:
        """Return the one-line error, then the offending line with a caret run under the span.

        Args:
            text: The KCQL text the error came from; defaults to the text attached by
                :func:`kafka_archive.kcql.parse`.
        """
        text = self.text if text is None else text
        # Lark counts lines by "\n" only; so must we (splitlines also splits at \r, \f, …).
        lines = text.split("\n") if text is not None else []
        if self.span is None or not "".join(lines).strip() or not 1 <= self.line <= len(lines):
            return str(self)
        shown, caret_at, width = _excerpt(
            lines[self.line - 1].rstrip("\r").replace("\t", " "),
            self.column - 1,
            self.end_column - 1 if self.end_line == self.line else None,
        )
        return f"{self}\n  {shown}\n  {' ' * caret_at}{'^' * width}"


def _excerpt(line: str, start: int, end: int | None) -> tuple[str, int, int]:
    """Return the part of ``line`` to show, where the caret run starts in it, and its width.

    A long line is cut at whitespace around the error and the cuts are marked with ``…``.
    """
    start = min(start, len(line))
    end = len(line) if end is None else max(min(end, len(line)), start)
    width = max(end - start, 1)
    left = 0
    if start > _CONTEXT_BEFORE:
        cut = start - _CONTEXT_BEFORE
        space = line.find(" ", cut, start)
        left = space if space != -1 else cut
    right = len(line)
    if right - end > _CONTEXT_AFTER:
        cut = end + _CONTEXT_AFTER
        space = line.rfind(" ", end, cut)
        right = space if space != -1 else cut
    shown = line[left:right]
    caret_at = start - left
    if left > 0:
        shown = _ELLIPSIS + shown
        caret_at += len(_ELLIPSIS)
    if right < len(line):
        shown = shown + " " + _ELLIPSIS
    width = min(width, max(len(shown) - caret_at, 1))
    return shown, caret_at, width


class KcqlSyntaxError(KcqlError):
    """The text does not follow the grammar (``kcql.lark``)."""


class KcqlSemanticError(KcqlError):
    """The text parses but cannot be archived as written (unknown format, bad bucket, …)."""


def did_you_mean(name: str, choices: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """Return ``"Did you mean 'X'?"`` for the closest of ``choices``, or ``None``.

    Case is ignored when comparing; the suggestion keeps the spelling of the choice.
    """
    close = closest(name, choices, cutoff=cutoff)
    return f"Did you mean {close!r}?" if close is not None else None


def closest(name: str, choices: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The choice closest to ``name`` (case ignored), or ``None`` when none is close."""
    by_folded = {choice.casefold(): choice for choice in choices}
    close = difflib.get_close_matches(name.casefold(), list(by_folded), n=1, cutoff=cutoff)
    return by_folded[close[0]] if close else None


def one_of(words: Iterable[str]) -> str:
    """Join words as ``a, b or c``."""
    items = list(words)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " or " + items[-1]

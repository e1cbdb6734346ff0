"""KCQL text -> Lark tree, with syntax errors in words.

The grammar lives in ``kcql.lark`` and is loaded once, on first use (never at import time).
Lark's :class:`~lark.exceptions.UnexpectedInput` becomes a :class:`KcqlSyntaxError` that says
what was found and what would have been accepted, in words, with the message of the closest
labelled bad example from :mod:`~kafka_archive.kcql.examples` when one matches.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from copy import copy
from importlib import resources
from types import MappingProxyType
from typing import Any

import lark
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.parsers.lalr_parser_state import ParserState

from kafka_archive.cache import user_cache_dir
from kafka_archive.kcql.errors import KcqlSyntaxError, one_of
from kafka_archive.kcql.examples import KCQL_ERROR_EXAMPLES, UNTERMINATED_QUOTE, SyntaxLabel
from kafka_archive.kcql.plan import Span
from kafka_archive.kcql.syntax import Statement

_PACKAGE = "kafka_archive.kcql"
_GRAMMAR = "kcql.lark"

# Terminal names of kcql.lark, in words. The order is the order of "expected one of".
TERMINAL_WORDS: Mapping[str, str] = MappingProxyType(
    {
        "INSERT": "INSERT",
        "_INTO": "INTO",
        "_SELECT": "SELECT",
        "_AS": "AS",
        "_FROM": "FROM",
        "_PARTITIONBY": "PARTITIONBY",
        "NOPARTITION": "NOPARTITION",
        "_STOREAS": "STOREAS",
        "WITHPARTITIONER": "WITHPARTITIONER",
        "WITH_FLUSH_SIZE": "WITH_FLUSH_SIZE",
        "WITH_FLUSH_INTERVAL": "WITH_FLUSH_INTERVAL",
        "WITH_FLUSH_COUNT": "WITH_FLUSH_COUNT",
        "_PROPERTIES": "PROPERTIES",
        "TARGET": "a bucket name",
        "TOPIC": "a topic name",
        "NAME": "a name",
        "QUOTED": "a `back-ticked` name",
        "STRING": "a 'quoted' string",
        "INT": "a whole number",
        "STAR": "'*'",
        "_COMMA": "','",
        "_DOT": "'.'",
        "_COLON": "':'",
        "_EQUAL": "'='",
        "_LPAR": "'('",
        "_RPAR": "')'",
        "_SEMI": "';'",
        "$END": "end of input",
    }
)

# Keyword spelling -> terminal name (``"INTO"`` -> ``"_INTO"``).
KEYWORDS: Mapping[str, str] = MappingProxyType(
    {word: name for name, word in TERMINAL_WORDS.items() if word.isupper() and name != "$END"}
)
_KEYWORD_TERMINALS = frozenset(KEYWORDS.values())
# Word terminals that a reserved keyword must not be read as.
_WORD_TERMINALS = ("NAME", "TOPIC", "TARGET")


def _reserve_keywords(token: Token) -> Token:
    """Read a word that is exactly a keyword as that keyword, wherever it appears.

    The contextual lexer only tries the terminals the parser can accept next, so without
    this ``PARTITIONBY STOREAS JSON`` would partition by a field named ``STOREAS``.
    """
    keyword = KEYWORDS.get(token.value.upper())
    return Token.new_borrow_pos(keyword, token.value, token) if keyword else token


@functools.cache
def kcql_parser() -> Lark:
    """Return the KCQL parser, built from ``kcql.lark`` on first call.

    Building the LALR tables costs ~0.6 CPU-s (most of it Lark's check that no two terminals
    overlap), loading them from Lark's cache ~0.02 s: the cache is a file in the user's cache
    directory (never the shared temp directory: it is a pickle), which Lark checks against a
    hash of the grammar, its options and Lark's version, and rebuilds when it does not match
    or cannot be read.
    """
    return Lark.open_from_package(
        _PACKAGE,
        _GRAMMAR,
        cache=_cache_file(),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=True,
        lexer_callbacks=dict.fromkeys(_WORD_TERMINALS, _reserve_keywords),
    )


def _cache_file() -> str | bool:
    directory = user_cache_dir(os.environ)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return False
    grammar = resources.files(_PACKAGE).joinpath(_GRAMMAR).read_bytes()
    return str(directory / cache_name(grammar))


def cache_name(grammar: bytes) -> str:
    """The cache file of ``grammar``'s tables: one per grammar and Lark version, so that two
    installed versions of kafka-archive (a CLI and ``submit``'s driver, say) do not rebuild
    each other's tables on every run (~0.6 CPU-s), as one shared file made them do."""
    digest = hashlib.sha256(grammar + lark.__version__.encode()).hexdigest()[:16]
    return f"kcql-grammar-{digest}.lark-cache"


def can_be_bare(terminal: str, text: str) -> bool:
    """Whether ``text`` reads back as one ``terminal`` token (NAME, TOPIC, TARGET) unquoted.

    ``render.py`` asks this, so that the grammar stays the only definition of a bare word.
    """
    return bool(_terminal_pattern(terminal).fullmatch(text)) and text.upper() not in KEYWORDS


@functools.cache
def _terminal_pattern(name: str) -> re.Pattern[str]:
    terminal = kcql_parser().get_terminal(name)
    return re.compile(terminal.pattern.to_regexp(), _flags(terminal.pattern.flags))


def _flags(names: Iterable[str]) -> int:
    flags = 0
    for name in names:
        flags |= getattr(re, name.upper())
    return flags


def parse_tree(text: str) -> Tree[Token]:
    """Parse KCQL text into a Lark tree.

    Raises:
        KcqlSyntaxError: the text does not follow ``kcql.lark``.
    """
    try:
        return kcql_parser().parse(text)
    except UnexpectedInput as exc:
        raise syntax_error(exc, text) from None


def syntax_error(exc: UnexpectedInput, text: str) -> KcqlSyntaxError:
    """Translate a Lark error into a :class:`KcqlSyntaxError` with words, position and label."""
    expected = _expected(exc)
    found, span = _found(exc, text)
    pos = exc.pos_in_stream
    pasted = _PASTED.get(text[pos]) if pos is not None and 0 <= pos < len(text) else None
    if pasted is not None:
        return KcqlSyntaxError(
            f"unexpected character {found}", span=span, hint=pasted, label="unexpected"
        )
    label = _label(exc, text)
    if label is not None:
        return KcqlSyntaxError(
            label.message.format(found=found),
            span=span,
            hint=label.hint,
            expected=expected,
            label=label.name,
        )
    if isinstance(exc, UnexpectedCharacters):
        message = f"unexpected character {found}"
    else:
        message = f"unexpected {found}"
    if expected:
        message += f", expected {one_of(expected)}"
    return KcqlSyntaxError(message, span=span, expected=expected, label="unexpected")


# Characters text copied from a document or a Windows editor brings along.
_QUOTE_HINT = "A typographic quote (copied from a document?): write ' or ` instead"
_PASTED = {
    "\ufeff": "A byte-order mark (a file saved by a Windows editor?): save it without one",
    "\u2018": _QUOTE_HINT,
    "\u2019": _QUOTE_HINT,
    "\u201c": _QUOTE_HINT,
    "\u201d": _QUOTE_HINT,
}


def _label(exc: UnexpectedInput, text: str) -> SyntaxLabel | None:
    if isinstance(exc, UnexpectedCharacters) and _unterminated_quote(text, exc.pos_in_stream):
        return UNTERMINATED_QUOTE
    if getattr(exc, "state", None) is None:
        return None

    def parse_example(example: str) -> Tree[Token]:
        return kcql_parser().parse(example)

    # use_accepts=False: with the contextual lexer, Lark's accepts-comparison path formats a
    # ParserState with %d and raises TypeError (lark 1.3.1). Matching on the parser state
    # (stack depth and LALR state) and then on the exact token is what we rely on.
    return exc.match_examples(parse_example, KCQL_ERROR_EXAMPLES, use_accepts=False)


def _unterminated_quote(text: str, pos: int | None) -> bool:
    """Whether ``pos`` opens a back-tick or single quote that is not closed on its line."""
    if pos is None or pos >= len(text) or text[pos] not in "`'":
        return False
    rest = text[pos + 1 :].split("\n", 1)[0]
    return text[pos] not in rest


def _expected(exc: UnexpectedInput) -> tuple[str, ...]:
    state = getattr(exc, "state", None)
    wanted = _accepted(state) if isinstance(state, ParserState) else set()
    return tuple(word for name, word in TERMINAL_WORDS.items() if name in wanted)


def _accepted(state: ParserState[Any]) -> set[str]:
    """The terminals the parser would really accept in ``state``.

    An LALR state's table lists the lookaheads of every context merged into it; feeding each
    one to a copy of the parser (as Lark's ``InteractiveParser.accepts`` does) keeps only
    those that lead somewhere. Lark's own lists are the merged ones for errors raised by the
    contextual lexer.
    """
    conf = copy(state.parse_conf)
    conf.callbacks = {}
    accepted: set[str] = set()
    for name in state.parse_conf.states[state.position]:
        if not name.isupper():
            continue
        trial = ParserState(conf, state.lexer, copy(state.state_stack), copy(state.value_stack))
        try:
            trial.feed_token(Token(name, ""), is_end=name == "$END")
        except UnexpectedToken:
            continue
        accepted.add(name)
    return accepted


def _found(exc: UnexpectedInput, text: str) -> tuple[str, Span]:
    """Describe what was found where the error is, and its span."""
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        if token.type == "$END":
            return "end of input", _end_span(token, text)
        span = Span(token.line or 1, token.column or 1, token.end_line or 1, token.end_column or 1)
        if token.type in _KEYWORD_TERMINALS:
            return token.value.upper(), span
        return repr(token.value), span
    assert isinstance(exc, UnexpectedCharacters)
    line, column = exc.line, exc.column
    return repr(text[exc.pos_in_stream or 0]), Span(line, column, line, column + 1)


def _end_span(token: Token, text: str) -> Span:
    """A zero-width span just after the last token (Lark places $END on the last token)."""
    if token.end_line is None or token.end_column is None or not text.strip():
        lines = text.splitlines() or [""]
        return Span(len(lines), len(lines[-1]) + 1, len(lines), len(lines[-1]) + 1)
    return Span(token.end_line, token.end_column, token.end_line, token.end_column)


# Where Lenses glues a following "--" into the name (it has no comments: "-" is a topic
# character and its topic, target and STOREAS names join adjacent words).
_GLUING_WORDS = ("topic", "target", "format")
_COMMENT_AFTER = re.compile(r"\s*--")


def refuse_glued_comments(text: str, statements: Iterable[Statement]) -> None:
    """Refuse a ``--`` comment right after a topic, target or STOREAS name.

    Lenses' KCQL has no comments: it reads ``FROM orders -- old topic`` as the topic
    ``orders--oldtopic`` (and ``STOREAS `JSON` -- x`` as the format ``JSON--``), so such a
    statement means something else to it.

    Raises:
        KcqlSyntaxError: the first such comment.
    """
    starts = [0]
    for text_line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(text_line))
    for statement in statements:
        for what in _GLUING_WORDS:
            word = getattr(statement, what)
            if word is None:
                continue
            span = word.span
            begin = starts[span.line - 1] + span.column - 1
            end = starts[span.end_line - 1] + span.end_column - 1
            match = _COMMENT_AFTER.match(text, end)
            if match is None:
                continue
            at = match.end() - 2
            line = text.count("\n", 0, at) + 1
            column = at - starts[line - 1] + 1
            stop = text.find("\n", at)
            glued = re.sub(r"\s+", "", text[begin : stop if stop >= 0 else len(text)])
            raise KcqlSyntaxError(
                f"a comment right after the {'STOREAS format' if what == 'format' else what} "
                f"would be part of it for Lenses, which has no comments (it reads {glued!r})",
                span=Span(line, column, line, column + 2),
                hint="Put the comment on a line of its own before the statement, or after ';'",
                label="glued-comment",
            )

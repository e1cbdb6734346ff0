"""Key-safe encoding of the values that become part of an object key.

Every value placed in a key (a PARTITIONBY value, a formatted date, the topic name) goes
through :func:`safe_segment`. Its output:

- is never empty, never ``.`` or ``..``, and never starts with ``.`` or ``_`` (Hadoop, Spark,
  Hive and Athena skip paths that start with either, and ``<prefix>/.kafka-archive/`` is
  where the state lives);
- never contains ``/``, a control character or one of the characters S3's documentation
  lists as needing special handling or to be avoided;
- is at most ``max_bytes`` UTF-8 bytes;
- is reversible: :func:`decode_segment` gives the value back (except for a value too long
  for the cap, see below).

Encoding rules, in order:

1. ASCII letters, digits, ``-``, ``.`` and ``_`` are kept, except a leading ``.`` or ``_``.
2. Every other ASCII character, a leading ``.`` or ``_``, and the invisible or
   control-like non-ASCII code points listed in ``_ESCAPED_RANGES`` (C1 controls, no-break
   and other odd spaces, zero-width and bidi controls, line/paragraph separators,
   surrogates, private-use and noncharacters) become ``%XX`` escapes of their UTF-8 bytes
   (upper-case hex; a lone surrogate is encoded as its 3 "surrogatepass" bytes, except
   bytes that were not valid UTF-8 — U+DC80..U+DCFF of a key read with
   ``surrogateescape`` — which are escaped as those bytes: ``FF FE`` is ``%FF%FE``).
3. All other non-ASCII characters are kept as they are (``München`` stays ``München``), so
   Hive, Spark and Athena show the value unchanged: they decode ``%XX`` one character at a
   time, which agrees with UTF-8 decoding for every escape of an ASCII character.
4. The empty string becomes :data:`EMPTY_SEGMENT` ``(empty)``.
5. If the result is longer than ``max_bytes``, it is cut (never inside an escape or a
   character) and ends with ``~`` and 16 hex digits of the SHA-256 of the value's UTF-8
   bytes: ``aaaa…aaa~3f1c9e0a4b7d2e61``. Such a segment cannot be decoded; the full value is
   still in the records themselves.

A record that lacks a PARTITIONBY field is not dropped: it goes under an explicit fallback
segment. In a ``name=value`` segment (KeysAndValues, confluent, hive) that is
:data:`HIVE_NULL_SEGMENT` ``__HIVE_DEFAULT_PARTITION__``, which Hive, Spark, Trino and
Athena read back as NULL. In a bare-value segment (the Lenses ``Values`` layout) it is
:data:`MISSING_SEGMENT` ``(missing)``, because those readers hide a directory that starts
with ``_`` and has no ``=``. Neither can be produced by encoding a real value: encoded values
never start with ``_`` and never contain a raw ``(``. ``decode_segment`` maps both to None.

Examples (see the tests)::

    safe_segment("DE")             == "DE"
    safe_segment("../../x")        == "%2E.%2F..%2Fx"
    safe_segment("a/b c")          == "a%2Fb%20c"
    safe_segment("_internal")      == "%5Finternal"
    safe_segment("München")        == "München"
    safe_segment("")               == "(empty)"
    safe_segment("(missing)")      == "%28missing%29"
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import re
from urllib.parse import unquote

SEGMENT_MAX_BYTES = 255
"""The default cap of one encoded value: a file or directory name on common file systems."""

MISSING_SEGMENT = "(missing)"
"""A bare-value segment for a record that lacks the field (Lenses writes ``[missing]``)."""

HIVE_NULL_SEGMENT = "__HIVE_DEFAULT_PARTITION__"
"""A ``name=value`` segment's value for a record that lacks the field: NULL to Hive readers."""

EMPTY_SEGMENT = "(empty)"
"""The segment of the empty string (an empty segment would be ``//`` in the key)."""

HASH_MARK = "~"
"""Separates the kept head of an over-long value from its hash."""

_HASH_HEX = 16
MIN_SEGMENT_BYTES = max(len(HIVE_NULL_SEGMENT), len(MISSING_SEGMENT), len(EMPTY_SEGMENT))
"""The smallest cap :func:`safe_segment` accepts: every fallback and every hashed form fits."""

_TOKENS: dict[str, str | None] = {
    MISSING_SEGMENT: None,
    HIVE_NULL_SEGMENT: None,
    EMPTY_SEGMENT: "",
}

# Non-ASCII code points that are invisible, control-like or not valid in UTF-8 text, as
# fixed ranges (not unicodedata categories, which change between Python versions and would
# change keys after an upgrade). Inclusive.
_ESCAPED_RANGES: tuple[tuple[int, int], ...] = (
    (0x0080, 0x00A0),  # C1 controls, no-break space
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x061C, 0x061C),  # Arabic letter mark
    (0x115F, 0x1160),  # Hangul fillers
    (0x1680, 0x1680),  # Ogham space mark
    (0x180E, 0x180E),  # Mongolian vowel separator
    (0x2000, 0x200F),  # spaces, zero-width characters, LRM, RLM
    (0x2028, 0x202F),  # line/paragraph separators, bidi embeddings, narrow no-break space
    (0x205F, 0x206F),  # math space, invisible operators, bidi isolates
    (0x3000, 0x3000),  # ideographic space
    (0x3164, 0x3164),  # Hangul filler
    (0xD800, 0xDFFF),  # surrogates (not encodable as UTF-8 text)
    (0xE000, 0xF8FF),  # private use
    (0xFDD0, 0xFDEF),  # noncharacters
    (0xFEFF, 0xFEFF),  # byte order mark
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFFF),  # specials, noncharacters
    (0xE0000, 0xE007F),  # tags
    (0xF0000, 0x10FFFF),  # supplementary private use
)

_PLAIN = re.compile(r"[A-Za-z0-9-][A-Za-z0-9._-]*")
_ASCII_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._")


def _escaped(code: int) -> bool:
    if code < 0x80:
        return chr(code) not in _ASCII_KEPT
    if (code & 0xFFFE) == 0xFFFE:  # U+xFFFE and U+xFFFF of every plane
        return True
    return any(low <= code <= high for low, high in _ESCAPED_RANGES)


def _escape(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))


def _piece(char: str, first: bool, raw: bool = False) -> str:
    """Return ``char`` as it appears in a segment: itself, or its ``%XX`` escapes (``raw``:
    a byte that was not valid UTF-8, escaped as that byte)."""
    if raw:
        return f"%{ord(char) - 0xDC00:02X}"
    if _escaped(ord(char)) or (first and char in "._"):
        return _escape(char)
    return char


# Bytes that are not valid UTF-8, as a key read with ``surrogateescape`` holds them
# (U+DC80..U+DCFF), escaped as the bytes: ``FF FE`` is ``%FF%FE`` (a URL decoder gives the
# bytes back), not the UTF-8 of each surrogate (``%ED%B3%BF%ED%B3%BE``, as written before).
_RAW_RUN = re.compile("[\udc80-\udcff]+")


def _raw_bytes(value: str) -> set[int]:
    """Indexes of ``value``'s characters that are escaped as raw bytes: runs of U+DC80..U+DCFF
    whose bytes decode back to the run alone (no valid UTF-8 inside, no byte ``ED``, which
    begins the old escape of a surrogate), so decoding gives the same text."""
    found: set[int] = set()
    for match in _RAW_RUN.finditer(value):
        run = match.group()
        data = bytes(ord(c) - 0xDC00 for c in run)
        if 0xED not in data and data.decode("utf-8", "surrogateescape") == run:
            found.update(range(match.start(), match.end()))
    return found


def _utf8_len(piece: str) -> int:
    code = ord(piece[0])
    if len(piece) > 1 or code < 0x80:  # escapes are ASCII
        return len(piece)
    return 2 if code < 0x800 else 3 if code < 0x10000 else 4


def escape_text(text: str) -> str:
    """Return ``text`` with rules 1-3 applied but a leading ``.`` or ``_`` kept, and no cap.

    For fixed text inside a segment, after other characters (``key.suffix``).
    """
    return "".join(_piece(c, first=False) for c in text)


def safe_segment(value: str, max_bytes: int = SEGMENT_MAX_BYTES) -> str:
    """Return ``value`` encoded as one safe, reversible key segment of at most ``max_bytes``.

    Args:
        value: any text, including ``/``, ``..``, control characters, lone surrogates.
        max_bytes: the cap in UTF-8 bytes; at least :data:`MIN_SEGMENT_BYTES`.

    Returns:
        The segment; equal inputs give equal outputs, distinct inputs distinct outputs
        (up to a 64-bit hash collision between two values longer than the cap).

    Raises:
        ValueError: ``max_bytes`` is below :data:`MIN_SEGMENT_BYTES`.
    """
    if max_bytes < MIN_SEGMENT_BYTES:
        raise ValueError(f"a key segment needs at least {MIN_SEGMENT_BYTES} bytes, not {max_bytes}")
    if len(value) > _CACHED_LENGTH:
        # Not cached: a huge value (a whole record value used as a partition) must not be
        # kept alive by the cache.
        return _encode_segment(value, max_bytes)
    return _cached_segment(value, max_bytes)


def topic_segment(topic: str) -> str:
    """The key segment that names ``topic`` (``_orders`` is ``%5Forders``): what a layout
    writes into keys, and so what a listing of a topic's folder must name."""
    return safe_segment(topic, SEGMENT_MAX_BYTES)


_CACHED_LENGTH = 512


@functools.lru_cache(maxsize=8192)
def _cached_segment(value: str, max_bytes: int) -> str:
    return _encode_segment(value, max_bytes)


def _encode_segment(value: str, max_bytes: int) -> str:
    if not value:
        return EMPTY_SEGMENT
    if len(value) <= max_bytes and _PLAIN.fullmatch(value):
        return value
    # Encode until the cap is passed (at most max_bytes + 1 characters are looked at),
    # remembering how many pieces fit before a hash suffix.
    budget = max_bytes - len(HASH_MARK) - _HASH_HEX
    pieces: list[str] = []
    used = 0
    fit = 0
    raw = _raw_bytes(value) if _RAW_RUN.search(value) else set()
    for index, char in enumerate(value):
        piece = _piece(char, first=index == 0, raw=index in raw)
        used += _utf8_len(piece)
        if used > max_bytes:
            break
        pieces.append(piece)
        if used <= budget:
            fit = len(pieces)
    else:
        return "".join(pieces)
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_HEX]
    return "".join(pieces[:fit]) + HASH_MARK + digest


def is_truncated(segment: str) -> bool:
    """Whether ``segment`` is the cut, hashed form of a value too long for its cap."""
    return HASH_MARK in segment


def decode_segment(segment: str) -> str | None:
    """Return the value that :func:`safe_segment` encoded as ``segment``.

    Returns:
        The value; None for a missing-field fallback (``(missing)`` or
        ``__HIVE_DEFAULT_PARTITION__``).

    Raises:
        ValueError: ``segment`` is the hashed form of an over-long value, whose full text is
            not in the key.
    """
    if segment in _TOKENS:
        return _TOKENS[segment]
    if is_truncated(segment):
        raise ValueError("the value was too long for the key and was cut and hashed")
    return unquote(segment, encoding="utf-8", errors=_SEGMENT_ERRORS)


def _segment_errors(exc: UnicodeError) -> tuple[str, int]:
    """Bytes of a segment that are not UTF-8: a surrogate's UTF-8 (``ED A0..BF 80..BF``,
    escaped so before bytes were escaped as bytes) is that surrogate; any other byte is
    itself, as ``surrogateescape`` reads it."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    data, at = exc.object, exc.start
    surrogate = bytes(data[at : at + 3])
    if re.fullmatch(b"\xed[\xa0-\xbf][\x80-\xbf]", surrogate):
        return surrogate.decode("utf-8", "surrogatepass"), at + 3
    return chr(0xDC00 + data[at]), at + 1


_SEGMENT_ERRORS = "kafka_archive.segment"
codecs.register_error(_SEGMENT_ERRORS, _segment_errors)

"""Record time as text: the ``java.time.format.DateTimeFormatter`` patterns of ``_date.<pattern>``.

The one place that knows the date letters: the KCQL compiler checks ``_date.<pattern>`` with
:func:`compile_pattern` (so ``validate`` refuses what a run would), and the archiver formats
key segments with the same compiled :class:`DatePattern`.

KCQL users write the patterns of the Lenses sink (``_date.uuuu``, ``_date.yyyy-MM-dd``,
``_date.HH``). :func:`compile_pattern` translates one into a :class:`DatePattern` that
formats an epoch-millisecond timestamp in a time zone, exactly as Java would for the
supported letters. Pure and deterministic: no clock, no locale.

Supported, with Java's meaning and widths (``n`` letters of one kind):

==============  ==============================================================
``u`` ``y``     year (``uuuu`` = ``2024``; ``uu`` = ``24``; ``u`` = unpadded)
``M`` ``L``     month number (``MM`` = ``05``, ``M`` = ``5``)
``d``           day of month (``dd``, ``d``)
``D``           day of year (``DDD`` = ``045``, ``D`` = ``45``)
``H``           hour 0-23; ``k`` 1-24; ``K`` 0-11; ``h`` 1-12
``m`` ``s``     minute, second
``S``           fraction of a second, 1 to 9 digits (``SSS`` = milliseconds)
``Q`` ``q``     quarter (``Q`` = ``2``, ``QQ`` = ``02``)
``'text'``      literal text; ``''`` is one quote
other           characters that are not ASCII letters are copied, except ``[ ] { } #``
==============  ==============================================================

Rejected, with a reason: ``Y`` (the week-based year, which differs from the calendar year
in the last days of December and the first of January; write ``uuuu`` or ``yyyy``), and the
letters whose output depends on a locale (month and day names, ``a``, ``w``, ``e``, ``E``,
``G``) or on zone rules text (``V``, ``z``, ``O``, ``X``, ``x``, ``Z``).

A timestamp outside the years 1 to 9999 in the zone cannot be formatted:
:meth:`DatePattern.format` and :func:`local_time` return None for it, and the key gets the
missing-field fallback.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Maximum pattern width per numeric letter (Java's "Too many pattern letters" limits).
_MAX_WIDTH = {
    "M": 2,
    "L": 2,
    "d": 2,
    "D": 3,
    "H": 2,
    "k": 2,
    "K": 2,
    "h": 2,
    "m": 2,
    "s": 2,
    "S": 9,
    "Q": 2,
    "q": 2,
    "u": 19,
    "y": 19,
}

_REJECTED = {
    "Y": "'Y' is the week-based year, which differs from the calendar year around "
    "New Year; write 'uuuu' or 'yyyy'",
    "w": "week numbers depend on a locale",
    "W": "week numbers depend on a locale",
    "e": "localized day-of-week depends on a locale",
    "c": "localized day-of-week depends on a locale",
    "E": "day names depend on a locale",
    "a": "AM/PM text depends on a locale; use 'HH'",
    "B": "day-period text depends on a locale",
    "G": "era names depend on a locale",
    "V": "zone ids contain '/'; the zone is fixed per route (partition.timezone)",
    "v": "zone names depend on a locale",
    "z": "zone names depend on a locale",
    "O": "zone offsets are not supported in key patterns",
    "X": "zone offsets are not supported in key patterns",
    "x": "zone offsets are not supported in key patterns",
    "Z": "zone offsets are not supported in key patterns",
}
_RESERVED = frozenset("[]{}#")


@dataclass(frozen=True, slots=True)
class _Text:
    text: str


@dataclass(frozen=True, slots=True)
class _Number:
    letter: str
    width: int


_Piece = _Text | _Number


@dataclass(frozen=True, slots=True)
class DatePattern:
    """A compiled pattern. Build it with :func:`compile_pattern`."""

    pattern: str
    pieces: tuple[_Piece, ...]

    def format(self, timestamp_ms: int, zone: tzinfo) -> str | None:
        """Return the text of ``timestamp_ms`` in ``zone``, or None if out of range."""
        local = local_time(timestamp_ms, zone)
        return None if local is None else self.render(local)

    def render(self, local: datetime) -> str:
        """Return the text of the wall-clock time ``local``."""
        return "".join(
            piece.text if isinstance(piece, _Text) else _number(piece, local)
            for piece in self.pieces
        )

    @property
    def letters(self) -> frozenset[str]:
        """The pattern letters used (``{'u', 'M'}`` for ``uuuu-MM``)."""
        return frozenset(piece.letter for piece in self.pieces if isinstance(piece, _Number))

    @property
    def reduced_year(self) -> bool:
        """Whether the year is written with two digits (``uu``: 2024 and 2124 look alike)."""
        return any(
            isinstance(p, _Number) and p.letter in "uy" and p.width == 2 for p in self.pieces
        )


def local_time(timestamp_ms: int, zone: tzinfo) -> datetime | None:
    """Return the wall-clock time of ``timestamp_ms`` in ``zone``, or None if not in years 1-9999.

    Integer arithmetic throughout: no float rounding of milliseconds.
    """
    try:
        return (_EPOCH + timedelta(milliseconds=timestamp_ms)).astimezone(zone)
    except (OverflowError, ValueError):
        return None


def time_zone(name: str) -> tzinfo:
    """Return the IANA time zone ``name`` (``UTC``, ``Europe/Paris``).

    Raises:
        ValueError: no such zone in the time zone database.
    """
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(
            f"unknown time zone {name!r}: expected an IANA name such as 'UTC' or 'Europe/Paris'"
        ) from exc


def compile_pattern(pattern: str) -> DatePattern:
    """Return the :class:`DatePattern` of a Java ``DateTimeFormatter`` pattern.

    Raises:
        ValueError: the pattern is empty, uses an unsupported or rejected letter, has too
            many letters of one kind, an unterminated quote or an optional section.
    """
    if not pattern:
        raise ValueError("empty date pattern")
    pieces: list[_Piece] = []
    literal: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = i + 1
            text: list[str] = []
            while True:
                if end >= len(pattern):
                    raise ValueError(f"date pattern {pattern!r}: unterminated quoted text")
                if pattern[end] == "'":
                    if end + 1 < len(pattern) and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            literal.append("".join(text) if text or end > i + 1 else "'")
            i = end + 1
            continue
        if ("A" <= char <= "Z") or ("a" <= char <= "z"):
            run = 1
            while i + run < len(pattern) and pattern[i + run] == char:
                run += 1
            pieces.extend(_flush(literal))
            pieces.append(_letter(pattern, char, run))
            i += run
            continue
        if char in _RESERVED:
            raise ValueError(
                f"date pattern {pattern!r}: {char!r} is reserved (optional sections are not "
                f"supported); quote it as '{char}'"
            )
        literal.append(char)
        i += 1
    pieces.extend(_flush(literal))
    return DatePattern(pattern, tuple(pieces))


def _flush(literal: list[str]) -> list[_Piece]:
    if not literal:
        return []
    text = "".join(literal)
    literal.clear()
    return [_Text(text)]


def _letter(pattern: str, letter: str, width: int) -> _Number:
    if letter in _REJECTED:
        raise ValueError(f"date pattern {pattern!r}: {_REJECTED[letter]}")
    if letter not in _MAX_WIDTH:
        raise ValueError(
            f"date pattern {pattern!r}: unsupported letter {letter!r}; supported: "
            + " ".join(sorted(_MAX_WIDTH))
        )
    if width > _MAX_WIDTH[letter]:
        hint = " (month names depend on a locale; use 'MM')" if letter in "ML" else ""
        hint = " (quarter names depend on a locale; use 'Q')" if letter in "Qq" else hint
        raise ValueError(f"date pattern {pattern!r}: too many pattern letters {letter!r}{hint}")
    return _Number(letter, width)


def _number(piece: _Number, local: datetime) -> str:
    letter, width = piece.letter, piece.width
    if letter in "uy":
        if width == 2:  # Java's reduced two-digit year
            return f"{local.year % 100:02d}"
        return f"{local.year:0{width}d}"
    if letter == "S":
        return f"{local.microsecond * 1000:09d}"[:width]
    return f"{_FIELDS[letter](local):0{width}d}"


_FIELDS: dict[str, Callable[[datetime], int]] = {
    "M": lambda t: t.month,
    "L": lambda t: t.month,
    "d": lambda t: t.day,
    "D": lambda t: t.timetuple().tm_yday,
    "H": lambda t: t.hour,
    "k": lambda t: t.hour or 24,
    "K": lambda t: t.hour % 12,
    "h": lambda t: t.hour % 12 or 12,
    "m": lambda t: t.minute,
    "s": lambda t: t.second,
    "Q": lambda t: (t.month - 1) // 3 + 1,
    "q": lambda t: (t.month - 1) // 3 + 1,
}


_DATE_NAMES = {
    frozenset("u"): "year",
    frozenset("y"): "year",
    frozenset("M"): "month",
    frozenset("L"): "month",
    frozenset("d"): "day",
    frozenset("D"): "dayofyear",
    frozenset("H"): "hour",
    frozenset("k"): "hour",
    frozenset("K"): "hour",
    frozenset("h"): "hour",
    frozenset("m"): "minute",
    frozenset("s"): "second",
    frozenset("Q"): "quarter",
    frozenset("q"): "quarter",
}


def field_name(pattern: DatePattern) -> str:
    """What a ``_date`` field is named in ``name=value`` segments and ``{field:NAME}``:
    ``year`` for ``uuuu``, ``month`` for ``MM``, …, ``date`` for a pattern of several fields
    (as Lenses names every date field)."""
    return _DATE_NAMES.get(pattern.letters, "date")

"""Read an object key back: the inverse of :meth:`Layout.key`.

Every layout is validated so that topic, partition and start offset can be read back from
every key it produces (``layouts._check_unambiguous``); this module does the reading, for
the commands that work on an existing archive (``verify``, ``cat``, ``restore``).
``parse_key(layout, layout.key(tp, offset, group)) == ParsedKey(tp, offset, group)``
holds for every group :meth:`Layout.group` can return (a hypothesis test says so).
A key a rewrite made (compact, issue 38: ``.g<N>`` after the offset, before the extension,
where ``key.suffix`` goes) or an attempt's own key (commit_protocol=log, formats with no
place for a stamp: ``.e<epoch>a<attempt>`` there) reads as the key without it: the same
partition, first offset and group.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from kafka_archive.archiver.core.model import TopicPartition
from kafka_archive.archiver.partition.layouts import (
    MAX_OFFSET,
    MAX_PARTITION,
    Layout,
    SlotKind,
    Text,
)
from kafka_archive.archiver.partition.values import (
    HIVE_NULL_SEGMENT,
    MISSING_SEGMENT,
    decode_segment,
)
from kafka_archive.kcql.plan import Padding

_SLOT_GROUPS = {
    SlotKind.TOPIC: "topic",
    SlotKind.PARTITION: "partition",
    SlotKind.OFFSET: "offset",
}


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """What a key says: whose records, from which offset, in which group (encoded values)."""

    tp: TopicPartition
    start_offset: int
    group: tuple[str | None, ...]


@functools.lru_cache(maxsize=256)
def _pattern(layout: Layout) -> re.Pattern[str]:
    out = [re.escape(layout.prefix + "/")] if layout.prefix else []
    seen: set[str] = set()
    for part in layout.parts:
        if isinstance(part, Text):
            out.append(re.escape(part.text))
            continue
        name = _SLOT_GROUPS.get(part.kind) or f"g{part.index}"
        # A placeholder a template repeats must read the same text each time.
        out.append(f"(?P={name})" if name in seen else f"(?P<{name}>[^/]+?)")
        seen.add(name)
    return re.compile("".join(out), re.DOTALL)


def listing_prefix(layout: Layout) -> str:
    """The longest fixed start of every key of ``layout``: what to list to find them all."""
    out = layout.prefix + "/" if layout.prefix else ""
    for part in layout.parts:
        if not isinstance(part, Text):
            break
        out += part.text
    return out


def _number(text: str, layout: Layout, limit: int) -> int | None:
    naming = layout.naming
    if naming.padding is Padding.LEFT:
        stripped = text.lstrip(naming.padding_char) or ("0" if naming.padding_char == "0" else "")
    elif naming.padding is Padding.RIGHT:
        stripped = text.rstrip(naming.padding_char)
    else:
        stripped = text
    if not stripped.isascii() or not stripped.isdigit():
        return None
    number = int(stripped)
    return number if number <= limit else None


# A generation (.g<N>) or an attempt (.e<epoch>a<attempt>) before the extension.
_SUFFIX = re.compile(r"\.(?:g[1-9][0-9]*|e[0-9]+a[0-9]+)(?=\.[^/]*$)")


def without_suffixes(name: str) -> str:
    """An object's file name without a generation or attempt (``.g<N>``, ``.e<N>a<N>``)."""
    return _SUFFIX.sub("", name)


def parse_key(layout: Layout, key: str) -> ParsedKey | None:
    """Return what ``key`` names, or None when ``layout`` cannot have produced it (nor a
    rewrite of an object it produced, nor an attempt's own key: ``.g<N>``, ``.e<N>a<N>``
    before the extension)."""
    parsed = _parse(layout, key)
    if parsed is not None:
        return parsed
    folder, _, name = key.rpartition("/")
    found = list(_SUFFIX.finditer(name))
    bares = [name[: f.start()] + name[f.end() :] for f in reversed(found)]
    if len(found) > 1:
        bares.append(without_suffixes(name))  # a compacted attempt key: .g<N>.e<N>a<N>
    for bare in bares:
        parsed = _parse(layout, f"{folder}/{bare}" if folder else bare)
        if parsed is not None:
            return parsed
    return None


def _parse(layout: Layout, key: str) -> ParsedKey | None:
    match = _pattern(layout).fullmatch(key)
    if match is None:
        return None
    topic = decode_segment(match["topic"])
    partition = _number(match["partition"], layout, MAX_PARTITION)
    offset = _number(match["offset"], layout, MAX_OFFSET)
    if not topic or partition is None or offset is None:
        return None
    size = len(layout.fields) + len(layout.times)
    group: list[str | None] = [None] * size
    for index in range(size):
        text = match.group(f"g{index}") if f"g{index}" in match.re.groupindex else None
        group[index] = None if text in (None, MISSING_SEGMENT, HIVE_NULL_SEGMENT) else text
    return ParsedKey(TopicPartition(topic, partition), offset, tuple(group))

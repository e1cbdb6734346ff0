"""Which sink wrote an archive, told by its object names (``--layout`` left out)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from kafka_archive.archiver.core.errors import ConfigError, NotInArchiveError
from kafka_archive.archiver.read.foreign import LAYOUTS, layout_for
from kafka_archive.archiver.state.paths import STATE_DIR

SAMPLE = 1000
"""Keys looked at: the first of the listing (one page)."""


def detect(relative_keys: Iterable[tuple[str, int]], where: str) -> str:
    """The layout whose names the keys (relative to the archive's prefix) follow.

    A key is counted for every layout that reads it as a data object; the layout reading
    the most wins, and must read more than half of them. Kafka-archive's own objects
    (``.kafka-archive/``) are left out: an archive we wrote needs no ``--layout``.

    Raises:
        NotInArchiveError: no objects.
        ConfigError: no layout reads most of them, or two read as many.
    """
    keys = [
        (k, s)
        for k, s in itertools.islice(relative_keys, SAMPLE)
        if not k.startswith(f"{STATE_DIR}/") and f"/{STATE_DIR}/" not in f"/{k}"
    ]
    if not keys:
        raise NotInArchiveError(f"no objects under {where}", hint="Check --from")
    counts = {
        name: sum(1 for k, s in keys if layout_for(name).parse(k, s) is not None)
        for name in LAYOUTS
    }
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    (best, most), (_, next_most) = ranked[0], ranked[1]
    if most * 2 <= len(keys) or most == next_most:
        seen = ", ".join(f"{name} {n}" for name, n in ranked)
        raise ConfigError(
            f"cannot tell which sink wrote {where}: of {len(keys)} object name(s), each "
            f"layout reads {seen}",
            hint=f"Pass --layout ({', '.join(LAYOUTS)}) and the connector's naming "
            "properties with --layout-option NAME=VALUE",
        )
    return best

"""The user's cache directory of kafka-archive: things a run builds once and reuses (KCQL's
parser tables, the JVM's class-data archive, `submit`'s zip). A leaf below `kcql` and the
archiver, which both use it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def user_cache_dir(environ: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/kafka-archive``, else ``~/.cache/kafka-archive`` (the XDG base
    directory spec ignores a relative ``XDG_CACHE_HOME``)."""
    base = environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "kafka-archive"

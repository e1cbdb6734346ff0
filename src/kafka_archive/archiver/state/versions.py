"""Format versions of the documents one run writes for another to read: the partition state
(:mod:`.checkpoint`), the intent markers (:mod:`.pending`), the target's lock
(:mod:`.lock`) and the route's topic id (:mod:`.identity`).

Each carries ``"version"``; a reader refuses a version above the one it understands
(:class:`.errors.FormatVersionError`, exit 24) instead of misreading it, e.g. an older
recovery taking a marker that names several objects for one naming only its first, and
leaving the others behind. A document without the field was written before versions were
checked, in the format of version 1. A version goes up only when an older reader would
misread the document; a field an older reader may ignore does not raise it.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_archive.archiver.core.errors import FormatVersionError

STATE_VERSION = 1
MARKER_VERSION = 1
# A lock in a newer format may mean a lease this version cannot judge (whether it expired,
# whether its holder is dead): it is refused, not taken over.
LOCK_VERSION = 1
TOPIC_ID_VERSION = 1
FIELD = "version"


def version_of(body: Mapping[str, object]) -> int | None:
    """The format version ``body`` names: 1 when it names none, None when what it names is
    not a version (not a positive integer)."""
    value = body.get(FIELD, 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def require(body: Mapping[str, object], understood: int, what: str) -> None:
    """Refuse ``body`` (``what``: the document and its key, for the message) unless its
    format version is one this version reads (``understood`` or below)."""
    version = version_of(body)
    if version is not None and version <= understood:
        return
    if version is None:
        raise FormatVersionError(
            f"{what} names format version {body.get(FIELD)!r}, which is not one kafka-archive "
            "writes",
            hint="The object is damaged, or not kafka-archive's; restore it from a backup "
            "or version of the bucket",
        )
    raise FormatVersionError(
        f"{what} is in format version {version}, newer than this kafka-archive reads (up to "
        f"{understood}): a newer kafka-archive wrote it",
        hint="Run the same or a newer version of kafka-archive on this prefix (after a "
        "crash, recover with the version that crashed, or a newer one)",
    )

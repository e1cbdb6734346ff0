"""``kafka-archive erase`` and ``kafka-archive expire`` (issue 38) on targets that keep a
commit log: the records of some keys, or those before a time, removed from every committed
object that holds one, exactly once.

Both are the maintenance session of :mod:`.compact` (claim, rewrite, one rewrite entry per
round, vacuum; killed anywhere, a rerun finishes the work) with another request: every
committed object is read alone (only reading it tells what it holds), written again without
the records that go, and swapped in by a rewrite entry that records the offsets removed per
partition as ranges, with their reason (``erased``, ``expired``) and time: never a key. An
object that holds none of them stays as it is; one of which every record goes is replaced
by nothing. The committed end does not move, so a later ``run`` archives nothing again.

Refused up front, one line and exit 2, nothing written: ``erase`` on a route whose stored
records carry no key (no ``store.envelope``, or one without its key) and no ``--key-field``;
``expire`` on a route whose stored records carry no time (no envelope with its metadata).

``expire`` plans by the record-time bounds the log names with each object: one wholly
before the cut is replaced by nothing without being read (its offsets recorded expired),
one wholly at or after it left alone unread; only those that span it, or whose bounds are
unknown (written before bounds, imported), are read (one GET each) and rewritten.
"""

from __future__ import annotations

from collections.abc import Collection

from kafka_archive.archiver.commands.compact import CompactResult, Job, maintain
from kafka_archive.archiver.config.settings import Settings
from kafka_archive.archiver.core.errors import ConfigError
from kafka_archive.archiver.plan import maintenance
from kafka_archive.archiver.write.rewrite import drop_before, drop_keys
from kafka_archive.kcql.plan import Plan


def erase(
    settings: Settings, plan: Plan, keys: Collection[bytes], key_field: str | None = None
) -> CompactResult:
    """Remove every record of ``keys`` (the record's key, or with ``key_field`` that field of
    its value, compared as text) from every target of ``plan`` (the module's doc)."""
    if not keys:
        raise ConfigError(
            "erase: no key given", hint="Name the keys with --key K (repeatable) or --key-file F"
        )
    if key_field is None:
        for route in plan.routes:
            if not (route.envelope.enabled and route.envelope.key):
                raise ConfigError(
                    f"erase: {route.topic}: the archive stores no record keys "
                    "(no 'store.envelope' with its key)",
                    hint="Add --key-field FIELD: the field of the stored value that holds the key",
                )
    job = Job(
        "erase",
        maintenance.Erase(frozenset(keys)),
        drop_keys(keys, key_field),
        "erased",
    )
    return maintain(settings, plan, job)


def expire(settings: Settings, plan: Plan, cut_ms: int) -> CompactResult:
    """Remove every record whose time is before ``cut_ms`` (epoch ms) from every target of
    ``plan`` (the module's doc)."""
    for route in plan.routes:
        if not (route.envelope.enabled and route.envelope.metadata):
            raise ConfigError(
                f"expire: {route.topic}: the archive stores no record times "
                "(no 'store.envelope' with its metadata)",
                hint="Only archives written with PROPERTIES('store.envelope'=true) can be "
                "expired record by record; S3 lifecycle rules expire whole objects",
            )
    job = Job("expire", maintenance.Expire(cut_ms), drop_before(cut_ms), "expired")
    return maintain(settings, plan, job)
